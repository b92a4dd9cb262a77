"""A real Prometheus scrapes a fake DCGM exporter and a fake trainer with the platform's monitor settings
and stores exactly the labels tests/helpers/scrape.py predicts (which the alert-rule tests use).

The targets are static (no cluster here), carrying the labels prometheus-operator gives the targets of
the DCGM ServiceMonitor and the training PodMonitor; Prometheus then applies the monitors' relabelings
and honor_labels itself. The old DCGM settings (no honorLabels, no relabelings) are scraped beside them to
show the defect of issue 10 (4): the workload's pod is renamed exported_pod, and a GPU no pod holds is
attributed to the exporter pod.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from tests.helpers import procs
from tests.helpers.scrape import (
    dcgm_config,
    dcgm_target,
    gpu,
    scrape,
    trainer_config,
    trainer_node,
    trainer_target,
)

OLD_DCGM = ([], False)  # gpu-operator v26.7.0 defaults: honorLabels false, no relabelings

DCGM_SAMPLES = [
    ("DCGM_FI_DEV_GPU_UTIL", gpu(0, allocated=True), 97),
    ("DCGM_FI_DEV_GPU_UTIL", gpu(1), 0),
    ("DCGM_FI_DEV_XID_ERRORS", gpu(1), 79),
]
TRAINER_SAMPLES = [
    ("trainplane_rank_step_seconds", {"rank": "8"}, 1.5),
    ("trainplane_rank_step_seconds", {"rank": "9"}, 1.0),
    ("trainplane_step", {}, 120),
]


def exposition(samples) -> bytes:
    lines = []
    for name, labels, value in samples:
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        lines.append(f"{name}{{{inner}}} {value}" if inner else f"{name} {value}")
    return ("\n".join(lines) + "\n").encode()


def serve(body: bytes) -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def snake(relabelings: list[dict]) -> list[dict]:
    """A monitor's relabelings (CRD camelCase) as prometheus.yml relabel_configs."""
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return [{keys.get(k, k): v for k, v in r.items()} for r in relabelings]


def job(name: str, port: int, target: dict, relabelings: list[dict], honor: bool) -> dict:
    labels = {k: v for k, v in target.items() if k != "__address__"}
    return {
        "job_name": name,
        "scrape_interval": "1s",
        "honor_labels": honor,
        "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": labels}],
        "relabel_configs": snake(relabelings),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def series(url: str) -> list[dict]:
    query = urllib.parse.urlencode({"match[]": '{__name__=~"DCGM_.+|trainplane_.+"}'})
    with urllib.request.urlopen(f"{url}/api/v1/series?{query}", timeout=5) as resp:
        return json.loads(resp.read())["data"]


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.skip("prometheus binary not on PATH (CI installs Debian's prometheus)")
    tmp = tmp_path_factory.mktemp("prometheus")
    dcgm_server, dcgm_port = serve(exposition(DCGM_SAMPLES))
    trainer_server, trainer_port = serve(exposition(TRAINER_SAMPLES))
    dcgm = dcgm_target(address=f"127.0.0.1:{dcgm_port}")
    old = {**dcgm, "job": "dcgm-old-settings"}
    trainer = trainer_target("gpt-small", 1, address=f"127.0.0.1:{trainer_port}")
    config = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [
            job("dcgm", dcgm_port, dcgm, *dcgm_config()),
            job("dcgm-old", dcgm_port, old, *OLD_DCGM),
            job("trainer", trainer_port, trainer, *trainer_config()),
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp / "prometheus.log", "wb") as log:
        proc = procs.spawn(
            [
                exe,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        expected = 2 * len(DCGM_SAMPLES) + len(TRAINER_SAMPLES)
        got: list[dict] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(got) < expected:
            time.sleep(0.5)
            try:
                got = series(url)
            except OSError:
                continue
        assert len(got) == expected, (got, (tmp / "prometheus.log").read_text()[-2000:])
        yield {"series": got, "dcgm": dcgm, "old": old, "trainer": trainer}
    finally:
        procs.stop(proc, 30)
        dcgm_server.shutdown()
        trainer_server.shutdown()


def stored(scraped, job_label: str) -> list[dict]:
    return sorted(
        (
            {k: v for k, v in s.items() if k != "__name__"} | {"__name__": s["__name__"]}
            for s in scraped["series"]
            if s.get("job") == job_label
        ),
        key=lambda s: json.dumps(s, sort_keys=True),
    )


def predicted(samples, target, relabelings, honor) -> list[dict]:
    return sorted(
        ({**scrape(labels, target, relabelings, honor), "__name__": name} for name, labels, _ in samples),
        key=lambda s: json.dumps(s, sort_keys=True),
    )


def test_dcgm_series_carry_the_workload_and_node_as_the_model_predicts(scraped):
    got = stored(scraped, "nvidia-dcgm-exporter")
    assert got == predicted(DCGM_SAMPLES, scraped["dcgm"], *dcgm_config())
    util = {s["gpu"]: s for s in got if s["__name__"] == "DCGM_FI_DEV_GPU_UTIL"}
    assert (util["0"]["namespace"], util["0"]["pod"]) == ("research", "gpt-small-0-x2v9q")
    # A GPU no pod holds has no workload labels at all, and every series names its node.
    assert not {"pod", "namespace", "container"} & set(util["1"])
    assert {s["node"] for s in got} == {"gpu-node-a"}


def test_old_dcgm_settings_attribute_gpus_to_the_exporter(scraped):
    got = stored(scraped, "dcgm-old-settings")
    assert got == predicted(DCGM_SAMPLES, scraped["old"], *OLD_DCGM)
    util = {s["gpu"]: s for s in got if s["__name__"] == "DCGM_FI_DEV_GPU_UTIL"}
    assert (
        util["0"]["pod"].startswith("nvidia-dcgm-exporter")
        and util["0"]["exported_pod"] == "gpt-small-0-x2v9q"
    )
    assert util["1"]["pod"].startswith("nvidia-dcgm-exporter")  # what made GpuIdleButAllocated fire


def test_trainer_rank_survives_the_pod_monitor(scraped):
    got = stored(scraped, "gpt-small")
    assert got == predicted(TRAINER_SAMPLES, scraped["trainer"], *trainer_config())
    ranks = {s["rank"] for s in got if s["__name__"] == "trainplane_rank_step_seconds"}
    assert ranks == {"8", "9"} and {s["node_rank"] for s in got} == {"1"}
    # the pod's node, which the straggler alert names (PodMonitor relabeling)
    assert {s["node"] for s in got} == {trainer_node(1)}
    assert not any("exported_rank" in s for s in got)
