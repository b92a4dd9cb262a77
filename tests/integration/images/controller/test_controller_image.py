"""The controller image as built (images/controller/build.py, `make image`): its OCI layout unpacked into a
root file system, its entry point run there (chroot, as nobody: the pods' user) against the fake API
servers. The block-window agent patches a ClusterQueue with the kubeconfig's token; the GPU health
operator (kopf) lists and watches nodes and quarantines the node with an XID, with nothing from this
checkout's venv on its path. Needs root (debootstrap, chroot) and a Debian mirror and PyPI for the first
build (the base layer is cached in build/images/cache); skips with the reason elsewhere.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest

from components.incluster.gpu_health import DIAG, XID_QUERY
from components.spec import APPLICATION_XIDS
from contract.recovery import CONFIG_ENV, QUARANTINE_CONDITION
from tests.helpers import procs
from tests.helpers.fake_k8s import FakeCluster
from tests.helpers.fake_kube import FakeKube
from tests.helpers.gpu_health import kube_node
from tests.helpers.plans import ROOT
from tests.helpers.procs import group_process, run_group

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or not shutil.which("debootstrap") or not shutil.which("chroot"),
        reason="building and running the image needs root, debootstrap and chroot (.ci/run installs them)",
    ),
]

NOBODY = "65534:65534"
QUEUE = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/research"


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """(the layout's folder, its config, the unpacked root file system)."""
    out = tmp_path_factory.mktemp("image") / "controller"
    build = [sys.executable, str(ROOT / "images/controller/build.py"), "--out", str(out)]
    done = run_group(build, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    blob = lambda digest: (out / "blobs" / "sha256" / digest.split(":")[1]).read_bytes()  # noqa: E731
    (ref,) = json.loads((out / "index.json").read_text())["manifests"]
    assert (out / "DIGEST").read_text().strip() == ref["digest"]
    manifest = json.loads(blob(ref["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))
    rootfs = out.parent / "rootfs"
    rootfs.mkdir()
    for layer, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"], strict=True):
        raw = gzip.decompress(blob(layer["digest"]))
        assert "sha256:" + __import__("hashlib").sha256(raw).hexdigest() == diff_id
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            tar.extractall(rootfs, numeric_owner=True, filter="fully_trusted")
    (rootfs / "etc/trainplane").mkdir(parents=True)
    return out, config, rootfs


def in_image(rootfs: Path, config: dict, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run the image's entry point in `rootfs`, as its user."""
    env = dict(e.split("=", 1) for e in config["config"]["Env"])
    cmd = [
        str(shutil.which("chroot")),
        f"--userspec={config['config']['User']}",
        str(rootfs),
        *config["config"]["Entrypoint"],
    ]
    return [*cmd, *args], env


def test_the_image_runs_as_nobody_from_its_entry_point(image):
    _, config, rootfs = image
    assert config["config"]["User"] == NOBODY and config["config"]["Entrypoint"] == ["trainplane-controller"]
    assert (rootfs / "usr/local/bin/trainplane-controller").stat().st_mode & 0o111
    # Only the package, no library: the image carries controllers/, not components/ or infra/.
    site = rootfs / "opt/trainplane/site-packages"
    assert (site / "controllers/__main__.py").exists() and not (site / "components").exists()


def test_the_block_window_agent_in_the_image_patches_the_queue_with_the_kubeconfigs_token(image):
    _, config, rootfs = image
    now = time.time()
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "research", "resourceVersion": "1"},
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {"name": "block", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}
                    ]
                }
            ]
        },
    }
    agent_config = {
        "intervalSeconds": 60,
        "drainSeconds": 1800,
        "flavors": [
            {
                "name": "block",
                "borrowing": False,
                # The block starts in an hour: the flavor is closed now.
                "pools": [{"name": "h100-block", "gpus": 8, "start": now + 3600, "end": now + 7200}],
                "teams": [{"team": "research", "gpuQuota": 8, "clusterQueue": "research"}],
            }
        ],
    }
    cluster = FakeCluster([], [], [], objects={QUEUE: queue})
    try:
        (rootfs / "etc/trainplane/config.json").write_text(json.dumps(agent_config))
        cluster.server.kubeconfig(rootfs / "etc/trainplane/kubeconfig")
        args = ["block-window", "--config", "/etc/trainplane/config.json", "--once"]
        cmd, env = in_image(rootfs, config, *args, "--kubeconfig", "/etc/trainplane/kubeconfig")
        done = procs.run(cmd, env=env, capture_output=True, text=True, timeout=120, start_new_session=True)
    finally:
        cluster.server.close()
    assert done.returncode == 0, done.stderr
    assert ("GET", QUEUE) in cluster.server.requests and ("PATCH", QUEUE) in cluster.server.requests
    assert cluster.auth == {"Bearer read-only"}
    assert '"event": "quota_set"' in done.stdout and '"nominal": 0' in done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_gpu_health_operator_in_the_image_watches_nodes_and_quarantines_one(image, tmp_path):
    _, config, rootfs = image
    xid = {"metric": {"node": "bad", "gpu": "3"}, "value": [0, "79"]}
    kube = FakeKube([kube_node("bad"), kube_node("good")], prometheus=[xid])
    operator_config = {
        "pools": [{"name": "h100", "matchLabels": {"trainplane.dev/pool": "h100"}, "expectedGpus": 8}],
        "diagnostic": {
            "enabled": False,
            "namespace": "gpu-operator",
            "podSelector": f"app={DIAG}",
            "container": "dcgm-diag",
        },
        "ignoredXids": list(APPLICATION_XIDS),
        "startupGraceSeconds": 0,
        "prometheusUrl": kube.url,
        "xidQuery": XID_QUERY,
        "intervalSeconds": 0.5,
        "quarantine": {"evictGpuPods": True},
    }
    (rootfs / "etc/trainplane/config.json").write_text(json.dumps(operator_config))
    kube.server.kubeconfig(rootfs / "etc/trainplane/kubeconfig")
    port = _free_port()
    cmd, env = in_image(rootfs, config, "gpu-health", f"--liveness=http://127.0.0.1:{port}/healthz")
    env |= {
        CONFIG_ENV: "/etc/trainplane/config.json",
        "KUBECONFIG": "/etc/trainplane/kubeconfig",
        "HOME": "/tmp",
    }
    log = tmp_path / "operator.log"
    try:
        with log.open("w") as out, group_process(cmd, env=env, stdout=out, stderr=subprocess.STDOUT) as proc:
            end = time.monotonic() + 60
            while time.monotonic() < end:
                bad = kube.get_obj("nodes", "bad") or {}
                if any(
                    c["type"] == QUARANTINE_CONDITION for c in bad.get("status", {}).get("conditions") or []
                ):
                    break
                assert proc.poll() is None, log.read_text()[-3000:]
                time.sleep(0.2)
            else:
                raise AssertionError("the node was not quarantined:\n" + log.read_text()[-3000:])
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                assert r.status == 200  # kopf's liveness endpoint, as the pod's probe reads it
    finally:
        kube.close()
    seen = set(kube.server.requests)
    assert ("GET", "/api/v1/nodes") in seen and ("GET", "/api/v1/pods") in seen
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
