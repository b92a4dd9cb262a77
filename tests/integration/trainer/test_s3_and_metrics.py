"""Object storage (moto S3 on loopback) resume, and the metrics endpoint scraped for real."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from contract.recovery import PHASE_SECONDS, PHASES, STEPS_REDONE
from tests.helpers import procs
from tests.helpers.trainer import BASE, ENDLESS, assert_bitwise, final_state, free_port, launch
from trainer.goodput import HIGH_WATER_FILE

STEPS = 24


@pytest.mark.slow
def test_s3_checkpoint_resume_is_bitwise_exact(tmp_path, corpus, reference, moto_s3):
    import fsspec

    ref = reference(2, STEPS)
    args = [
        *BASE,
        "--dataset",
        "bytes",
        "--data-paths",
        f"[{corpus}]",
        "--steps",
        str(STEPS),
        "--checkpoint.uri",
        "s3://ckpt/run-1",
        "--checkpoint.interval-steps",
        "5",
    ]
    first = launch(tmp_path, "first", 2, args, extra_env=moto_s3)
    first.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 7)
    first.signal(signal.SIGTERM)
    assert first.wait() == 143, first.tail()
    stop = first.events("preempted_exit")[0]["ckpt_step"]
    second = launch(tmp_path, "second", 2, args, extra_env=moto_s3)
    assert second.wait() == 0, second.tail()
    assert [e["ckpt_step"] for e in second.events("resumed")] == [stop, stop]

    fs = fsspec.filesystem("s3", endpoint_url=moto_s3["AWS_ENDPOINT_URL"], key="testing", secret="testing")
    names = {p.rsplit("/", 1)[-1] for p in fs.ls("ckpt/run-1")}
    newest = sorted({5, 10, 15, 20, STEPS, stop})[-3:]  # retention (keep 3) on S3 too
    assert names == {f"step-{s}" for s in newest} | {HIGH_WATER_FILE}
    # the goodput high-water mark, one PUT on S3: the highest step reached
    assert json.loads(fs.cat_file(f"ckpt/run-1/{HIGH_WATER_FILE}"))["step"] == STEPS
    man = json.loads(fs.cat_file(f"ckpt/run-1/step-{STEPS}/manifest.json"))
    assert man["world_size"] == 2 and man["bytes"] > 0
    local = tmp_path / "download"
    fs.get(f"ckpt/run-1/step-{STEPS}/", str(local / f"step-{STEPS}") + "/", recursive=True)
    assert_bitwise(final_state(local, STEPS), final_state(ref / "ckpt", STEPS))


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        s.name: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name.startswith("trainplane_")
    }


@pytest.mark.slow
def test_metrics_endpoint_scraped_then_sigterm_exits_143_after_commit(tmp_path):
    """The metrics endpoint of a live run, scraped and parsed; then SIGTERM to the launcher, which exits
    143 once the preemption checkpoint is committed (the launcher's preemption path, on the same run)."""
    port = free_port()
    run = launch(
        tmp_path,
        "run",
        2,
        [
            *ENDLESS,
            "--metrics-port",
            str(port),
            "--checkpoint.uri",
            str(tmp_path / "ckpt"),
            "--checkpoint.interval-steps",
            "3",
        ],
    )
    try:
        run.wait_for(lambda e: e["event"] == "checkpoint_committed" and e["ckpt_step"] >= 3)
        deadline = time.monotonic() + 60
        while True:  # metrics are set at the step boundary after the commit
            m = _scrape(port)
            if m.get("trainplane_checkpoint_saves_total", 0) >= 1 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert m["trainplane_step"] >= 3
        assert math.isfinite(m["trainplane_loss"]) and m["trainplane_loss"] > 0
        assert m["trainplane_tokens_total"] >= 3 * 8 * 64
        assert m["trainplane_tokens_per_second"] > 0 and m["trainplane_step_seconds"] > 0
        assert m["trainplane_world_size"] == 2
        assert m["trainplane_checkpoint_saves_total"] >= 1
        assert m["trainplane_checkpoint_save_bytes"] > 0 and m["trainplane_checkpoint_save_seconds"] > 0
        assert m["trainplane_checkpoint_step"] >= 3
        for name in (
            "trainplane_restarts",
            "trainplane_preemptions",
            "trainplane_resumes",
            "trainplane_checkpoint_load_seconds",
            "trainplane_mfu_ratio",
            "trainplane_info",
        ):
            assert name in m, name
        # goodput: this process's seconds by phase, live; they add up to its age (trainer/goodput.py)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        phases = {
            s.labels["phase"]: s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
            if s.name == PHASE_SECONDS
        }
        assert set(phases) == set(PHASES) and phases["step"] > 0 and phases["startup"] > 0
        assert m[STEPS_REDONE] == 0
        pid = next(e["pid"] for e in run.events("start") if e["rank"] == 0)
        age = time.time() - _started_at(pid)
        # the phases cover the process's life up to the last phase change (the step boundary), not after
        assert age - 30 < sum(phases.values()) <= age + 1, (phases, age)
    finally:
        run.signal(signal.SIGTERM)
    assert run.wait() == 143, run.tail()
    step = run.events("preempted_exit")[0]["ckpt_step"]
    assert (tmp_path / "ckpt" / f"step-{step}" / "manifest.json").exists()


def _started_at(pid: int) -> float:
    """The epoch time the OS started `pid` (proc(5): starttime in clock ticks after boot)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    btime = next(int(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime "))
    return btime + ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
def test_real_prometheus_scrapes_the_step(tmp_path):
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.skip("prometheus binary not on PATH (CI installs Debian's prometheus)")
    port, prom_port = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs: [{{job_name: trainer, static_configs: [{{targets: ['127.0.0.1:{port}']}}]}}]\n"
    )
    run = launch(
        tmp_path,
        "run",
        2,
        [
            *ENDLESS,
            "--metrics-port",
            str(port),
            "--checkpoint.uri",
            str(tmp_path / "ckpt"),
        ],
    )
    with open(tmp_path / "prometheus.log", "wb") as log:
        prom = procs.spawn(
            [
                exe,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=log,
            stderr=log,
        )
    try:
        run.wait_for(lambda e: e["event"] == "metrics_listening")
        q = urllib.parse.urlencode({"query": 'trainplane_step{job="trainer"}'})
        value, deadline = None, time.monotonic() + 90
        while value is None and time.monotonic() < deadline:
            try:
                url = f"http://127.0.0.1:{prom_port}/api/v1/query?{q}"
                body = json.load(urllib.request.urlopen(url, timeout=5))
                result = body["data"]["result"]
                if result and float(result[0]["value"][1]) >= 1:
                    value = float(result[0]["value"][1])
            except OSError:
                pass
            time.sleep(0.5)
        assert value is not None, (tmp_path / "prometheus.log").read_text()[-2000:]
        assert value >= 1
    finally:
        procs.stop(prom, 10)
        run.signal(signal.SIGTERM)
        run.wait()


def test_metric_names_are_documented():
    from trainer.metrics import Metrics

    doc = (Path(__file__).resolve().parents[3] / "docs" / "trainer.md").read_text()
    names = {m.name for m in Metrics("x").registry.collect()}
    assert names and all(n.startswith("trainplane_") for n in names)
    for fam in Metrics("x").registry.collect():
        shown = fam.name + ("_total" if fam.type == "counter" else "")
        assert f"`{shown}`" in doc, shown
