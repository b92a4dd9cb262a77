"""`trainplane status`: each rule that names a restart's cause, on plain API dicts (infra/status/causes.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from components.incluster.job_runtime import RULE_CONFIG, RULE_OTHER, RULE_PEER_LOST, RULE_PREEMPTED
from contract.recovery import EVENT_EVICTED, EVENT_QUARANTINED, QUARANTINE_CONDITION
from infra.status.causes import (
    CAUSES,
    CONFIG_ERROR,
    CRASH,
    EVICTED,
    HANG,
    NODE_FAULT,
    PEER_LOSS,
    PREEMPTION,
    UNKNOWN,
    Evidence,
    classify,
)
from trainer import contract


def pod(name: str, code: int | None = None, node: str = "n1", disrupted: str | None = None) -> dict:
    status: dict = {"conditions": []}
    if code is not None:
        status["containerStatuses"] = [{"name": "trainer", "state": {"terminated": {"exitCode": code}}}]
    if disrupted is not None:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": disrupted})
    return {"metadata": {"name": name}, "spec": {"nodeName": node}, "status": status}


def event(kind: str, name: str, reason: str, message: str = "") -> dict:
    return {"involvedObject": {"kind": kind, "name": name}, "reason": reason, "message": message}


QUARANTINED = {
    "metadata": {"name": "n1"},
    "status": {
        "conditions": [{"type": QUARANTINE_CONDITION, "status": "True", "reason": "Xid79", "message": "x"}]
    },
}

CASES = {
    # exit codes of the trainer container (trainer/contract.py)
    "config error exit": (
        Evidence(pods=[pod("p0", contract.EXIT_CONFIG), pod("p1", 75)]),
        CONFIG_ERROR,
        "p0 exited 2",
    ),
    "config error rule": (Evidence(rule=RULE_CONFIG), CONFIG_ERROR, RULE_CONFIG),
    "hang beats its peer's exit 75": (Evidence(pods=[pod("p0", 124), pod("p1", 75)]), HANG, "p0 exited 124"),
    "crash": (Evidence(pods=[pod("p0", 1), pod("p1", 75)]), CRASH, "p0 exited 1: crash"),
    "failed saves are a crash": (Evidence(pods=[pod("p0", 74)]), CRASH, "checkpoint saves failed"),
    "a worker killed": (Evidence(pods=[pod("p0", 137)]), CRASH, "SIGKILL"),
    "peer loss alone": (Evidence(pods=[pod("p1", 75)]), PEER_LOSS, "p1 exited 75"),
    "preempted after a checkpoint": (
        Evidence(pods=[pod("p0", 143), pod("p1", 75)]),
        PREEMPTION,
        "p0 exited 143",
    ),
    # the DisruptionTarget condition and its reason
    "drained or spot notice": (
        Evidence(pods=[pod("p0", 143, disrupted="EvictionByEvictionAPI"), pod("p1", 75)]),
        PREEMPTION,
        "EvictionByEvictionAPI",
    ),
    "scheduler preemption": (
        Evidence(pods=[pod("p0", disrupted="PreemptionByScheduler")]),
        PREEMPTION,
        "Scheduler",
    ),
    "node gone (pod GC)": (
        Evidence(pods=[pod("p0", disrupted="DeletionByPodGC"), pod("p1", 75)]),
        NODE_FAULT,
        "PodGC",
    ),
    "node unreachable (taint manager)": (
        Evidence(pods=[pod("p0", disrupted="DeletionByTaintManager")]),
        NODE_FAULT,
        "DeletionByTaintManager on node n1",
    ),
    # the GPU health controller's quarantine (contract/recovery.py)
    "node condition": (
        Evidence(pods=[pod("p0", 143, disrupted="EvictionByEvictionAPI")], nodes={"n1": QUARANTINED}),
        NODE_FAULT,
        "node n1 quarantined (Xid79: x)",
    ),
    "node Event": (
        Evidence(pods=[pod("p0", 1)], events=[event("Node", "n1", EVENT_QUARANTINED)]),
        NODE_FAULT,
        EVENT_QUARANTINED,
    ),
    "pod eviction Event, pods gone": (
        Evidence(events=[event("Pod", "job-0", EVENT_EVICTED, "n1 quarantined")], rule=RULE_PREEMPTED),
        NODE_FAULT,
        "job-0: GpuPodEvicted Event (n1 quarantined)",
    ),
    "taint manager Event, pods gone": (
        Evidence(events=[event("Pod", "job-0", "TaintManagerEviction")]),
        NODE_FAULT,
        "TaintManagerEviction",
    ),
    "scheduler Event, pods gone": (
        Evidence(events=[event("Pod", "job-0", "Preempted")]),
        PREEMPTION,
        "Preempted",
    ),
    # Kueue evictions (EvictedDueTo<reason>)
    "Kueue preemption": (Evidence(kueue_reason="Preempted"), PREEMPTION, "Kueue"),
    "Kueue node failures": (Evidence(kueue_reason="NodeFailures"), NODE_FAULT, "NodeFailures"),
    "Kueue other": (Evidence(kueue_reason="PodsReadyTimeout"), EVICTED, "PodsReadyTimeout"),
    # the pods are gone: the JobSet rule that fired
    "rule: preemption": (Evidence(rule=RULE_PREEMPTED), PREEMPTION, RULE_PREEMPTED),
    "rule: peer loss": (Evidence(rule=RULE_PEER_LOST), PEER_LOSS, RULE_PEER_LOST),
    "rule: counted": (Evidence(rule=RULE_OTHER), CRASH, RULE_OTHER),
    "nothing left": (Evidence(), UNKNOWN, "no pod"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_each_cause_rule(case):
    evidence, cause, said = CASES[case]
    found = classify(evidence)
    assert (found.cause, said in found.evidence) == (cause, True), found


def test_every_cause_has_a_case():
    assert {cause for _, cause, _ in CASES.values()} == set(CAUSES)


def test_a_healthy_node_and_another_nodes_event_do_not_make_a_node_fault():
    healthy = {
        "metadata": {"name": "n1"},
        "status": {"conditions": [{"type": QUARANTINE_CONDITION, "status": "False"}]},
    }
    found = classify(
        Evidence(
            pods=[pod("p0", 124)], nodes={"n1": healthy}, events=[event("Node", "n9", EVENT_QUARANTINED)]
        )
    )
    assert found.cause == HANG


def test_a_node_quarantined_after_the_restart_did_not_cause_it():
    node = {
        "metadata": {"name": "n1"},
        "status": {
            "conditions": [
                {
                    "type": QUARANTINE_CONDITION,
                    "status": "True",
                    "reason": "Xid79",
                    "lastTransitionTime": "2026-11-20T12:00:00Z",
                }
            ]
        },
    }
    restart = datetime(2026, 11, 20, 11, 0, tzinfo=UTC).timestamp()
    assert classify(Evidence(pods=[pod("p0", 124)], nodes={"n1": node}, at=restart)).cause == HANG
    assert (
        classify(Evidence(pods=[pod("p0", 124)], nodes={"n1": node}, at=restart + 3600)).cause == NODE_FAULT
    )


def test_only_the_trainer_containers_exit_code_counts():
    p = pod("p0")
    p["status"]["containerStatuses"] = [
        {"name": "sidecar", "state": {"terminated": {"exitCode": 2}}},
        {"name": "trainer", "lastState": {"terminated": {"exitCode": 124}}, "state": {"running": {}}},
    ]
    assert classify(Evidence(pods=[p])).cause == HANG
