"""A real Prometheus (Debian's package) on backfilled data: the series are written as OpenMetrics, turned
into TSDB blocks with `promtool tsdb create-blocks-from openmetrics` and served by a fresh `prometheus`."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hour_start(hours_ago: int = 4) -> int:
    """Minute 0 `hours_ago` hours ago on a whole hour: inside the default retention, and whole minutes as
    rules' samples fall."""
    return (int(time.time()) // 3600 - hours_ago) * 3600


@contextmanager
def backfilled(tmp: Path, openmetrics: str) -> Iterator[str]:
    """Prometheus' URL, serving `openmetrics` (a `# EOF`-terminated OpenMetrics text) until exit."""
    (tmp / "data.om").write_text(openmetrics)
    got = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", "data.om", "tsdb"],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stdout + got.stderr
    (tmp / "prometheus.yml").write_text(yaml.safe_dump({"global": {"scrape_interval": "1m"}}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise AssertionError((tmp / "prometheus.log").read_text()[-2000:])
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def instant(url: str, query: str, at: float) -> list[dict[str, Any]]:
    """An instant query's vector result ({"metric": {...}, "value": [t, "v"]} rows) at `at` (Unix s)."""
    data = urllib.parse.urlencode({"query": query, "time": str(at)}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=30) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    result = body["data"]["result"]
    if body["data"]["resultType"] == "scalar":
        return [{"metric": {}, "value": result}]
    return result
