"""What the in-cluster controllers share: the log line and the loop of the polling agents (their liveness
probe, which reads the loop's heartbeat, is the library's: components/incluster/block_window.py).

The Capacity Block window controller (block_window_agent.py) is such a loop; both it and the GPU health
operator (gpu_health_operator.py, kopf) make their own calls through kube.Kube (the `kubernetes` client).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from controllers.kube import CALL_FAILED, Kube

JSON_PATCH = "application/json-patch+json"

# A round that failed: a call (kube.CALL_FAILED) or a config it could not read; logged and retried.
ROUND_FAILED: tuple[type[Exception], ...] = (*CALL_FAILED, ValueError, KeyError)


def quantity(value: Any) -> int | None:
    """An integer extended-resource quantity ("8"); None when absent or not a plain integer.

    >>> quantity("8"), quantity(None), quantity("1Gi")
    (8, None, None)
    """
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def log(event: str, **fields: Any) -> None:
    """One JSON line per event on stdout (the pod log)."""
    print(json.dumps({"ts": round(time.time(), 3), "event": event, **fields}, sort_keys=True), flush=True)


def run(
    prog: str,
    description: str,
    argv: list[str] | None,
    reconcile: Callable[[Any, dict], Any],
    make_api: Callable[[str | None, str | None], Any] = Kube.from_environment,
) -> int:
    """The controller's command line and loop: a round every `intervalSeconds` of its config; a failed
    round is logged and retried (with --once: exit 1). Exit 2 when there is no API to talk to."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", required=True)
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    # Written after every round, failed ones included: the pod's liveness probe restarts a loop that
    # stopped coming round, not one whose rounds the API refuses (those are logged and retried).
    parser.add_argument("--heartbeat", help="a file whose mtime is the end of the last round")
    # In the pod its service account; outside one (tests, a laptop) a kubeconfig, or an address alone.
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--api-url")
    args = parser.parse_args(argv)
    if not (args.api_url or args.kubeconfig or os.environ.get("KUBERNETES_SERVICE_HOST")):
        print(
            f"{prog}: no Kubernetes API (KUBERNETES_SERVICE_HOST unset, no --kubeconfig, no --api-url)",
            file=sys.stderr,
        )
        return 2
    with open(args.config) as f:
        config = json.load(f)
    api = make_api(args.api_url, args.kubeconfig)
    while True:
        try:
            reconcile(api, config)
        except ROUND_FAILED as e:
            log("round_failed", error=repr(e))
            if args.once:
                return 1
        if args.heartbeat:
            with open(args.heartbeat, "w") as f:
                f.write(f"{time.time():.0f}\n")
        if args.once:
            return 0
        time.sleep(float(config["intervalSeconds"]))
