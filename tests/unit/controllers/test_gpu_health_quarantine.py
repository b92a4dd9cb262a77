"""Quarantine (issue 19): what the GPU health controller writes on a faulty node and what it undoes on its
return, as data (quarantine.plan_node), and the requests the operator's reconcile sends for it (an
in-process API double; the operator as a process is in tests/integration/controllers/test_gpu_health.py)."""

from __future__ import annotations

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
    REDIAGNOSED_AT_ANNOTATION,
)
from controllers.gpu_health_agent import Diag, Verdict
from controllers.node_reconcile import Controller
from controllers.node_recovery import Context
from controllers.node_recovery import plan as recovery_plan
from controllers.node_return import Policy, Replacement, rfc3339
from controllers.quarantine import condition_reason, holds_gpus, is_gpu_pod, plan_node
from tests.helpers.fake_kube import json_patch, merge_patch
from tests.helpers.gpu_health import diag_pod, hung_pod, node, pod

NOW = "2026-11-26T01:00:00Z"
XID79 = Verdict(("xid-79",))
HEALTHY = Verdict(())


def written(n: dict, plan) -> dict:
    """The node after the plan's patch and condition, as the API server applies them."""
    out = json_patch(n, plan.ops) if plan.ops else n
    assert out is not None
    if plan.condition:
        out = merge_patch(out, {"status": {"conditions": [plan.condition]}}, strategic=True)
    return out


def cond_of(n: dict) -> dict | None:
    return next((c for c in n["status"].get("conditions") or [] if c["type"] == QUARANTINE_CONDITION), None)


def test_a_healthy_node_is_left_alone():
    plan = plan_node(node(), HEALTHY, now=NOW)
    assert (plan.ops, plan.condition, plan.events, plan.evict) == ([], None, [], False)


def test_a_faulty_node_is_tainted_cordoned_marked_announced_and_drained():
    n = node()
    plan = plan_node(n, XID79, now=NOW, evidence="GPU 3")
    after = written(n, plan)
    assert {"key": QUARANTINE_TAINT, "value": "xid-79", "effect": "NoSchedule"} in after["spec"]["taints"]
    assert after["spec"]["unschedulable"] is True
    assert after["metadata"]["annotations"] == {
        CORDONED_BY_ANNOTATION: CONTROLLER_NAME,
        QUARANTINED_AT_ANNOTATION: NOW,
    }
    cond = cond_of(after)
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "Xid79", "xid-79: GPU 3")
    assert [(e.reason, e.type) for e in plan.events] == [(EVENT_QUARANTINED, "Warning")]
    assert plan.evict
    # Seen again (the next round, or the watch event of our own write): nothing more to do, no new Event.
    again = plan_node(after, XID79, now="2026-11-26T01:05:00Z", evidence="GPU 3")
    assert (again.ops, again.condition, again.events) == ([], None, [])
    assert again.evict  # GPU pods that are still there (a disruption budget said not yet) go next time


def test_a_return_lifts_only_what_we_did_and_never_an_administrators_cordon():
    ours = written(node(), plan_node(node(), XID79, now=NOW))
    back = plan_node(ours, HEALTHY, now=NOW)
    after = written(ours, back)
    assert not after["spec"].get("unschedulable") and after["metadata"]["annotations"] == {}
    assert QUARANTINE_TAINT not in {t["key"] for t in after["spec"]["taints"]}
    assert cond_of(after)["status"] == "False" and [e.reason for e in back.events] == [EVENT_RETURNED]

    admin = node()
    admin["spec"]["unschedulable"] = True  # cordoned by a person before the fault
    quarantined = written(admin, plan_node(admin, XID79, now=NOW))
    assert CORDONED_BY_ANNOTATION not in quarantined["metadata"]["annotations"]
    returned = written(quarantined, plan_node(quarantined, HEALTHY, now=NOW))
    assert returned["spec"]["unschedulable"] is True
    assert cond_of(returned)["status"] == "False"


def test_the_return_hook_holds_a_node_in_quarantine():
    quarantined = written(node(), plan_node(node(), XID79, now=NOW))
    held = plan_node(quarantined, HEALTHY, now=NOW, release=False)
    assert (held.ops, held.condition, held.events, held.evict) == ([], None, [], False)


def test_without_eviction_the_node_is_tainted_and_marked_but_neither_cordoned_nor_drained():
    n = node()
    plan = plan_node(n, XID79, now=NOW, evict_gpu_pods=False)
    after = written(n, plan)
    assert not after["spec"].get("unschedulable") and not plan.evict
    assert cond_of(after)["status"] == "True" and after["metadata"]["annotations"] == {
        QUARANTINED_AT_ANNOTATION: NOW
    }


@pytest.mark.parametrize(
    ("p", "evicted", "holds"),
    [
        (pod(gpus=8), True, True),
        (pod(gpus=1, where="requests"), True, True),
        (pod(), False, False),  # no GPU: stays
        (pod(gpus=0), False, False),
        (
            pod(gpus=1, owner="DaemonSet"),
            False,
            False,
        ),  # the GPU stack's agents (DCGM exporter, device plugin)
        (pod(gpus=8, phase="Succeeded"), False, False),
        (pod(gpus=8, phase="Failed"), False, False),
        # On its way already: not evicted again, but its GPUs stay busy until it has terminated, so the
        # node's re-diagnosis waits for it (issue 30 (4)).
        (pod(gpus=8, deleting=True), False, True),
    ],
)
def test_only_running_gpu_pods_not_of_a_daemonset_are_evicted(p, evicted, holds):
    assert is_gpu_pod(p) is evicted
    assert holds_gpus(p) is holds


def test_condition_reasons_are_camel_case():
    assert [
        condition_reason(r) for r in ("xid-79", "diag-failed", "gpus-unhealthy", "accelerated-hardware")
    ] == [
        "Xid79",
        "DiagFailed",
        "GpusUnhealthy",
        "AcceleratedHardware",
    ]


class Api:
    """Records the operator's requests; answers like the API server."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object, str]] = []

    def request(self, method: str, path: str, body=None, content_type: str = ""):
        self.calls.append((method, path, body, content_type))
        return {}


CONFIG = {
    "pools": [{"name": "h100", "matchLabels": {"trainplane.dev/pool": "h100"}, "expectedGpus": 8}],
    "diagnostic": {"enabled": False, "namespace": "gpu-operator", "podSelector": "app=x", "container": "c"},
    "ignoredXids": [13],
    "startupGraceSeconds": 1200,
    "prometheusUrl": "",
    "xidQuery": "max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS)",
    "intervalSeconds": 30,
    "quarantine": {"evictGpuPods": True},
}


def test_reconcile_sends_the_guarded_patch_then_the_condition_events_and_evictions():
    api = Api()
    controller = Controller(CONFIG, api, clock=lambda: 1795650000.0)
    # As read from Prometheus (no URL here: never asked again).
    controller._cache[CONFIG["xidQuery"]] = (0.0, {"gpu-a": [79]})
    verdict = controller.reconcile(node(), [], [{"namespace": "team-a", "name": "train-0", "uid": "u"}])
    assert verdict is not None and verdict.reasons == ("xid-79",)
    (patch, status, event, eviction, evicted_event) = api.calls
    assert patch[:2] == ("PATCH", "/api/v1/nodes/gpu-a") and patch[3] == "application/json-patch+json"
    assert patch[2][0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "41"}
    assert status[1] == "/api/v1/nodes/gpu-a/status" and status[3] == "application/strategic-merge-patch+json"
    assert event[1] == "/api/v1/namespaces/default/events" and event[2]["reason"] == EVENT_QUARANTINED
    assert eviction[:2] == ("POST", "/api/v1/namespaces/team-a/pods/train-0/eviction")
    assert eviction[2]["apiVersion"] == "policy/v1" and eviction[2]["kind"] == "Eviction"
    assert (
        evicted_event[1] == "/api/v1/namespaces/team-a/events" and evicted_event[2]["reason"] == EVENT_EVICTED
    )
    # A node outside the GPU pools is not assessed.
    assert controller.reconcile(node("cpu", pool="system"), [], []) is None


def test_a_failed_row_remap_quarantines_the_node_whatever_xid_came_last():
    """DCGM's last-XID field shows only the newest XID; a row remap failure (XID 64) overwritten by an
    application XID, or an uncorrectable ECC error, is still a fault the node must leave service for."""
    from components.incluster.gpu_health import FAULT_QUERIES

    api = Api()
    config = {**CONFIG, "faultQueries": FAULT_QUERIES}
    controller = Controller(config, api, clock=lambda: 1795650000.0)
    controller._cache[CONFIG["xidQuery"]] = (0.0, {"gpu-a": [13]})  # an application XID: ignored
    controller._cache[FAULT_QUERIES["row-remap-failed"]] = (0.0, {"gpu-a": ["row-remap-failed"]})
    controller._cache[FAULT_QUERIES["ecc-uncorrectable"]] = (0.0, {})
    verdict = controller.reconcile(node(), [], [])
    assert verdict is not None and verdict.reasons == ("row-remap-failed",)
    (_patch, status, event) = api.calls
    assert status[2]["status"]["conditions"][0]["reason"] == "RowRemapFailed"
    assert event[2]["reason"] == EVENT_QUARANTINED


def test_the_fault_queries_read_series_the_platforms_exporter_ships():
    from components.incluster.dashboards.metrics import dcgm_exporter_csv
    from components.incluster.gpu_health import FAULT_QUERIES
    from controllers.gpu_health_agent import faults_by_node

    shipped = dcgm_exporter_csv()
    for reason, query in FAULT_QUERIES.items():
        metric = query.split("(")[-1].rstrip(")")
        assert f"{metric}," in shipped, (reason, metric)
    rows = [{"metric": {"node": "a"}, "value": [0, "2"]}, {"metric": {"node": "b"}, "value": [0, "0"]}]
    assert faults_by_node("ecc-uncorrectable")(rows) == {"a": ["ecc-uncorrectable"]}


# ---- after the quarantine: node_return's decision through node_recovery.plan ---------------------


CTX = Context(container="dcgm-diag", policy=Policy(), pool=Replacement(), pool_nodes=1, evict_gpu_pods=True)
T_Q = 1795650000.0  # the quarantine
BEFORE, AFTER = "2026-11-20T11:00:00Z", "2026-11-26T00:30:00Z"


def quarantined(admin_cordon: bool = False) -> dict:
    n = node()
    if admin_cordon:
        n["spec"]["unschedulable"] = True
    return written(n, plan_node(n, XID79, now=rfc3339(T_Q)))


def test_a_quarantined_node_stays_until_a_diagnostic_passes_after_the_quarantine():
    n = quarantined()
    old = diag_pod(result="pass", started=BEFORE)
    # The fault cleared, but the only pass is from before: held, and its diagnostic is rerun once.
    p, rerun = recovery_plan(n, HEALTHY, CTX, diag=Diag("pass"), diag_pod=old, now=T_Q + 60)
    assert rerun == "diag-gpu-a" and [e.reason for e in p.events] == [EVENT_REDIAGNOSING]
    after = written(n, p)
    assert cond_of(after)["status"] == "True" and after["spec"]["unschedulable"] is True
    assert QUARANTINE_TAINT in {t["key"] for t in after["spec"]["taints"]}
    again, rerun = recovery_plan(after, HEALTHY, CTX, diag=Diag("pass"), diag_pod=old, now=T_Q + 90)
    assert rerun is None and again.events == []  # once per quarantine
    # A pass that started after the quarantine, no signal left: returned, our cordon lifted.
    new = diag_pod(result="pass", started=AFTER, name="diag-gpu-a-2")
    back, _ = recovery_plan(after, HEALTHY, CTX, diag=Diag("pass"), diag_pod=new, now=T_Q + 600)
    returned = written(after, back)
    assert [e.reason for e in back.events] == [EVENT_RETURNED]
    assert cond_of(returned)["status"] == "False" and not returned["spec"].get("unschedulable")
    assert QUARANTINE_TAINT not in {t["key"] for t in returned["spec"]["taints"]}
    # The same pass with the fault still there returns nothing.
    still, _ = recovery_plan(after, XID79, CTX, diag=Diag("pass"), diag_pod=new, now=T_Q + 600)
    assert EVENT_RETURNED not in [e.reason for e in still.events]


def test_a_return_keeps_an_administrators_cordon():
    n = quarantined(admin_cordon=True)
    n["metadata"]["annotations"][REDIAGNOSED_AT_ANNOTATION] = rfc3339(T_Q + 1)
    back, _ = recovery_plan(
        n, HEALTHY, CTX, diag=Diag("pass"), diag_pod=diag_pod(result="pass", started=AFTER), now=T_Q + 600
    )
    returned = written(n, back)
    assert cond_of(returned)["status"] == "False" and returned["spec"]["unschedulable"] is True


def test_two_hang_incidents_on_a_node_quarantine_it_one_does_not():
    api = Api()
    config = {**CONFIG, "hangs": {"container": "trainer", "jobLabel": "trainplane.dev/job"}}
    controller = Controller(config, api, clock=lambda: 1795650000.0)
    controller.saw_pod(hung_pod("a-0", "a", "2026-11-26T00:10:00Z"))
    assert controller.reconcile(node(), [], []).reasons == ()
    controller.saw_pod(hung_pod("b-0", "b", "2026-11-26T00:30:00Z"))  # another incident, same node
    assert controller.reconcile(node(), [], []).reasons == ("TrainerHang",)
    patch = api.calls[0]
    assert {"key": QUARANTINE_TAINT, "value": "TrainerHang", "effect": "NoSchedule"} in patch[2][1]["value"]
