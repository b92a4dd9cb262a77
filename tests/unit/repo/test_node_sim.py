"""The fault campaign's node model (tests/helpers/node_sim.py) places the job builder's real pod template as
the scheduler would, so the campaign's "no restart lands on a quarantined node" can fail: a pod that did
tolerate the quarantine would land there."""

from __future__ import annotations

import copy
import datetime as dt

import pytest

from contract.recovery import (
    CONTROLLER_NAME,
    CORDONED_BY_ANNOTATION,
    EVENT_EVICTED,
    EVENT_QUARANTINED,
    QUARANTINE_CONDITION,
    QUARANTINE_TAINT,
)
from tests.helpers.jobs import jobset, platform_outputs
from tests.helpers.node_sim import UNSCHEDULABLE, Cluster, Unschedulable, pool_cluster

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _cluster() -> Cluster:
    """aws-dev's pools (system, h100 spot): 2 h100 nodes, a system node, an on-demand h100 node."""
    return pool_cluster(platform_outputs("aws-dev")["nodePools"], "h100", 2)


def _template() -> tuple[dict, dict]:
    (rj,) = jobset()["spec"]["replicatedJobs"]
    t = copy.deepcopy(rj["template"]["spec"]["template"])
    return t["spec"], t["metadata"]["labels"]


def test_the_job_template_goes_only_on_its_pool_one_pod_per_node():
    spec, labels = _template()
    c = _cluster()
    assert [c.place(f"p{i}", spec, labels) for i in range(2)] == ["h100-0", "h100-1"]
    # the on-demand node's capacity label, the system node's selector, and anti-affinity on the two taken
    with pytest.raises(Unschedulable, match="0/4 nodes are available for p2"):
        c.place("p2", spec, labels)
    why = {n: c.why_not(spec, labels, c.nodes[n]) for n in c.nodes}
    assert why["h100-od-0"] == "nodeSelector does not match"
    assert why["system-0"] == "nodeSelector does not match"
    assert why["h100-0"] == "pod anti-affinity with p0"


def test_quarantine_writes_the_contract_and_evicts_the_pod_and_the_template_never_returns():
    spec, labels = _template()
    c = _cluster()
    c.place("p0", spec, labels)
    assert c.quarantine("h100-0", "Xid79", "XID 79", AT) == ["p0"]
    n = c.nodes["h100-0"]
    assert n.unschedulable and n.annotations[CORDONED_BY_ANNOTATION] == CONTROLLER_NAME
    assert {"key": QUARANTINE_TAINT, "value": "Xid79", "effect": "NoSchedule"} in n.taints
    assert n.conditions[QUARANTINE_CONDITION]["status"] == "True"
    assert [r for r, _, _ in c.events] == [EVENT_QUARANTINED, EVENT_EVICTED]
    assert c.place("p1", spec, labels) == "h100-1"  # the quarantined node sorts first: refused
    assert c.why_not(spec, labels, n) == "unschedulable (cordoned)"


def test_a_pod_that_tolerates_the_quarantine_and_the_cordon_would_land_on_the_node():
    spec, labels = _template()
    c = _cluster()
    c.quarantine("h100-0", "Xid79", "XID 79", AT)
    spec["tolerations"] += [
        {"key": QUARANTINE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
        {"key": UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert c.place("diag", spec, labels) == "h100-0"


def test_a_lost_node_takes_no_pod():
    spec, labels = _template()
    c = _cluster()
    c.lose("h100-0")
    assert c.why_not(spec, labels, c.nodes["h100-0"]).startswith(
        "untolerated taint node.kubernetes.io/unreachable"
    )
