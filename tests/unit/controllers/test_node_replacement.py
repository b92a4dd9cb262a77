"""Each backend's answer to "how is a quarantined node of this pool replaced" (NodePoolInfo.replacement), on
every reference platform stack, agrees with what the stack really configures, and leads the controller's
decision (node_return.decide) where the traced upstream behaviour says it should."""

from __future__ import annotations

from typing import Any

import pytest

from components.outputs import PlatformOutputs
from contract.recovery import (
    CONTROLLER_NAME,
    CORDONED_BY_ANNOTATION,
    QUARANTINE_CONDITION,
    QUARANTINE_TAINT,
    QUARANTINED_AT_ANNOTATION,
)
from controllers import node_return as nr
from tests.helpers.plans import (
    FLEET_JOB_STACKS,
    FLEET_STACKS,
    JOB_STACKS,
    planned,
    platform_object,
    stack_files,
)

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
RELEASE = "kubernetes:helm.sh/v3:Release"
POOL_LABEL = "trainplane.dev/pool"
PLATFORMS = sorted(
    n
    for p in stack_files()
    if (n := p.name.removeprefix("Pulumi.").removesuffix(".yaml")) not in JOB_STACKS
    and n not in FLEET_STACKS
    and n not in FLEET_JOB_STACKS
)


def cloud_of(stack: str) -> str:
    """The cloud a stack file names: parametrizing by it plans nothing while the tests are collected (each
    xdist worker collects; planning the ten platforms there cost each of them 20 s of a CPU)."""
    return str(platform_object(stack)["cloud"])


def stacks_of(cloud: str) -> list[str]:
    return [s for s in PLATFORMS if cloud_of(s) == cloud]


def pools(stack: str) -> list[dict[str, Any]]:
    return planned(stack).outputs["nodePools"]


def test_every_platform_stack_is_covered():
    assert {s: planned(s).outputs["cloud"] for s in PLATFORMS} == {s: cloud_of(s) for s in PLATFORMS}
    assert set(stacks_of("aws")) | set(stacks_of("gcp")) | set(stacks_of("kubernetes")) == set(PLATFORMS)
    assert stacks_of("aws") and stacks_of("gcp") and stacks_of("kubernetes")


@pytest.mark.parametrize("stack", stacks_of("aws"))
def test_aws_pools_are_replaced_by_the_autoscaler_and_gpu_pools_by_node_repair(stack):
    """Every EKS node group is scaled by cluster-autoscaler with --scale-down-unneeded-time 10m; GPU groups
    have EKS node repair on, which acts on AcceleratedHardwareReady=False after 10m (Ready after 30m)."""
    result = planned(stack)
    (ca,) = [r for r in result.of_type(RELEASE) if r.inputs["chart"] == "cluster-autoscaler"]
    unneeded = ca.inputs["values"]["extraArgs"]["scale-down-unneeded-time"]
    groups = {g.inputs["labels"][POOL_LABEL]: g.inputs for g in result.of_type(NODE_GROUP)}
    for pool in pools(stack):
        r = pool["replacement"]
        assert f"{r['autoscalerUnneededMinutes']}m" == unneeded == "10m"
        repair = bool((groups[pool["name"]].get("nodeRepairConfig") or {}).get("enabled"))
        assert repair == bool(pool["gpu"])
        assert r["repairConditions"] == ({"AcceleratedHardwareReady": 10, "Ready": 30} if repair else {})


@pytest.mark.parametrize("stack", stacks_of("gcp"))
def test_gcp_pools_are_replaced_by_the_autoscaler_and_auto_repair_where_on(stack):
    """Every GKE pool has autoscaling; auto-repair (off on flex-start and queued pools) acts on a node that is
    NotReady for about 10 minutes, never on a GPU fault of a Ready node."""
    nps = {np.inputs["name"]: np.inputs for np in planned(stack).of_type(GKE_NODE_POOL)}
    for pool in pools(stack):
        r, np = pool["replacement"], nps[pool["name"]]
        assert np["autoscaling"]["totalMaxNodeCount"] >= np["autoscaling"]["totalMinNodeCount"]
        assert r["autoscalerUnneededMinutes"] == 10
        assert r["repairConditions"] == ({"Ready": 10} if np["management"]["autoRepair"] else {})


@pytest.mark.parametrize("stack", stacks_of("kubernetes"))
def test_existing_cluster_pools_have_no_replacement(stack):
    for pool in pools(stack):
        assert pool["replacement"] == {"autoscalerUnneededMinutes": None, "repairConditions": {}}


def test_a_job_stack_reads_a_platform_exported_before_the_key():
    old = {k: v for k, v in pools("aws-dev")[1].items() if k != "replacement"}
    outputs = {**planned("aws-dev").outputs, "nodePools": [old]}
    assert (
        PlatformOutputs.model_validate(outputs).node_pools[0].replacement.autoscaler_unneeded_minutes is None
    )


T0 = 1_800_000_000.0


def due_node(*false_conditions: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "n",
            "annotations": {
                QUARANTINED_AT_ANNOTATION: nr.rfc3339(T0),
                CORDONED_BY_ANNOTATION: CONTROLLER_NAME,
                nr.SCALE_DOWN_DISABLED: "true",
            },
        },
        "spec": {"unschedulable": True, "taints": [{"key": QUARANTINE_TAINT, "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": QUARANTINE_CONDITION, "status": "True"},
                *({"type": c, "status": "False"} for c in false_conditions),
            ]
        },
    }


def mode(stack: str, pool_name: str, pool_nodes: int, *false_conditions: str) -> str:
    (pool,) = [p for p in pools(stack) if p["name"] == pool_name]
    d = nr.decide(
        due_node(*false_conditions),
        diag=nr.DiagRun("fail", pod="d", created_at=T0 + 60, started_at=T0 + 61),
        signals=["diag-failed"],
        policy=nr.Policy(),
        pool=nr.Replacement.from_config(pool),
        pool_nodes=pool_nodes,
        gpu_pods=0,
        now=T0 + 31 * 60,
    )
    return d.state


def test_the_controller_hands_each_reference_pool_to_what_replaces_it():
    assert mode("aws-dev", "h100", 2, "AcceleratedHardwareReady") == "repair"  # the EKS agent saw the fault
    assert mode("aws-dev", "h100", 2) == "autoscaler"  # our own signal: the autoscaler, above min size
    gcp_gpu = next(p["name"] for p in pools("gcp-dev") if p["gpu"])
    assert mode("gcp-dev", gcp_gpu, 2, "AcceleratedHardwareReady") == "autoscaler"  # GKE repairs no GPU fault
    onprem_gpu = next(p for p in pools("onprem-dev") if p["gpu"])
    assert mode("onprem-dev", onprem_gpu["name"], 99) == "needed"
    assert mode("aws-dev", "system", 2) == "needed"  # at its min size (2): the autoscaler keeps it
    assert mode("gcp-dev", gcp_gpu, 2, "Ready") == "repair"  # NotReady: GKE auto-repair recreates it
    assert mode("gcp-h100-dws", "h100-flex", 2, "Ready") == "autoscaler"  # no auto-repair on flex-start
