"""The AWS stacks end to end under the mock engine: outputs, dependencies, `trainplane plan`.

Also the helpers the other test_aws_* modules share (plans come from conftest: once per process).
"""

from __future__ import annotations

import json

import pytest

from tests.helpers.aws import NODE_GROUP, plan, waits_for
from tests.helpers.plans import ROOT, one

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

AWS_STACKS = ["aws-dev", "aws-h200-efa", "aws-byo-vpc"]
# How the engine marks a secret value on the wire.
SECRET_SIG = "4dabf18193072939515e22adb298388d"


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_stack_exports_what_job_stacks_read(stack):
    result = plan(stack)
    out = result.outputs
    spec_pools = {p["name"] for p in out["nodePools"]}
    assert out["cloud"] == "aws" and out["region"] == "us-east-1"
    assert out["clusterName"] == one(result, "aws:eks/cluster:Cluster").inputs["name"]
    assert spec_pools == {r.inputs["labels"]["trainplane.dev/pool"] for r in result.of_type(NODE_GROUP)}
    assert out["objectStore"] == "s3"
    assert (
        out["buckets"]["checkpoints"]
        == one(result, "aws:s3/bucket:Bucket", f"{out['clusterName']}-buckets-checkpoints-bucket").inputs[
            "bucketPrefix"
        ]
        + "20260101000000000000000001"
    )
    for team in out["teams"]:
        assert team["serviceAccount"] == "trainer" and team["namespace"] == team["name"]
        assert team["identity"].startswith("arn:aws:iam::123456789012:role/")
    assert "kubeconfig" in result.secret_outputs


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_kubeconfig_authenticates_with_aws_eks_get_token(stack):
    result = plan(stack)
    config = json.loads(result.outputs["kubeconfig"])
    name = result.outputs["clusterName"]
    (user,) = config["users"]
    assert user["user"]["exec"]["command"] == "aws"
    assert user["user"]["exec"]["args"] == [
        "eks",
        "get-token",
        "--cluster-name",
        name,
        "--region",
        "us-east-1",
    ]
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"].endswith(".eks.amazonaws.com")
    assert cluster["cluster"]["certificate-authority-data"]
    # The provider handed to the in-cluster layer is built from this kubeconfig.
    provider = one(result, "pulumi:providers:kubernetes")
    sent = provider.inputs["kubeconfig"]
    assert isinstance(sent, dict) and SECRET_SIG in sent, "the provider's kubeconfig must stay a secret"
    assert json.loads(sent["value"]) == config


@pytest.mark.parametrize("stack", ["aws-dev", "aws-h200-efa"])
def test_fsx_does_not_wait_for_the_eks_cluster(stack):
    result = plan(stack)
    cluster = one(result, "aws:eks/cluster:Cluster")
    fs = one(result, "aws:fsx/lustreFileSystem:LustreFileSystem")
    deps = waits_for(result, fs)
    assert cluster.urn not in deps
    # ... but it does wait for what it really needs: its security group and the data key.
    types = {result.by_urn()[u].type for u in deps}
    assert {"aws:ec2/securityGroup:SecurityGroup", "aws:kms/key:Key"} <= types


def test_efs_does_not_wait_for_the_eks_cluster():
    result = plan("aws-byo-vpc")
    cluster = one(result, "aws:eks/cluster:Cluster")
    for r in result.of_type("aws:efs/fileSystem:FileSystem") + result.of_type(
        "aws:efs/mountTarget:MountTarget"
    ):
        assert cluster.urn not in waits_for(result, r), r.name


@pytest.mark.parametrize("stack", ["aws-h200-efa", "aws-byo-vpc"])
def test_gpu_node_groups_do_not_wait_for_each_other(stack):
    result = plan(stack)
    groups = [r for r in result.of_type(NODE_GROUP) if r.inputs["amiType"] == "AL2023_x86_64_NVIDIA"]
    assert len(groups) == 2
    cluster = one(result, "aws:eks/cluster:Cluster")
    for g in groups:
        deps = waits_for(result, g)
        assert cluster.urn in deps  # a node group needs its control plane
        others = {o.urn for o in result.of_type(NODE_GROUP) if o.urn != g.urn}
        assert not deps & others, f"{g.name} waits for another node group"


def test_node_groups_wait_for_the_cni_and_node_role_policies():
    result = plan("aws-dev")
    for g in result.of_type(NODE_GROUP):
        deps = [result.by_urn()[u] for u in waits_for(result, g)]
        assert "vpc-cni" in {d.inputs.get("addonName") for d in deps if d.type == "aws:eks/addon:Addon"}
        attached = {
            d.inputs["policyArn"]
            for d in deps
            if d.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
        }
        assert "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy" in attached


def test_in_cluster_releases_wait_for_the_system_nodes():
    result = plan("aws-h200-efa")
    system = one(result, NODE_GROUP, "h200-train-system-ng")
    releases = result.of_type("kubernetes:helm.sh/v3:Release")
    # The AWS layer's own releases and the in-cluster layer's: every one runs pods on the system nodes.
    assert {"cluster-autoscaler", "aws-efa-k8s-device-plugin", "gpu-operator"} <= {
        r.inputs["chart"] for r in releases
    }
    for r in releases:
        assert system.urn in waits_for(result, r)


def test_trainplane_plan_shows_tree_cost_and_critical_path(capsys):
    from infra.cli import main

    assert main(["plan", str(ROOT / "stacks" / "Pulumi.aws-h200-efa.yaml"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cloud"] == "aws"
    assert summary["gpus"] == {"min": 0, "max": 80}
    steps = [s["type"] for s in summary["criticalPath"]["steps"]]
    assert "aws:eks/cluster:Cluster" in steps and "aws:eks/nodeGroup:NodeGroup" in steps
    # FSx (10 min) runs beside the control plane, so it is not on the path.
    assert "aws:fsx/lustreFileSystem:LustreFileSystem" not in steps
    names = json.dumps(summary["tree"])
    assert "trainplane:aws:NodePool" in names and "trainplane:aws:LustreStorage" in names
