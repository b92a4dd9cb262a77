"""The parts of tests/unit/test_nccl_test.py that run real processes or servers (integration tier)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from infra import cli
from infra.nccl_test import COMPLETION_INDEX_LABEL, JOBSET_NAME_LABEL, PreflightError, build, run_live
from trainer.collectives import RESULT_PREFIX, Result, Row

JOB_STACK = "gpt-small-aws-dev"


@pytest.fixture(scope="module")
def job_and_platform():
    return cli._job_and_platform(JOB_STACK, [])


class FakeCluster(BaseHTTPRequestHandler):
    jobsets: dict = {}
    deleted: list = []
    log = ""

    def _send(self, code: int, body: dict | str) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json" if isinstance(body, dict) else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        obj = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        obj["status"] = {"conditions": [{"type": "Completed", "status": "True"}]}
        self.jobsets[obj["metadata"]["name"]] = obj
        self._send(201, obj)

    def do_GET(self):
        url = urlparse(self.path)
        parts = url.path.strip("/").split("/")
        if url.path.rstrip("/") == "/version":  # what `connect` asks first
            keys = ("buildDate", "compiler", "gitCommit", "gitTreeState", "goVersion", "platform")
            return self._send(
                200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0", **dict.fromkeys(keys, "x")}
            )
        if url.path.endswith("/log"):
            return self._send(200, self.log)
        if parts[-1] == "pods":
            sel = parse_qs(url.query)["labelSelector"][0]
            name = sel.split(",")[0].split("=")[1]
            ok = f"{JOBSET_NAME_LABEL}={name}" in sel and f"{COMPLETION_INDEX_LABEL}=0" in sel
            items = [{"metadata": {"name": f"{name}-workers-0-0", "namespace": parts[3]}}] if ok else []
            return self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
        return self._send(200, self.jobsets[parts[-1]])

    def do_DELETE(self):
        self.deleted.append(urlparse(self.path).path.rsplit("/", 1)[-1])
        self._send(200, {"kind": "Status", "status": "Success"})

    def log_message(self, *args):
        pass


@pytest.fixture
def cluster(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeCluster)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "f", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "f", "context": {"cluster": "f", "user": "u"}}],
                "current-context": "f",
            }
        )
    )
    FakeCluster.jobsets, FakeCluster.deleted = {}, []
    yield str(kubeconfig)
    server.shutdown()


def test_live_run_reads_rank_zeros_result_and_always_deletes_the_jobset(job_and_platform, cluster, capsys):
    job, platform = job_and_platform
    pf = build(job, platform, nodes=2)
    low = Result("all_gather", 16, "nccl", [Row(8 << 30, 1e5, 85.9, 80.5)], 1000.0)
    FakeCluster.log = f"warming up\n{RESULT_PREFIX} {low.to_json()}\n"
    assert run_live(pf, kubeconfig=cluster, context=None, poll_s=0) == low
    assert pf.name in FakeCluster.jobsets and FakeCluster.deleted == [pf.name]
    # the CLI's verdict: below the floor is exit 1, with the sweep printed
    assert cli.main(["nccl-test", JOB_STACK, "--nodes", "2", "--kubeconfig", cluster]) == 1
    assert "BELOW FLOOR" in capsys.readouterr().out
    FakeCluster.log = "the pod never got to the sweep\n"
    with pytest.raises(PreflightError, match="no result from rank 0"):
        run_live(pf, kubeconfig=cluster, context=None, poll_s=0)
    assert FakeCluster.deleted.count(pf.name) == 3


def test_a_preflight_without_a_result_is_a_failed_check_exit_1(cluster, capsys):
    FakeCluster.log = "the pod never got to the sweep\n"
    assert cli.main(["nccl-test", JOB_STACK, "--nodes", "2", "--kubeconfig", cluster]) == 1
    assert "no result from rank 0" in capsys.readouterr().err
