"""Node groups and launch templates as EKS and EC2 would receive them."""

from __future__ import annotations

import pytest

from components.catalog import catalog
from tests.helpers.aws import NODE_GROUP, one, plan

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

LT = "aws:ec2/launchTemplate:LaunchTemplate"
TAG = "aws:autoscaling/tag:Tag"
CLUSTER_SG = "sg-0c1a2b3c4d5e6f700"  # what the mocked EKS reports as its cluster security group


def test_gpu_pools_use_the_nvidia_ami_taint_and_pool_labels():
    result = plan("aws-dev")
    gpu = one(result, NODE_GROUP, "ml-dev-h100-ng").inputs
    assert gpu["amiType"] == "AL2023_x86_64_NVIDIA"
    assert gpu["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert gpu["labels"] == {
        "trainplane.dev/pool": "h100",
        "trainplane.dev/gpu": "H100",
        "trainplane.dev/capacity": "spot",
        "k8s.amazonaws.com/accelerator": "nvidia-h100",
    }
    assert gpu["capacityType"] == "SPOT"
    assert gpu["nodeRepairConfig"] == {"enabled": True}
    cpu = one(result, NODE_GROUP, "ml-dev-system-ng").inputs
    assert cpu["amiType"] == "AL2023_x86_64_STANDARD"
    assert cpu["capacityType"] == "ON_DEMAND"
    assert cpu["instanceTypes"] == ["m6i.xlarge"]
    assert not cpu.get("taints")


def test_bundle_labels_select_the_pool_and_taints_match_the_node_group():
    result = plan("aws-dev")
    for pool in result.outputs["nodePools"]:
        ng = one(result, NODE_GROUP, f"ml-dev-{pool['name']}-ng").inputs
        # Every label the bundle hands over is on the pool's nodes, and the pool label is unique to it.
        assert pool["labels"].items() <= ng["labels"].items()
        assert pool["labels"]["trainplane.dev/pool"] == pool["name"]
        assert [(t["key"], t["value"]) for t in pool["taints"]] == [
            (t["key"], t["value"]) for t in ng.get("taints") or []
        ]
        assert pool["machineTypes"] == ng["instanceTypes"]


def test_spot_pools_list_every_type_of_the_shape_on_demand_the_cheapest(plan_platform):
    from tests.helpers.plans import platform_object

    obj = platform_object("aws-h200-efa")
    for pool in obj["nodePools"][1:]:
        pool.pop("efa")
        pool.pop("placement")
        pool.pop("zones")
    result = plan_platform(obj)
    spot = one(result, NODE_GROUP, "h200-train-h200-spot-ng").inputs
    on_demand = one(result, NODE_GROUP, "h200-train-h200-od-ng").inputs
    shapes = [m.name for m in catalog().shapes("aws", "H200", 8)]
    assert sorted(spot["instanceTypes"]) == sorted(shapes) == ["p5e.48xlarge", "p5en.48xlarge"]
    assert on_demand["instanceTypes"] == [shapes[0]] == ["p5en.48xlarge"]  # cheapest first
    assert on_demand["capacityType"] == "ON_DEMAND"


def test_desired_size_belongs_to_the_autoscaler():
    for stack in ("aws-dev", "aws-h200-efa"):
        result = plan(stack)
        for ng in result.of_type(NODE_GROUP):
            assert ng.ignore_changes == ("scalingConfig.desiredSize",), ng.name
    ng = one(plan("aws-h200-efa"), NODE_GROUP, "h200-train-h200-spot-ng").inputs
    assert ng["scalingConfig"] == {"minSize": 0, "maxSize": 8, "desiredSize": 0}


@pytest.mark.parametrize("stack", ["aws-dev", "aws-h200-efa", "aws-byo-vpc"])
def test_launch_templates_require_imdsv2_and_encrypt_gp3_roots(stack):
    result = plan(stack)
    templates = result.of_type(LT)
    assert len(templates) == len(result.of_type(NODE_GROUP))
    for lt in templates:
        assert lt.inputs["metadataOptions"] == {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": 1,
        }, lt.name
        (root,) = lt.inputs["blockDeviceMappings"]
        assert root["deviceName"] == "/dev/xvda"
        assert root["ebs"]["volumeType"] == "gp3"
        assert root["ebs"]["encrypted"] == "true"


def test_root_volume_sizes():
    dev = plan("aws-dev")
    assert one(dev, LT, "ml-dev-h100-lt").inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 200
    assert one(dev, LT, "ml-dev-system-lt").inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 50
    h200 = plan("aws-h200-efa")
    assert (
        one(h200, LT, "h200-train-h200-spot-lt").inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 500
    )


def test_node_groups_use_their_launch_template_and_carry_cluster_and_node_security_groups():
    result = plan("aws-dev")
    node_sg = one(result, "aws:ec2/securityGroup:SecurityGroup", "ml-dev-net-nodes")
    for name in ("ml-dev-h100", "ml-dev-system"):
        lt = one(result, LT, f"{name}-lt")
        ng = one(result, NODE_GROUP, f"{name}-ng").inputs
        assert ng["launchTemplate"] == {"id": f"{lt.name}-id", "version": "1"}
        assert "diskSize" not in ng  # set in the template; EKS refuses both
        assert lt.inputs["vpcSecurityGroupIds"] == [CLUSTER_SG, f"{node_sg.name}-id"]
        assert "networkInterfaces" not in lt.inputs and "placement" not in lt.inputs
        assert len(ng["subnetIds"]) == 3  # spread over the zones


def test_efa_pools_get_interfaces_placement_group_single_subnet_and_open_self_sg():
    result = plan("aws-h200-efa")
    lt = one(result, LT, "h200-train-h200-spot-lt").inputs
    ng = one(result, NODE_GROUP, "h200-train-h200-spot-ng").inputs
    efa_sg = one(result, "aws:ec2/securityGroup:SecurityGroup", "h200-train-h200-spot-efa")
    # The pool runs only p5en (16 EFA interfaces): one interface per network card of that layout.
    assert ng["instanceTypes"] == ["p5en.48xlarge"]
    interfaces = lt["networkInterfaces"]
    assert len(interfaces) == 16
    assert [i["networkCardIndex"] for i in interfaces] == list(range(16))
    assert (interfaces[0]["interfaceType"], interfaces[0]["deviceIndex"]) == ("efa", 0)
    assert {(i["interfaceType"], i["deviceIndex"]) for i in interfaces[1:]} == {("efa-only", 1)}
    for i in interfaces:
        assert i["securityGroups"] == [CLUSTER_SG, "h200-train-net-nodes-id", f"{efa_sg.name}-id"]
    assert "vpcSecurityGroupIds" not in lt  # EC2 refuses groups on both the template and its interfaces
    pg = one(result, "aws:ec2/placementGroup:PlacementGroup", "h200-train-h200-spot-placement")
    assert pg.inputs["strategy"] == "cluster"
    assert lt["placement"] == {"groupName": "h200-train-h200-spot-placement-pg"}
    assert ng["subnetIds"] == ["h200-train-net-private-us-east-1a-id"]
    rules = [
        r
        for r in result.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        + result.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
        if r.inputs["securityGroupId"] == f"{efa_sg.name}-id"
    ]
    assert sorted(r.type.rsplit(":", 1)[-1] for r in rules) == [
        "SecurityGroupEgressRule",
        "SecurityGroupIngressRule",
    ]
    for r in rules:
        assert r.inputs["ipProtocol"] == "-1"
        assert r.inputs["referencedSecurityGroupId"] == f"{efa_sg.name}-id"
        assert "cidrIpv4" not in r.inputs


def test_the_efa_device_plugin_runs_only_with_efa_pools_and_tolerates_gpu_nodes():
    dev_charts = {r.inputs["chart"] for r in plan("aws-dev").of_type("kubernetes:helm.sh/v3:Release")}
    assert "cluster-autoscaler" in dev_charts and "aws-efa-k8s-device-plugin" not in dev_charts
    result = plan("aws-h200-efa")
    (release,) = [
        r
        for r in result.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == "aws-efa-k8s-device-plugin"
    ]
    assert release.inputs["repositoryOpts"]["repo"] == "https://aws.github.io/eks-charts"
    assert release.inputs["namespace"] == "kube-system"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in release.inputs[
        "values"
    ]["tolerations"]


def _asg_tags(result, node_group_name: str) -> dict[str, str]:
    ng = one(result, NODE_GROUP, f"{node_group_name}-ng")
    tags = [t for t in result.of_type(TAG) if t.parent == ng.parent]
    asg = {t.inputs["autoscalingGroupName"] for t in tags}
    # The tags target the ASG EKS made for this node group (eks-<node group name>-<uuid>).
    assert len(asg) == 1 and asg.pop().startswith(f"eks-{ng.inputs['nodeGroupName']}-")
    for t in tags:
        assert ng.urn in t.deps
        assert t.inputs["tag"]["propagateAtLaunch"] is False
    return {t.inputs["tag"]["key"]: t.inputs["tag"]["value"] for t in tags}


def test_asg_tags_let_the_autoscaler_scale_gpu_pools_from_zero():
    result = plan("aws-h200-efa")
    prefix = "k8s.io/cluster-autoscaler"
    assert _asg_tags(result, "h200-train-h200-spot") == {
        f"{prefix}/enabled": "true",
        f"{prefix}/h200-train": "owned",
        f"{prefix}/node-template/label/trainplane.dev/pool": "h200-spot",
        f"{prefix}/node-template/label/trainplane.dev/gpu": "H200",
        f"{prefix}/node-template/label/trainplane.dev/capacity": "spot",
        f"{prefix}/node-template/label/k8s.amazonaws.com/accelerator": "nvidia-h200",
        f"{prefix}/node-template/label/eks.amazonaws.com/capacityType": "SPOT",
        f"{prefix}/node-template/taint/nvidia.com/gpu": "present:NoSchedule",
        f"{prefix}/node-template/resources/vpc.amazonaws.com/efa": "16",
    }
    system = _asg_tags(result, "h200-train-system")
    assert system[f"{prefix}/enabled"] == "true"
    assert not [k for k in system if "/taint/" in k or "/resources/" in k]


def test_user_labels_and_taints_reach_nodes_and_asg_templates(plan_platform):
    from tests.helpers.plans import platform_object

    obj = platform_object("aws-dev")
    obj["nodePools"][1]["labels"] = {"team": "research"}
    obj["nodePools"][1]["taints"] = [{"key": "dedicated", "value": "research", "effect": "NoExecute"}]
    result = plan_platform(obj)
    ng = one(result, NODE_GROUP, "ml-dev-h100-ng").inputs
    assert ng["labels"]["team"] == "research"
    assert {"key": "dedicated", "value": "research", "effect": "NO_EXECUTE"} in ng["taints"]
    tags = _asg_tags(result, "ml-dev-h100")
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/dedicated"] == "research:NoExecute"
    assert tags["k8s.io/cluster-autoscaler/node-template/label/team"] == "research"


def test_gpu_pools_carry_the_autoscaler_gpu_label_on_nodes_and_asg_templates():
    # cluster-autoscaler's AWS provider knows a node is a GPU node (still starting its device plugin)
    # by this label, on the node and on the scale-from-zero template (cloudprovider/aws GPULabel).
    for stack, expected in (
        ("aws-dev", {"ml-dev-h100": "nvidia-h100"}),
        ("aws-byo-vpc", {"ml-shared-l40s": "nvidia-l40s", "ml-shared-a10g": "nvidia-a10g"}),
    ):
        result = plan(stack)
        for ng in result.of_type(NODE_GROUP):
            group = ng.name.removesuffix("-ng")
            label = ng.inputs["labels"].get("k8s.amazonaws.com/accelerator")
            template = _asg_tags(result, group).get(
                "k8s.io/cluster-autoscaler/node-template/label/k8s.amazonaws.com/accelerator"
            )
            assert label == template == expected.get(group), group


def test_every_aws_gpu_of_the_catalog_has_an_accelerator_label_value():
    from components.aws.node_image import ACCELERATOR_VALUES

    aws_gpus = {g for g in catalog().gpu_names() if catalog().gpu(g).shapes_on("aws")}
    assert aws_gpus <= set(ACCELERATOR_VALUES)
    # Upstream's spelling where it has one (aws_cloud_provider.go availableGPUTypes).
    assert ACCELERATOR_VALUES["A10G"] == "nvidia-a10g" and ACCELERATOR_VALUES["L40S"] == "nvidia-l40s"


def test_grace_gpu_nodes_get_the_arm64_nvidia_ami():
    from components.aws.node_image import ami_type

    gb200 = catalog().machine("aws", "p6e-gb200.36xlarge")
    b300 = catalog().machine("aws", "p6-b300.48xlarge")
    assert (gb200.arch, b300.arch) == ("arm64", "x86_64")
    assert ami_type(True, [gb200]) == "AL2023_ARM_64_NVIDIA"
    assert ami_type(True, [b300]) == "AL2023_x86_64_NVIDIA"
    assert ami_type(False, []) == "AL2023_x86_64_STANDARD"
    assert catalog().machine("gcp", "a4x-maxgpu-4g-metal").arch == "arm64"
