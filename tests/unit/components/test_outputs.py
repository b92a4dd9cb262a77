"""PlatformOutputs: what a platform stack exports is what a job stack parses, and a platform deployed
before a key existed still parses (defaults), so its job stacks plan as before."""

from __future__ import annotations

import asyncio
import copy
import json
import sys

import pytest

from components.bundle import CloudProfile, ClusterBundle
from components.outputs import (
    READ_KEYS,
    NodePoolInfo,
    NodeReplacement,
    PlatformOutputs,
    PodFabric,
    RackDomain,
    StorageHandle,
    TaintInfo,
)
from components.platform import platform_outputs
from components.spec import PlatformSpec
from tests.helpers.plans import FLEET_JOB_STACKS, FLEET_STACKS, JOB_STACKS, ROOT, planned, stack_files

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NEWER_POOL_KEYS = ("nodeVcpus", "nodeMemoryGiB")


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_every_exported_key_is_read_back(stack):
    outputs = planned(stack).outputs
    assert set(READ_KEYS) | {"kubeconfig"} == set(outputs)
    parsed = PlatformOutputs.model_validate(outputs)
    assert parsed.exports().keys() == outputs.keys()
    assert [p.name for p in parsed.node_pools] == [p["name"] for p in outputs["nodePools"]]


def _older(outputs: dict) -> dict:
    """Outputs as a platform deployed before preemptionGraceSeconds and the pools' machine facts."""
    old = copy.deepcopy(outputs)
    old.pop("preemptionGraceSeconds")
    for pool in old["nodePools"]:
        for key in NEWER_POOL_KEYS:
            pool.pop(key)
    return old


@pytest.mark.parametrize(("stack", "grace"), [("aws-dev", 120), ("gcp-dev", 30), ("onprem-dev", 300)])
def test_an_older_platform_parses_with_the_defaults_of_its_cloud(stack, grace):
    new = PlatformOutputs.model_validate(planned(stack).outputs)
    old = PlatformOutputs.model_validate(_older(planned(stack).outputs))
    assert old.preemption_grace_seconds == new.preemption_grace_seconds == grace
    # Machine facts come back from the catalog for the machine types the older platform recorded.
    assert [(p.node_vcpus, p.node_memory_gib) for p in old.node_pools] == [
        (p.node_vcpus, p.node_memory_gib) for p in new.node_pools
    ]


def test_a_job_plans_the_same_on_an_older_platform(plan_stack):
    platform = planned("aws-dev").outputs
    now = plan_stack("gpt-small-aws-dev", {"aws-dev": platform})
    before = plan_stack("gpt-small-aws-dev", {"aws-dev": _older(platform)})
    assert {r.urn: r.inputs for r in before.resources} == {r.urn: r.inputs for r in now.resources}


def test_keys_a_newer_platform_adds_are_ignored():
    outputs = {**planned("onprem-dev").outputs, "someFutureKey": {"x": 1}}
    assert PlatformOutputs.model_validate(outputs).cluster_name == "lab"


# ---- what each reference platform exports, pinned --------------------------------------------------

OUTPUTS = ROOT / "tests" / "data" / "outputs"
PLATFORM_STACKS = sorted(p.stem for p in OUTPUTS.glob("*.json"))


def _exported(stack: str) -> str:
    return json.dumps(planned(stack).outputs, indent=1) + "\n"


def test_every_platform_stack_has_its_exports_recorded():
    platforms = {p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stack_files()} - {
        *JOB_STACKS,
        *FLEET_STACKS,
        *FLEET_JOB_STACKS,
    }
    assert set(PLATFORM_STACKS) == platforms


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_what_a_platform_exports_is_byte_for_byte_what_is_recorded(stack):
    """Job stacks of deployed platforms parse these keys and values: a change of either (a renamed key, an
    int that became a float, a list order) must be deliberate. Regenerate only then, and review the diff:
    `python tests/unit/components/test_outputs.py --update`."""
    assert _exported(stack) == (OUTPUTS / f"{stack}.json").read_text()


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    OUTPUTS.mkdir(exist_ok=True)
    for path in stack_files():
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        if name not in JOB_STACKS and name not in FLEET_STACKS and name not in FLEET_JOB_STACKS:
            (OUTPUTS / f"{name}.json").write_text(_exported(name))


@pytest.fixture
def event_loop():
    """platform_outputs wraps the kubeconfig in a pulumi secret Output, which needs a current event loop;
    outside the mock engine (this test alone, `-p no:xdist`) there is none."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


def test_the_platform_exports_its_backends_pool_and_storage_records_themselves(event_loop):
    """One model per concept: the pools and file systems a backend puts in its bundle are the records the
    platform exports and a job stack parses back, not copies made field by field (where a field the
    backend sets could be dropped on the way out)."""
    spec = PlatformSpec.load(
        {
            "cloud": "kubernetes",
            "cluster": {"name": "lab"},
            "nodePools": [{"name": "gpu", "selector": {"pool": "gpu"}, "gpu": "H100", "gpusPerNode": 8}],
            "teams": [{"name": "research", "gpuQuota": 8}],
        }
    )
    fabric = PodFabric(
        kind="rdma",
        annotations={"a": "b"},
        volumes=({"name": "lib", "hostPath": {"path": "/lib"}},),
        volume_mounts=({"name": "lib", "mountPath": "/lib"},),
        sidecars=({"name": "agent", "image": "agent:1"},),
    )
    pool = NodePoolInfo(
        name="gpu",
        gpu="H100",
        gpus_per_node=8,
        capacity="reservation",
        min_nodes=2,
        max_nodes=2,
        labels={"pool": "gpu"},
        taints=(TaintInfo(key="nvidia.com/gpu", value="present", effect="NoSchedule"),),
        machine_types=("dgx-h100",),
        extended_resources={"rdma/ib": 8},
        pod_env={"NCCL_IB_HCA": "mlx5"},
        node_vcpus=224,
        node_memory_gib=2048.0,
        reservation="lab-h100",
        fabric=fabric,
        topology_levels=("rack", "kubernetes.io/hostname"),
        provisioning_class="example.com/queued",
        workload_annotations={"x": "y"},
        replacement=NodeReplacement(autoscaler_unneeded_minutes=7, repair_conditions={"Ready": 5}),
        rack=RackDomain(gpus=72, nodes=18),
    )
    storage = StorageHandle(
        name="datasets",
        kind="nfs",
        capacity_gib=1024,
        csi_driver="nfs.csi.k8s.io",
        volume_handle="nfs:/export",
        volume_attributes={"server": "nfs"},
        mount_options=("hard",),
        endpoint="nfs",
    )
    # The test sets every field, so the round trip below covers each one.
    assert pool.model_fields_set == set(NodePoolInfo.model_fields)
    assert storage.model_fields_set == set(StorageHandle.model_fields)
    bundle = ClusterBundle(
        name="lab",
        region=None,
        provider=None,  # neither read by the outputs
        kubeconfig=None,
        profile=CloudProfile(name="lab"),
        node_pools=(pool,),
        storage=(storage,),
    )
    out = platform_outputs(spec, bundle)
    assert out.node_pools[0] is pool and out.storage[0] is storage
    parsed = PlatformOutputs.model_validate({**out.exports(), "kubeconfig": None})
    assert (parsed.node_pools, parsed.storage) == ([pool], [storage])
