"""node_return.decide(): each rule of a quarantined node's return or replacement, on plain node dicts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contract.recovery import (
    CONTROLLER_NAME,
    CORDONED_BY_ANNOTATION,
    EVENT_REDIAGNOSING,
    EVENT_REPLACE_NEEDED,
    EVENT_REPLACING,
    EVENT_RETURNED,
    HOLD_ANNOTATION,
    QUARANTINE_CONDITION,
    QUARANTINE_TAINT,
    QUARANTINED_AT_ANNOTATION,
    REDIAGNOSE_ATTEMPTS_ANNOTATION,
    REDIAGNOSED_AT_ANNOTATION,
    REPLACEMENT_ANNOTATION,
    RETURNED_AT_ANNOTATION,
)
from controllers import node_return as nr

T0 = 1_800_000_000.0  # the quarantine
MIN = 60.0
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
AUTOSCALED = nr.Replacement(autoscaler_unneeded_minutes=10, min_nodes=0)
EKS_GPU = nr.Replacement(
    autoscaler_unneeded_minutes=10,
    repair_conditions={"AcceleratedHardwareReady": 10, "Ready": 30},
    min_nodes=0,
)
NOTHING = nr.Replacement()


def node(
    *, cordoned_by: str | None = CONTROLLER_NAME, since: float | None = T0, conditions=(), **ann: str
) -> dict[str, Any]:
    annotations = dict(ann)
    if since is not None:
        annotations[QUARANTINED_AT_ANNOTATION] = nr.rfc3339(since)
    if cordoned_by:
        annotations[CORDONED_BY_ANNOTATION] = cordoned_by
    return {
        "metadata": {"name": "gpu-1", "annotations": annotations},
        "spec": {
            "unschedulable": True,
            "taints": [GPU_TAINT, {"key": QUARANTINE_TAINT, "value": "xid-79", "effect": "NoSchedule"}],
        },
        "status": {
            "conditions": [
                {"type": QUARANTINE_CONDITION, "status": "True", "reason": "Xid79"},
                *({"type": c, "status": "False"} for c in conditions),
            ]
        },
    }


def diag(
    result: str = "pass", *, created: float = T0 + MIN, started: float | None = T0 + 2 * MIN
) -> nr.DiagRun:
    return nr.DiagRun(result, pod="trainplane-gpu-diag-abc", created_at=created, started_at=started)


BEFORE = diag("pass", created=T0 - 3600, started=T0 - 3500)  # the node-start run, before the quarantine


def decide(n, *, d=BEFORE, signals=(), pool=AUTOSCALED, pool_nodes=3, gpu_pods=0, now=T0 + 5 * MIN, **policy):
    return nr.decide(
        n,
        diag=d,
        signals=signals,
        policy=nr.Policy(**policy),
        pool=pool,
        pool_nodes=pool_nodes,
        gpu_pods=gpu_pods,
        now=now,
    )


def apply(n: dict[str, Any], d: nr.Decision) -> dict[str, Any]:
    """What the controller does with a decision (the round after sees this node)."""
    n = copy.deepcopy(n)
    ann = n["metadata"]["annotations"]
    for k, v in d.annotations.items():
        if v is None:
            ann.pop(k, None)
        else:
            ann[k] = v
    if d.taints is not None:
        n["spec"]["taints"] = d.taints
    if d.unschedulable is not None:
        n["spec"]["unschedulable"] = d.unschedulable
    if d.condition is not None:
        n["status"]["conditions"] = [
            d.condition if c["type"] == d.condition["type"] else c for c in n["status"]["conditions"]
        ]
    return n


def reasons(d: nr.Decision) -> list[str]:
    return [e.reason for e in d.events]


# (case, node, decide() keywords, expected state, expected Event reasons)
CASES = [
    ("a pass after the quarantine, no signal: returned", node(), {"d": diag()}, "returned", [EVENT_RETURNED]),
    (
        "the node-start pass (before the quarantine) never returns it",
        node(),
        {},
        "rediagnosing",
        [EVENT_REDIAGNOSING],
    ),
    (
        "a pass while a signal is still active: kept",
        node(),
        {"d": diag(), "signals": ["xid-79"]},
        "waiting",
        [],
    ),
    ("a failed rediagnosis: kept until replaceAfterMinutes", node(), {"d": diag("fail")}, "waiting", []),
    (
        "a skipped run since the quarantine (GPUs busy) is no pass: run again",
        node(),
        {"d": diag("skipped")},
        "rediagnosing",
        [EVENT_REDIAGNOSING],
    ),
    (
        "a pass whose run started before the quarantine (pod made after) is no pass",
        node(),
        {"d": diag(created=T0 + MIN, started=T0 - MIN)},
        "waiting",
        [],
    ),
    ("rediagnose off: no diagnostic pod deleted", node(), {"rediagnose": False}, "waiting", []),
    (
        "GPU pods still on the node (terminating ones too): no rediagnosis yet",
        node(),
        {"gpu_pods": 2},
        "waiting",
        [],
    ),
    (
        "our rerun was skipped (GPUs busy), backoff passed: retried",
        node(**{REDIAGNOSED_AT_ANNOTATION: nr.rfc3339(T0 + MIN)}),
        {"d": diag("skipped", created=T0 + MIN, started=T0 + MIN)},
        "rediagnosing",
        [EVENT_REDIAGNOSING],
    ),
    (
        "no diagnostic pod on the node (diagnostic off): nothing to rerun",
        node(),
        {"d": nr.DiagRun("absent")},
        "waiting",
        [],
    ),
    (
        "due, EKS GPU fault condition: the cloud's node repair",
        node(conditions=["AcceleratedHardwareReady"]),
        {"pool": EKS_GPU, "now": T0 + 31 * MIN},
        "repair",
        [EVENT_REPLACING],
    ),
    (
        "due, autoscaled pool above its minimum: released to the autoscaler",
        node(),
        {"now": T0 + 31 * MIN},
        "autoscaler",
        [EVENT_REPLACING],
    ),
    (
        "due, EKS pool but a signal EKS does not see: the autoscaler",
        node(),
        {"pool": EKS_GPU, "now": T0 + 31 * MIN},
        "autoscaler",
        [EVENT_REPLACING],
    ),
    (
        "due, autoscaled pool at its minimum: a person must act",
        node(),
        {"pool": nr.Replacement(autoscaler_unneeded_minutes=10, min_nodes=3), "now": T0 + 31 * MIN},
        "needed",
        [EVENT_REPLACE_NEEDED],
    ),
    (
        "due, no replacement at all (existing cluster): a person must act",
        node(),
        {"pool": NOTHING, "now": T0 + 31 * MIN},
        "needed",
        [EVENT_REPLACE_NEEDED],
    ),
    (
        "a pass after the quarantine returns it even once due",
        node(),
        {"d": diag(), "now": T0 + 45 * MIN},
        "returned",
        [EVENT_RETURNED],
    ),
    (
        "quarantined before the loop existed: the clock starts now",
        node(since=None),
        {},
        "rediagnosing",
        [EVENT_REDIAGNOSING],
    ),
]


@pytest.mark.parametrize(("case", "n", "kw", "state", "events"), CASES, ids=[c[0] for c in CASES])
def test_each_rule(case, n, kw, state, events):
    d = decide(n, **kw)
    assert (d.state, reasons(d)) == (state, events)


@pytest.mark.parametrize(("case", "n", "kw", "state", "events"), CASES, ids=[c[0] for c in CASES])
def test_each_rule_is_idempotent(case, n, kw, state, events):
    """Applied once, the same inputs ask for nothing more: no repeated Event, no second pod deletion."""
    first = decide(n, **kw)
    again = decide(apply(n, first), **kw)
    assert not again, again


def test_a_node_without_the_quarantine_time_gets_it_in_the_same_round():
    d = decide(node(since=None), now=T0 + 5 * MIN)
    assert d.annotations[QUARANTINED_AT_ANNOTATION] == nr.rfc3339(T0 + 5 * MIN)
    assert d.delete_diag_pod  # its clock starts now; the rest of the round goes on


def test_never_silent():
    """Every change of what happens to a quarantined node comes with an Event: return, each hand-off."""
    for _case, n, kw, _state, _events in CASES:
        d = decide(n, **kw)
        if d.taints is not None or d.unschedulable is not None or REPLACEMENT_ANNOTATION in d.annotations:
            assert d.events, _case
        if d.delete_diag_pod:
            assert reasons(d) == [EVENT_REDIAGNOSING]


def test_return_removes_only_our_taint_and_uncordons_only_our_cordon():
    d = decide(node(), d=diag())
    assert d.taints == [GPU_TAINT]
    assert d.unschedulable is False
    assert d.condition is not None and (d.condition["type"], d.condition["status"]) == (
        QUARANTINE_CONDITION,
        "False",
    )
    assert d.annotations[QUARANTINED_AT_ANNOTATION] is None and d.annotations[CORDONED_BY_ANNOTATION] is None
    assert d.annotations[RETURNED_AT_ANNOTATION] == nr.rfc3339(T0 + 5 * MIN)  # old evidence is spent

    admin = decide(node(cordoned_by=None), d=diag())
    assert admin.unschedulable is None  # an administrator's cordon stays
    assert "someone else" in admin.events[0].message
    assert decide(node(cordoned_by="someone"), d=diag()).unschedulable is None


def test_rediagnosis_deletes_the_old_diagnostic_pod_once_per_quarantine():
    first = decide(node())
    assert first.delete_diag_pod == "trainplane-gpu-diag-abc"
    n = apply(node(), first)
    # The DaemonSet's new pod is pending: nothing to delete again, no second Event.
    assert not decide(n, d=diag("pending", started=None), now=T0 + 6 * MIN)
    # Its pod gone and not yet recreated: still nothing.
    assert not decide(n, d=nr.DiagRun("absent"), now=T0 + 6 * MIN)
    # A later quarantine of the same node (quarantined-at moved on) reruns it again.
    later = apply(n, nr.Decision(annotations={QUARANTINED_AT_ANNOTATION: nr.rfc3339(T0 + 3600)}))
    assert decide(later, d=diag("pass", created=T0, started=T0 + MIN), now=T0 + 3700).delete_diag_pod


def test_no_rediagnosis_while_the_nodes_gpu_pods_terminate_then_a_skipped_run_is_retried_with_backoff():
    """Issue 30 (4): the evicted trainers hold their GPUs through their grace period. The rerun waits for
    them; a run that still found the GPUs busy (`skipped`) is retried, with backoff, a bounded number of
    times, each counted on the node and announced."""
    evicted = T0 + 10  # the GPU pods were evicted 10 s after the quarantine, grace period 120 s
    n = node()
    for now in (evicted, evicted + 60, evicted + 119):
        assert not decide(n, gpu_pods=1, now=now).delete_diag_pod, now  # terminating: GPUs still busy
    first = decide(n, gpu_pods=0, now=evicted + 121)
    assert first.delete_diag_pod == "trainplane-gpu-diag-abc"
    assert first.annotations[REDIAGNOSE_ATTEMPTS_ANNOTATION] == "1"
    n, at = apply(n, first), evicted + 121
    # A process outlived its pod: the new run ends skipped. Retried only after the backoff (60 s, then 120 s,
    # 240 s), never while a GPU pod is back on the node, at most `retries` (3) times.
    for attempt, backoff in ((2, 60), (3, 120), (4, 240)):
        skipped = diag("skipped", created=at + 5, started=at + 6)
        assert not decide(n, d=skipped, now=at + backoff - 1)
        assert not decide(n, d=skipped, gpu_pods=1, now=at + backoff).delete_diag_pod
        retry = decide(n, d=skipped, now=at + backoff)
        assert retry.annotations[REDIAGNOSE_ATTEMPTS_ANNOTATION] == str(attempt)
        assert retry.annotations[REDIAGNOSED_AT_ANNOTATION] == nr.rfc3339(at + backoff)
        (event,) = retry.events
        assert event.reason == EVENT_REDIAGNOSING and f"retry {attempt - 1}/3" in event.message
        n, at = apply(n, retry), at + backoff
    last = diag("skipped", created=at + 5, started=at + 6)
    assert not decide(n, d=last, now=at + 3600 - 1).delete_diag_pod  # the budget is spent
    assert decide(n, d=last, now=T0 + 31 * MIN).state == "autoscaler"  # rule 4 takes it
    # A retry that passes returns the node and clears the count.
    back = decide(n, d=diag("pass", created=at + 5, started=at + 6), now=at + 600)
    assert back.state == "returned" and back.annotations[REDIAGNOSE_ATTEMPTS_ANNOTATION] is None
    # A failed or pending run of ours is never retried (a failure is a signal, pending is running).
    for result in ("fail", "error", "pending"):
        assert not decide(n, d=diag(result, created=at + 5, started=at + 6), now=at + 600).delete_diag_pod


def test_a_skipped_run_of_a_node_quarantined_before_its_first_diagnostic_and_a_refused_deletion_are_retried():
    # The node-start run came after the quarantine (it was quarantined for missing GPUs) and was skipped.
    late = diag("skipped", created=T0 + MIN, started=T0 + MIN)
    assert decide(node(), d=late).annotations[REDIAGNOSE_ATTEMPTS_ANNOTATION] == "1"
    # Our deletion of the run from before the quarantine was refused (the pod is still there, not deleting):
    # asked again after the backoff, counted.
    n = apply(node(), decide(node(), now=T0 + 5 * MIN))
    assert not decide(n, now=T0 + 5 * MIN + 59)
    again = decide(n, now=T0 + 6 * MIN)
    assert again.delete_diag_pod and again.annotations[REDIAGNOSE_ATTEMPTS_ANNOTATION] == "2"


def test_the_hold_keeps_the_autoscaler_off_until_the_hand_off_and_never_touches_an_admin_hold():
    first = decide(node())
    assert first.annotations[nr.SCALE_DOWN_DISABLED] == "true"
    assert first.annotations[HOLD_ANNOTATION] == CONTROLLER_NAME
    handed = decide(apply(node(), first), now=T0 + 31 * MIN)
    assert handed.annotations[nr.SCALE_DOWN_DISABLED] is None and handed.annotations[HOLD_ANNOTATION] is None
    returned = decide(apply(node(), first), d=diag())
    assert returned.annotations[nr.SCALE_DOWN_DISABLED] is None

    admin = node(**{nr.SCALE_DOWN_DISABLED: "true"})
    assert nr.SCALE_DOWN_DISABLED not in decide(admin).annotations
    assert nr.SCALE_DOWN_DISABLED not in decide(admin, now=T0 + 31 * MIN).annotations
    assert nr.SCALE_DOWN_DISABLED not in decide(admin, d=diag()).annotations
    # A pool no autoscaler scales needs no hold.
    assert nr.SCALE_DOWN_DISABLED not in decide(node(), pool=NOTHING).annotations


def test_replace_needed_is_said_once_and_again_only_when_the_answer_changes():
    at_min = nr.Replacement(autoscaler_unneeded_minutes=10, min_nodes=3)
    first = decide(node(), pool=at_min, now=T0 + 31 * MIN)
    assert reasons(first) == [EVENT_REPLACE_NEEDED] and "minimum" in first.events[0].message
    n = apply(node(), first)
    for minutes in (32, 60, 600):
        assert not decide(n, pool=at_min, now=T0 + minutes * MIN)
    # The pool grew past its minimum: the autoscaler can take it now, and that is said.
    grown = decide(n, pool=at_min, pool_nodes=4, now=T0 + 61 * MIN)
    assert (grown.state, reasons(grown)) == ("autoscaler", [EVENT_REPLACING])


def test_not_quarantined_is_left_alone():
    plain = {"metadata": {"name": "gpu-2"}, "spec": {"taints": [GPU_TAINT]}, "status": {"conditions": []}}
    assert not decide(plain, d=diag(), now=T0 + 600 * MIN)


def test_diag_run_reads_the_pod():
    pod = {
        "metadata": {"name": "p", "creationTimestamp": "2027-01-15T08:00:00Z"},
        "status": {
            "initContainerStatuses": [
                {
                    "name": "dcgm-diag",
                    "state": {"terminated": {"startedAt": "2027-01-15T08:00:05Z", "exitCode": 0}},
                }
            ]
        },
    }
    run = nr.DiagRun.of(pod, "dcgm-diag", "pass")
    assert (run.pod, run.started_at - run.created_at) == ("p", 5.0)
    assert nr.DiagRun.of(None, "dcgm-diag", "pending").result == "absent"
    assert nr.parse_time("garbage") is None
