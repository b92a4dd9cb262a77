"""FSx for Lustre and EFS as FSx/EFS would receive them, and the storage handles the bundle carries."""

from __future__ import annotations

import pytest

from components.spec import ConfigError, PlatformSpec
from tests.helpers.aws import one, plan
from tests.helpers.plans import platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def _ingress(result, sg_name: str) -> set[tuple[str, int, int, str]]:
    return {
        (
            r.inputs["ipProtocol"],
            r.inputs["fromPort"],
            r.inputs["toPort"],
            r.inputs["referencedSecurityGroupId"],
        )
        for r in result.of_type(INGRESS)
        if r.inputs["securityGroupId"] == f"{sg_name}-id"
    }


def test_fsx_is_persistent_2_compressed_and_encrypted_with_the_data_key():
    result = plan("aws-dev")
    fs = one(result, FSX).inputs
    key = one(result, "aws:kms/key:Key", "ml-dev-data")
    assert fs["deploymentType"] == "PERSISTENT_2"
    assert fs["storageCapacity"] == 2400 and fs["perUnitStorageThroughput"] == 250
    assert fs["dataCompressionType"] == "LZ4"
    assert fs["kmsKeyId"] == f"arn:aws:kms:us-east-1:123456789012:key/{key.name}-0000"
    # pulumi-aws v7: one subnet id as a string.
    assert fs["subnetIds"] == "ml-dev-net-private-us-east-1a-id"
    assert fs["securityGroupIds"] == ["ml-dev-datasets-sg-id"]


def test_fsx_security_group_admits_lustre_ports_from_nodes_and_itself():
    result = plan("aws-dev")
    assert _ingress(result, "ml-dev-datasets-sg") == {
        ("tcp", 988, 988, "ml-dev-net-nodes-id"),
        ("tcp", 1018, 1023, "ml-dev-net-nodes-id"),
        ("tcp", 988, 988, "ml-dev-datasets-sg-id"),
        ("tcp", 1018, 1023, "ml-dev-datasets-sg-id"),
    }
    # The node security group is on every node's launch template, so these rules reach all nodes.
    for lt in result.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        assert "ml-dev-net-nodes-id" in lt.inputs["vpcSecurityGroupIds"]


def test_import_path_links_s3_through_a_data_repository_association():
    dra = one(plan("aws-dev"), DRA).inputs
    assert dra["dataRepositoryPath"] == "s3://example-datasets/train"
    assert dra["fileSystemPath"] == "/" and dra["fileSystemId"] == "ml-dev-datasets-fs-id"
    assert dra["s3"] == {"autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}
    assert dra["batchImportMetaDataOnCreate"] is True
    both = one(plan("aws-h200-efa"), DRA).inputs  # same path for import and export: one association
    assert set(both["s3"]) == {"autoImportPolicy", "autoExportPolicy"}


def test_different_import_and_export_paths_get_one_association_each(plan_platform):
    obj = platform_object("aws-dev")
    obj["storage"][0]["exportPath"] = "s3://example-results/out"
    result = plan_platform(obj)
    dras = {r.inputs["fileSystemPath"]: r.inputs for r in result.of_type(DRA)}
    assert set(dras) == {"/import", "/export"}
    assert dras["/export"]["dataRepositoryPath"] == "s3://example-results/out"
    assert dras["/export"]["s3"] == {"autoExportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}


def test_fsx_handle_for_the_csi_driver():
    result = plan("aws-dev")
    (handle,) = result.outputs["storage"]
    assert handle["csiDriver"] == "fsx.csi.aws.com"
    assert handle["volumeHandle"] == "ml-dev-datasets-fs-id"
    assert set(handle["volumeAttributes"]) == {"dnsname", "mountname"}
    assert handle["volumeAttributes"]["dnsname"].endswith(".fsx.us-east-1.amazonaws.com")
    assert handle["capacityGiB"] == 2400


def test_efs_is_encrypted_elastic_with_a_mount_target_per_subnet():
    result = plan("aws-byo-vpc")
    fs = one(result, "aws:efs/fileSystem:FileSystem").inputs
    assert fs["encrypted"] is True and fs["throughputMode"] == "elastic"
    assert fs["kmsKeyId"] == "arn:aws:kms:us-east-1:123456789012:key/ml-shared-data-0000"
    targets = result.of_type("aws:efs/mountTarget:MountTarget")
    assert sorted(t.inputs["subnetId"] for t in targets) == sorted(
        ["subnet-0aa11bb22cc33dd44", "subnet-0ee55ff66aa77bb88", "subnet-0cc99dd00ee11ff22"]
    )
    for t in targets:
        assert t.inputs["securityGroups"] == ["ml-shared-shared-sg-id"]
    assert _ingress(result, "ml-shared-shared-sg") == {("tcp", 2049, 2049, "ml-shared-net-nodes-id")}
    (handle,) = result.outputs["storage"]
    assert handle["csiDriver"] == "efs.csi.aws.com" and handle["volumeHandle"] == "ml-shared-shared-fs-id"
    assert handle["kind"] == "nfs"


def test_efs_on_a_made_vpc_has_one_mount_target_per_zone(plan_platform):
    obj = platform_object("aws-dev")
    obj["storage"] = [{"name": "home", "kind": "nfs"}]
    result = plan_platform(obj)
    subnets = {t.inputs["subnetId"] for t in result.of_type("aws:efs/mountTarget:MountTarget")}
    assert subnets == {f"ml-dev-net-private-us-east-1{z}-id" for z in "abc"}


@pytest.mark.parametrize("capacity", [1000, 1800, 3600])
def test_lustre_capacity_fsx_refuses_is_a_config_error(capacity):
    obj = platform_object("aws-dev")
    obj["storage"][0]["capacityGiB"] = capacity
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert e.value.problems == [
        f"platform.storage[0].capacityGiB: FSx for Lustre PERSISTENT_2 takes 1200 or a multiple of 2400 GiB, "
        f"not {capacity}"
    ]


@pytest.mark.parametrize("stack", ["aws-dev", "aws-h100-reserved", "aws-h200-efa"])
def test_fsx_waits_for_its_security_groups_lnet_rules(stack):
    """Issue 18 defect 5: FSx checks its groups for LNET (TCP 988) at create and answers 400
    InvalidNetworkSettings without them (aws/aws-parallelcluster#6181): the file system waits for
    every rule of its own group, 988 and 1018-1023 included."""
    from tests.helpers.aws import waits_for

    result = plan(stack)
    fs = one(result, FSX)
    (sg_id,) = fs.inputs["securityGroupIds"]
    rules = [
        r
        for r in result.resources
        if r.type.startswith("aws:vpc/securityGroup") and r.inputs.get("securityGroupId") == sg_id
    ]
    ports = {(r.inputs.get("fromPort"), r.inputs.get("toPort")) for r in rules}
    assert {(988, 988), (1018, 1023)} <= ports
    assert {r.urn for r in rules} <= waits_for(result, fs)


def test_fsx_goes_to_the_zone_that_holds_every_gpu_pool(plan_platform):
    """Issue 18 defect 5: with every GPU pool in us-east-1b, the file system is there too (not in the
    network's first zone), so training reads and checkpoints stay in the zone."""
    obj = platform_object("aws-h100-reserved")
    obj["nodePools"] = [p for p in obj["nodePools"] if p["name"] != "h100-odcr"]  # the one in us-east-1a
    result = plan_platform(obj)
    assert one(result, FSX).inputs["subnetIds"] == "h100-reserved-net-private-us-east-1b-id"
    # GPU pools in two zones: no single zone, the first subnet as before.
    assert (
        one(plan("aws-h100-reserved"), FSX).inputs["subnetIds"] == "h100-reserved-net-private-us-east-1a-id"
    )
    # EFS keeps a mount target in every zone whatever the pools do.
    obj["storage"].append({"name": "home", "kind": "nfs"})
    result = plan_platform(obj)
    assert len(result.of_type("aws:efs/mountTarget:MountTarget")) == 3
