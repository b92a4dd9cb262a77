"""What the in-cluster controllers shipped as files share: the API client, the log line and the loop.

The Capacity Block window controller (block_window_agent.py) runs on a stock Python image from a
ConfigMap, so it uses the standard library only; the GPU health operator (gpu_health_operator.py, kopf)
makes its own calls (patches, evictions, Events) with `KubeApi` too. This file ships next to each of them
(the ConfigMap's `agent_runtime.py`), and is imported from the package when they run in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
JSON_PATCH = "application/json-patch+json"


def liveness_probe(heartbeat: str, max_age_s: int) -> dict[str, Any]:
    """An exec probe that fails once `heartbeat` (run's --heartbeat) is older than `max_age_s` or absent."""
    check = f"import os,sys,time; sys.exit(time.time() - os.stat({heartbeat!r}).st_mtime > {max_age_s})"
    return {
        "exec": {"command": ["python3", "-c", check]},
        "initialDelaySeconds": 60,
        "periodSeconds": 60,
        "timeoutSeconds": 10,
        "failureThreshold": 3,
    }


def quantity(value: Any) -> int | None:
    """An integer extended-resource quantity ("8"); None when absent or not a plain integer.

    >>> quantity("8"), quantity(None), quantity("1Gi")
    (8, None, None)
    """
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


class KubeApi:
    """Requests to the Kubernetes API with the pod's service-account token."""

    def __init__(
        self, url: str, token_file: str | None, ca_file: str | None, token: str | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.token_file = token_file
        # A fixed token (a kubeconfig's, outside the pod); the pod's token file wins when both are given.
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file) if url.startswith("https") else None

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        headers = {"Accept": "application/json"}
        if self.token_file:
            # Bound tokens rotate: read the file on every call.
            with open(self.token_file) as f:
                headers["Authorization"] = f"Bearer {f.read().strip()}"
        elif self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type or "application/json"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=30, context=self.context) as resp:
            return json.loads(resp.read() or b"null")


def log(event: str, **fields: Any) -> None:
    """One JSON line per event on stdout (the pod log)."""
    print(json.dumps({"ts": round(time.time(), 3), "event": event, **fields}, sort_keys=True), flush=True)


def run(
    prog: str,
    description: str,
    argv: list[str] | None,
    make_api: Callable[[str, str | None, str | None], Any],
    reconcile: Callable[[Any, dict], Any],
) -> int:
    """The controller's command line and loop: a round every `intervalSeconds` of its config; a failed
    round is logged and retried (with --once: exit 1). Exit 2 when there is no API to talk to."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", required=True)
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    # Written after every round, failed ones included: the pod's liveness probe restarts a loop that
    # stopped coming round, not one whose rounds the API refuses (those are logged and retried).
    parser.add_argument("--heartbeat", help="a file whose mtime is the end of the last round")
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    parser.add_argument("--api-url", default=f"https://{host}:{port}" if host else None)
    parser.add_argument("--token-file", default=f"{SA_DIR}/token")
    parser.add_argument("--ca-file", default=f"{SA_DIR}/ca.crt")
    args = parser.parse_args(argv)
    if not args.api_url:
        print(f"{prog}: no Kubernetes API (KUBERNETES_SERVICE_HOST unset and no --api-url)", file=sys.stderr)
        return 2
    with open(args.config) as f:
        config = json.load(f)
    token = args.token_file if os.path.exists(args.token_file) else None
    ca = args.ca_file if os.path.exists(args.ca_file) else None
    api = make_api(args.api_url, token, ca)
    while True:
        try:
            reconcile(api, config)
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            log("round_failed", error=repr(e))
            if args.once:
                return 1
        if args.heartbeat:
            with open(args.heartbeat, "w") as f:
                f.write(f"{time.time():.0f}\n")
        if args.once:
            return 0
        time.sleep(float(config["intervalSeconds"]))
