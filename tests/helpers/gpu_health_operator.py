"""The GPU health operator as its pod runs it (`python -m controllers gpu-health`, the entry point's command)
against the fake Kubernetes API, for the integration tests of the GPU health and idle reclaim controllers."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

from components.incluster.gpu_health import DIAG, XID_QUERY
from components.spec import APPLICATION_XIDS
from contract.recovery import CONFIG_ENV
from tests.helpers.plans import ROOT
from tests.helpers.procs import group_process

ROUND_S = 0.5  # the operator's intervalSeconds here


def wait_for(what, check, proc, timeout=45.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        assert proc.poll() is None, f"the operator exited ({proc.returncode}) before {what}"
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def operator(tmp_path, kube, **config_overrides):
    """The operator as the pod runs it (`trainplane-controller gpu-health`: the package's entry point),
    against the fake API (kubeconfig) and its Prometheus route; in a process group of its own."""
    app = tmp_path / "app"
    app.mkdir()
    config = {
        "pools": [{"name": "h100", "matchLabels": {"trainplane.dev/pool": "h100"}, "expectedGpus": 8}],
        "diagnostic": {
            "enabled": True,
            "namespace": "gpu-operator",
            "podSelector": f"app={DIAG}",
            "container": "dcgm-diag",
        },
        "ignoredXids": list(APPLICATION_XIDS),
        "startupGraceSeconds": 1200,
        "prometheusUrl": kube.url,
        "xidQuery": XID_QUERY,
        # Rounds every half second (a float, node_reconcile.Controller); the sleeps below are in ROUNDS.
        "intervalSeconds": ROUND_S,
        "quarantine": {"evictGpuPods": True},
        **config_overrides,
    }
    (app / "config.json").write_text(json.dumps(config))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "KUBECONFIG": kube.server.kubeconfig(tmp_path / "kubeconfig"),
        CONFIG_ENV: str(app / "config.json"),
        "HOME": str(tmp_path),
    }
    cmd = [sys.executable, "-m", "controllers", "gpu-health"]
    try:
        with (
            (tmp_path / "operator.log").open("w") as log,
            group_process(cmd, cwd=app, env=env, stdout=log, stderr=subprocess.STDOUT, text=True) as proc,
        ):
            yield proc
    finally:
        kube.close()  # after the operator stopped: it must not see the API go away while it runs
