"""One component at a time, the way a user who imports the library uses it: instantiate it with its Args
under the mock engine (`infra.mockcloud.run_function`) and assert on its `resources` dataclass.

The pattern, for a component of your own program:

    result, op = run_function(lambda: GpuOperator("gpu", GpuOperatorArgs(...)))
    release = op.resources.release          # what it made, typed
    one(result, "kubernetes:helm.sh/v3:Release")  # or what the engine recorded
"""

from __future__ import annotations

import dataclasses

import pulumi
import pytest

from components.aws.node_group import NodePool as AwsNodePool
from components.aws.node_group import NodePoolArgs as AwsNodePoolArgs
from components.bundle import ClusterBundle
from components.gcp.naming import GcpPlacement
from components.gcp.node_pool import NodePool as GcpNodePool
from components.gcp.node_pool import NodePoolArgs as GcpNodePoolArgs
from components.incluster.gpu_operator import GpuOperator, GpuOperatorArgs
from components.incluster.tenancy import TeamTenancy, TeamTenancyArgs
from components.kubernetes.cluster import ExistingCluster, ExistingClusterArgs
from components.spec import GpuHealthSpec, GpuOperatorSpec, NodePoolSpec, PlatformSpec, TeamSpec
from infra.mockcloud import run_function
from tests.helpers.plans import platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

LAB = platform_object("onprem-dev")


def lab_bundle() -> ClusterBundle:
    """The bundle of the existing-cluster backend for onprem-dev (no cloud needed)."""
    return ExistingCluster(
        "lab", ExistingClusterArgs(spec=PlatformSpec.load(LAB), kubeconfig="(kubeconfig)")
    ).bundle


def _owned(result, component: pulumi.Resource) -> set[str]:
    """Names of the resources registered under `component` (children and their children)."""
    urns = {r.urn: r for r in result.resources}
    names = set()
    for r in result.resources:
        parent = r.parent
        while parent is not None and parent in urns:
            if urns[parent].name == component._name and urns[parent].type == component._type:
                names.add(r.name)
                break
            parent = urns[parent].parent
    return names


def test_gpu_operator_on_its_own():
    def build():
        return GpuOperator(
            "gpu",
            GpuOperatorArgs(
                gpu_operator=GpuOperatorSpec(driver=False),
                gpu_health=GpuHealthSpec(enabled=False),
                bundle=lab_bundle(),
            ),
        )

    result, op = run_function(build)
    res = op.resources
    assert dataclasses.is_dataclass(res) and res.health is None and res.system_objects == ()
    (release,) = [r for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    assert release.name == "gpu-release" and release.inputs["values"]["driver"] == {"enabled": True}
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.release = None  # type: ignore[misc]
    assert _owned(result, op) == {"gpu-ns", "gpu-dcgm-metrics", "gpu-release"}


def test_team_tenancy_on_its_own():
    team = TeamSpec(name="vision", gpu_quota=8, admins=["alice@example.com"])
    result, tenancy = run_function(
        lambda: TeamTenancy("vision", TeamTenancyArgs(team=team, bundle=lab_bundle()))
    )
    res = tenancy.resources
    assert res.admins is not None and set(res.network_policies) >= {"default-deny", "allow-dns"}
    (quota,) = [r for r in result.resources if r.type == "kubernetes:core/v1:ResourceQuota"]
    assert quota.inputs["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"


def test_args_are_frozen_and_keyword_only():
    with pytest.raises(TypeError):
        TeamTenancyArgs(TeamSpec(name="x", gpu_quota=0), None)  # type: ignore[misc]


def test_node_pools_have_one_shape_on_both_clouds():
    gpu = NodePoolSpec(name="h100", gpu="H100", gpus_per_node=8, capacity="spot", max_nodes=2)

    def aws_pool():
        return AwsNodePool(
            "ml-h100",
            AwsNodePoolArgs(
                pool=gpu,
                gpus_per_node=8,
                cluster_name="ml",
                cluster="ml",
                node_role_arn="arn:aws:iam::123456789012:role/node",
                subnet_ids=["subnet-0123456789abcdef0"],
                vpc_id="vpc-0123456789abcdef0",
                security_group_ids=["sg-0123456789abcdef0"],
            ),
        )

    def gcp_pool():
        return GcpNodePool(
            "ml-h100",
            GcpNodePoolArgs(
                placement=GcpPlacement(project="example-ml-dev", region="us-central1", cluster_name="ml"),
                pool=gpu,
                zones=("us-central1-a",),
                cluster_id="projects/example-ml-dev/locations/us-central1/clusters/ml",
                location="us-central1",
                node_service_account="ml-nodes@example-ml-dev.iam.gserviceaccount.com",
                node_tag="ml-node",
                # a3-highgpu-8g has GPUDirect-TCPX: GcpCloud hands its pools the 4 fabric networks.
                fabric_networks=tuple((f"ml-gpunet-{i}", f"ml-gpunet-{i}-subnet") for i in range(4)),
            ),
        )

    aws_result, aws = run_function(aws_pool)
    gcp_result, gcp = run_function(gcp_pool)
    assert aws._type == "trainplane:aws:NodePool" and gcp._type == "trainplane:gcp:NodePool"
    # The same NodePoolInfo on both, and what each made in its resources.
    assert (aws.info.gpu, aws.info.gpus_per_node, aws.info.capacity) == ("H100", 8, "spot")
    assert (gcp.info.gpu, gcp.info.gpus_per_node, gcp.info.capacity) == ("H100", 8, "spot")
    # The machine facts the in-cluster layer sizes pods and quotas by: p5.48xlarge, a3-highgpu-8g.
    assert (aws.info.node_vcpus, aws.info.node_memory_gib) == (192, 2048.0)
    assert (gcp.info.node_vcpus, gcp.info.node_memory_gib) == (208, 1872.0)
    assert aws.resources.node_group is aws.node_group and aws.resources.autoscaler_tags
    assert gcp.resources.node_pool is gcp.node_pool
    # Deployed stacks keep their pools: the old GPU pool types are aliases.
    (aws_rec,) = [r for r in aws_result.resources if r.type == "trainplane:aws:NodePool"]
    assert any("trainplane:aws:GpuNodePool::ml-h100" in a for a in aws_rec.alias_urns)
    (gcp_rec,) = [r for r in gcp_result.resources if r.type == "trainplane:gcp:NodePool"]
    assert any("trainplane:gcp:GpuNodePool::ml-h100" in a for a in gcp_rec.alias_urns)
