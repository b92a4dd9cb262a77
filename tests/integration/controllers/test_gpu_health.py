"""The GPU health controller as the image runs it: `python -m controllers gpu-health` (the entry point's
command) against the fake Kubernetes API (tests/helpers/fake_kube.py) and its Prometheus route; the
entry point's commands; the diag script under bash (tests/unit/controllers/test_gpu_health.py has the rest; the image
itself: tests/integration/images/controller/test_controller_image.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from contract.recovery import (
    CONTROLLER_NAME,
    CORDONED_BY_ANNOTATION,
    EVENT_EVICTED,
    EVENT_QUARANTINED,
    EVENT_REDIAGNOSING,
    EVENT_RETURNED,
    QUARANTINE_CONDITION,
    QUARANTINE_TAINT,
    QUARANTINED_AT_ANNOTATION,
    REDIAGNOSE_ATTEMPTS_ANNOTATION,
    REDIAGNOSED_AT_ANNOTATION,
    RETURNED_AT_ANNOTATION,
)
from tests.helpers import procs
from tests.helpers.fake_kube import FakeKube
from tests.helpers.gpu_health import ago, diag_pod, hung_pod, kube_node, pod
from tests.helpers.gpu_health_operator import ROUND_S, operator, wait_for
from tests.helpers.plans import ROOT
from tests.helpers.procs import run_group
from tests.helpers.prometheus import backfilled


def xid(node_name, value):
    return {"metric": {"node": node_name, "gpu": "3"}, "value": [0, str(value)]}


def taint_keys(n):
    return {t["key"]: t.get("value") for t in n["spec"].get("taints") or []}


def condition(n):
    return next((c for c in n["status"].get("conditions") or [] if c["type"] == QUARANTINE_CONDITION), None)


def test_operator_quarantines_a_faulty_node_and_evicts_only_its_gpu_pods(tmp_path):
    nodes = [
        kube_node("bad"),
        kube_node("good"),
        # Cordoned by an administrator before the fault: quarantined, then returned, still cordoned.
        {**kube_node("admin"), "spec": {"unschedulable": True, "taints": []}},
        kube_node("cpu", capacity=None, pool="system"),
    ]
    pods = [diag_pod(n) for n in ("bad", "good", "admin")]
    pods += [
        pod("train-0", "bad", gpus=8),
        pod("logger", "bad"),  # no GPU: stays
        pod(
            "dcgm-exporter", "bad", gpus=1, namespace="gpu-operator", owner="DaemonSet"
        ),  # the GPU stack: stays
        pod("train-1", "good", gpus=8),
    ]
    # XID 79 (fallen off the bus) on bad and admin; 13 on good is an application error.
    kube = FakeKube(nodes + pods, prometheus=[xid("bad", 79), xid("admin", 79), xid("good", 13)])
    with operator(tmp_path, kube) as proc:
        wait_for(
            "bad quarantined",
            lambda: (condition(kube.get_obj("nodes", "bad")) or {}).get("status") == "True",
            proc,
        )
        wait_for("GPU pod evicted", lambda: ("team-a", "train-0") in kube.evictions, proc)
        wait_for("admin quarantined", lambda: condition(kube.get_obj("nodes", "admin")) is not None, proc)
        bad = kube.get_obj("nodes", "bad")
        assert taint_keys(bad)[QUARANTINE_TAINT] == "xid-79"
        assert bad["spec"]["unschedulable"] is True
        annotations = bad["metadata"]["annotations"]
        assert (
            annotations[CORDONED_BY_ANNOTATION] == CONTROLLER_NAME
            and QUARANTINED_AT_ANNOTATION in annotations
        )
        cond = condition(bad)
        assert (cond["status"], cond["reason"]) == ("True", "Xid79") and "xid-79" in cond["message"]
        wait_for(
            "quarantine Event",
            lambda: any(e["involvedObject"]["name"] == "bad" for e in kube.events(EVENT_QUARANTINED)),
            proc,
        )
        (event,) = [e for e in kube.events(EVENT_QUARANTINED) if e["involvedObject"]["name"] == "bad"]
        assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Node"
        assert event["source"]["component"] == CONTROLLER_NAME and event["metadata"]["namespace"] == "default"
        # The pod's Event follows its eviction request: wait for it rather than race the controller.
        wait_for("eviction Event", lambda: len(kube.events(EVENT_EVICTED)) >= 1, proc)
        (evicted,) = kube.events(EVENT_EVICTED)
        assert evicted["involvedObject"] == {
            **evicted["involvedObject"],
            "kind": "Pod",
            "name": "train-0",
            "namespace": "team-a",
        }
        # Only the GPU pod went: not the CPU pod, not the DaemonSet's, nothing on the healthy node.
        wait_for(
            "diagnostics rerun",
            lambda: {("gpu-operator", "diag-bad"), ("gpu-operator", "diag-admin")} <= set(kube.evictions),
            proc,
        )
        assert [e for e in kube.evictions if e[0] != "gpu-operator"] == [("team-a", "train-0")]
        assert {p["metadata"]["name"] for p in kube.objects("pods")} >= {"logger", "dcgm-exporter", "train-1"}
        # The healthy node and the CPU node were never written.
        assert not [
            k
            for _, k, p, o in kube.log
            if p == "nodes" and k == "MODIFIED" and o["metadata"]["name"] in ("good", "cpu")
        ]
        admin = kube.get_obj("nodes", "admin")
        assert CORDONED_BY_ANNOTATION not in admin["metadata"]["annotations"]  # we did not cordon it
        # node_return: the diagnostics from before the quarantine were rerun (their pods evicted, once).
        wait_for("rediagnosis Events", lambda: len(kube.events(EVENT_REDIAGNOSING)) >= 2, proc)
        assert sorted(e["involvedObject"]["name"] for e in kube.events(EVENT_REDIAGNOSING)) == [
            "admin",
            "bad",
        ]
        # The XID on admin clears: no return without a diagnostic that passed since the quarantine.
        kube.prometheus = [xid("bad", 79), xid("good", 13)]
        time.sleep(3 * ROUND_S)
        assert condition(kube.get_obj("nodes", "admin"))["status"] == "True"
        # Its DaemonSet's new pod passes: the quarantine is lifted, the administrator's cordon stays.
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
        kube.create("pods", diag_pod("admin", started=now, name="diag-admin-2"))
        kube.create("pods", diag_pod("bad", started=now, name="diag-bad-2"))
        wait_for(
            "admin returned",
            lambda: (condition(kube.get_obj("nodes", "admin")) or {}).get("status") == "False",
            proc,
        )
        admin = kube.get_obj("nodes", "admin")
        assert admin["spec"]["unschedulable"] is True
        assert QUARANTINE_TAINT not in taint_keys(admin)
        assert QUARANTINED_AT_ANNOTATION not in admin["metadata"].get("annotations", {})
        wait_for("return Event", lambda: len(kube.events(EVENT_RETURNED)) >= 1, proc)
        assert [e["involvedObject"]["name"] for e in kube.events(EVENT_RETURNED)] == ["admin"]
        # Still faulty (its XID stays), however its diagnostic went: bad stays quarantined, announced once.
        time.sleep(2 * ROUND_S)
        assert condition(kube.get_obj("nodes", "bad"))["status"] == "True"
        assert len([e for e in kube.events(EVENT_QUARANTINED) if e["involvedObject"]["name"] == "bad"]) == 1
    out = (tmp_path / "operator.log").read_text()
    assert "Traceback" not in out, out


def stamp(ahead_s: float = 1.0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + ahead_s))


def test_rediagnosis_waits_for_the_terminating_gpu_pods_and_retries_a_skipped_run(tmp_path):
    """Issue 30 (4): an evicted trainer keeps its GPUs through its grace period. The API server marks it
    terminating (deletionTimestamp) and it stays until its containers exit: the diagnostic must not be rerun
    before, and a rerun that still found the GPUs busy (`skipped`) is retried, counted on the node."""
    train = pod("train-0", "bad", gpus=8)
    train["spec"]["terminationGracePeriodSeconds"] = 120
    kube = FakeKube([kube_node("bad"), diag_pod("bad"), train], prometheus=[xid("bad", 79)], graceful=True)
    # The fake API server keeps an evicted diagnostic pod, which the operator retries once the backoff has
    # passed (its deletion "did not take"): 3 s rather than 1 s, so that a loaded machine reading the first
    # rerun's count late does not find the retry's count (seen: '2' for '1' with 1 s on a loaded CI run).
    config = {"quarantine": {"evictGpuPods": True, "rediagnoseBackoffSeconds": 3}}
    with operator(tmp_path, kube, **config) as proc:
        wait_for("GPU pod evicted", lambda: ("team-a", "train-0") in kube.evictions, proc)
        assert kube.get_obj("pods", "train-0", "team-a")["metadata"]["deletionTimestamp"]
        time.sleep(6 * ROUND_S)  # rounds go by while it terminates: the diagnostic waits, no second eviction
        assert ("gpu-operator", "diag-bad") not in kube.evictions and not kube.events(EVENT_REDIAGNOSING)
        assert kube.evictions.count(("team-a", "train-0")) == 1
        kube.remove("pods", "train-0", "team-a")  # its containers exited: the GPUs are free
        wait_for("diagnostic rerun", lambda: ("gpu-operator", "diag-bad") in kube.evictions, proc)
        annotations = kube.get_obj("nodes", "bad")["metadata"]["annotations"]
        assert annotations[REDIAGNOSE_ATTEMPTS_ANNOTATION] == "1"
        # A process outlived its pod: the DaemonSet's new pod finds the GPUs busy and ends skipped.
        kube.remove("pods", "diag-bad", "gpu-operator")
        kube.create("pods", diag_pod("bad", result="skipped", started=stamp(), name="diag-bad-2"))
        wait_for("skipped run retried", lambda: ("gpu-operator", "diag-bad-2") in kube.evictions, proc)
        annotations = kube.get_obj("nodes", "bad")["metadata"]["annotations"]
        assert annotations[REDIAGNOSE_ATTEMPTS_ANNOTATION] == "2"
        wait_for("retry Event", lambda: len(kube.events(EVENT_REDIAGNOSING)) >= 2, proc)
        assert "retry 1/3" in kube.events(EVENT_REDIAGNOSING)[-1]["message"]
        # The retry passes and the XID is gone: the node returns.
        kube.prometheus = []
        kube.remove("pods", "diag-bad-2", "gpu-operator")
        kube.create("pods", diag_pod("bad", started=stamp(2), name="diag-bad-3"))
        wait_for(
            "returned",
            lambda: (condition(kube.get_obj("nodes", "bad")) or {}).get("status") == "False",
            proc,
        )
        assert REDIAGNOSE_ATTEMPTS_ANNOTATION not in kube.get_obj("nodes", "bad")["metadata"]["annotations"]
    out = (tmp_path / "operator.log").read_text()
    assert "Traceback" not in out, out


def _xid_history(now: int, new_xid_at: int) -> str:
    """dcgm-exporter's XID series of node `bad`, GPU 3, every 10 s from 30 minutes ago: the gauge at 79 all
    along (an XID from before, never cleared: NVIDIA/dcgm-exporter#500), the windowed count 0 until
    `new_xid_at`, when XID 79 comes again (5-minute window)."""
    gpu = 'node="bad",gpu="3"'
    times = range(now - now % 10 - 1800, now + 600, 10)
    gauge = [f"DCGM_FI_DEV_XID_ERRORS{{{gpu}}} 79 {t}" for t in times]
    quiet = [f"DCGM_EXP_XID_ERRORS_COUNT{{{gpu}}} 0 {t}" for t in times if t < new_xid_at]
    recent = [f'DCGM_EXP_XID_ERRORS_COUNT{{{gpu},xid="79"}} 1 {t}' for t in times if t >= new_xid_at]
    lines = ["# TYPE DCGM_FI_DEV_XID_ERRORS gauge", *gauge]
    lines += ["# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge", *quiet, *recent, "# EOF"]
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="prometheus/promtool not on PATH (CI installs Debian's prometheus)",
)
def test_a_node_quarantined_for_an_xid_returns_by_diagnostic_while_the_stale_gauge_stays(tmp_path):
    """Issue 30 (5), against a real Prometheus: the node was quarantined for XID 79 twenty minutes ago and its
    rerun diagnostic passed; DCGM's last-XID gauge still says 79 (and will until dcgm-exporter restarts). It
    returns, stays returned, and is quarantined again only when a NEW XID arrives."""
    now = int(time.time())
    new_xid_at = now - now % 10 + 40
    since, rerun = now - 20 * 60, now - 19 * 60
    node = kube_node("bad")
    node["spec"] = {
        "unschedulable": True,
        "taints": [
            *node["spec"]["taints"],
            {"key": QUARANTINE_TAINT, "value": "xid-79", "effect": "NoSchedule"},
        ],
    }
    node["metadata"]["annotations"] = {
        QUARANTINED_AT_ANNOTATION: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since)),
        CORDONED_BY_ANNOTATION: CONTROLLER_NAME,
        REDIAGNOSED_AT_ANNOTATION: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rerun)),
        REDIAGNOSE_ATTEMPTS_ANNOTATION: "1",
    }
    node["status"]["conditions"] = [{"type": QUARANTINE_CONDITION, "status": "True", "reason": "Xid79"}]
    passed = diag_pod("bad", started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rerun + 30)))
    kube = FakeKube([node, passed])
    prom = tmp_path / "prometheus"
    prom.mkdir()
    with (
        backfilled(prom, _xid_history(now, new_xid_at)) as url,
        operator(tmp_path, kube, prometheusUrl=url) as proc,
    ):
        wait_for(
            "returned",
            lambda: (condition(kube.get_obj("nodes", "bad")) or {}).get("status") == "False",
            proc,
        )
        bad = kube.get_obj("nodes", "bad")
        assert QUARANTINE_TAINT not in taint_keys(bad) and not bad["spec"]["unschedulable"]
        assert RETURNED_AT_ANNOTATION in bad["metadata"]["annotations"]
        # Stays returned round after round while the gauge still says 79.
        time.sleep(max(0.0, new_xid_at - 3 - time.time()))
        assert condition(kube.get_obj("nodes", "bad"))["status"] == "False"
        assert not kube.events(EVENT_QUARANTINED)
        # A new XID 79: out again.
        wait_for(
            "quarantined again",
            lambda: condition(kube.get_obj("nodes", "bad"))["status"] == "True",
            proc,
        )
        assert taint_keys(kube.get_obj("nodes", "bad"))[QUARANTINE_TAINT] == "xid-79"
        # The Event follows the node's condition (another call): wait for it rather than race it (it lost
        # once under a loaded CI run), then there is exactly one.
        wait_for("the quarantine event", lambda: kube.events(EVENT_QUARANTINED), proc)
        assert len(kube.events(EVENT_QUARANTINED)) == 1
    out = (tmp_path / "operator.log").read_text()
    assert "Traceback" not in out, out


def test_operator_without_eviction_only_taints_and_marks_and_counts_hangs(tmp_path):
    objs = [kube_node("bad"), diag_pod("bad"), pod("train-0", "bad", gpus=8)]
    # Two jobs hung on "hung" (two incidents within 6 hours): a suspect; "once" hung once: not.
    objs += [kube_node("hung"), diag_pod("hung"), hung_pod("a-0", "a", ago(90), "hung")]
    objs += [hung_pod("b-0", "b", ago(20), "hung")]
    objs += [kube_node("once"), diag_pod("once"), hung_pod("c-0", "c", ago(20), "once")]
    kube = FakeKube(objs, prometheus=[xid("bad", 79)])
    config = {
        "quarantine": {"evictGpuPods": False},
        "hangs": {"container": "trainer", "jobLabel": "trainplane.dev/job"},
    }
    with operator(tmp_path, kube, **config) as proc:
        wait_for("bad quarantined", lambda: condition(kube.get_obj("nodes", "bad")) is not None, proc)
        wait_for("hung quarantined", lambda: condition(kube.get_obj("nodes", "hung")) is not None, proc)
        time.sleep(2 * ROUND_S)  # two more rounds
        bad = kube.get_obj("nodes", "bad")
        assert QUARANTINE_TAINT in taint_keys(bad) and not bad["spec"].get("unschedulable")
        # No job's pod was evicted (the diagnostic's was, to rerun it: quarantine.rediagnose).
        assert [e for e in kube.evictions if e[0] != "gpu-operator"] == []
        assert condition(kube.get_obj("nodes", "hung"))["reason"] == "TrainerHang"
        assert condition(kube.get_obj("nodes", "once")) is None


def test_the_entry_point_names_its_commands_and_says_when_there_is_no_api(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["PYTHONPATH"] = str(ROOT)

    def entry(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "controllers", *args]
        return procs.run(cmd, capture_output=True, text=True, env=env, start_new_session=True, timeout=60)

    out = entry()
    assert out.returncode == 2 and "gpu-health,block-window" in out.stderr
    out = entry("block-window", "--help")
    assert out.returncode == 0 and "--config" in out.stdout and "--once" in out.stdout
    # without the API it says so in one line, exit 2
    (tmp_path / "config.json").write_text("{}")
    out = entry("block-window", "--config", str(tmp_path / "config.json"), "--once")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_diag_script_is_valid_bash():
    from components.incluster.gpu_health import diag_script

    for level in (1, 2, 3):
        run = procs.run(["bash", "-n"], input=diag_script(level), text=True, capture_output=True)
        assert run.returncode == 0, run.stderr


def test_only_the_operator_imports_kopf():
    # block-window (and the library, which imports the names and decisions) runs without kopf.
    modules = sorted(p.stem for p in (ROOT / "controllers").glob("*.py"))
    assert "node_reconcile" in modules and "quarantine" in modules
    mine = [m for m in modules if m not in ("gpu_health_operator", "__main__", "__init__")]
    code = "; ".join(f"import controllers.{m}" for m in mine) + "; import sys; print('kopf' in sys.modules)"
    out = run_group(
        [sys.executable, "-c", code], timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
