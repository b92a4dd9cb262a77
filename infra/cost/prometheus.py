"""Instant queries against Prometheus' HTTP API (prometheus/prometheus docs/querying/api.md:
GET /api/v1/query?query=&time=, answer {"status": "success", "data": {"resultType": "vector",
"result": [{"metric": {...}, "value": [ts, "1.5"]}]}}), every failure one UsageError line."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

from infra.stacks import UsageError

TIMEOUT_S = 60


def query(url: str, promql: str, at: datetime) -> list[tuple[dict[str, str], float]]:
    """The instant vector `promql` evaluates to at `at`: (labels, value) per series."""
    if not url.startswith(("http://", "https://")):
        raise UsageError([f"--prometheus {url}: not an http:// or https:// URL"])
    params = urllib.parse.urlencode({"query": promql, "time": f"{at.timestamp():.3f}"})
    endpoint = f"{url.rstrip('/')}/api/v1/query?{params}"
    try:
        with urllib.request.urlopen(endpoint, timeout=TIMEOUT_S) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as e:
        raise UsageError([f"Prometheus at {url} refused the query: HTTP {e.code} {_api_error(e)}"]) from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise UsageError([f"cannot reach Prometheus at {url}: {reason}"]) from None
    except json.JSONDecodeError:
        raise UsageError(
            [f"{url} answered /api/v1/query with something that is not JSON: not Prometheus?"]
        ) from None
    data = body.get("data") if isinstance(body, dict) else None
    if body.get("status") != "success" or not isinstance(data, dict) or data.get("resultType") != "vector":
        raise UsageError([f"Prometheus at {url}: query failed: {body.get('error', 'unexpected answer')}"])
    return [(r["metric"], float(r["value"][1])) for r in data["result"]]


def _api_error(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.load(e).get("error", e.reason))
    except (json.JSONDecodeError, AttributeError, ValueError):
        return str(e.reason)
