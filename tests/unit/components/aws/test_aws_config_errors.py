"""Bad AWS stack input fails before anything is registered, with one line naming the key path."""

from __future__ import annotations

import pulumi
import pytest

from components.spec import ConfigError, PlatformSpec
from tests.helpers.plans import platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _problems(obj) -> list[str]:
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    return e.value.problems


def test_efa_on_an_instance_type_without_efa():
    obj = platform_object("aws-h200-efa")
    obj["nodePools"][1] = {"name": "l40s", "gpu": "L40S", "instanceType": "g6e.xlarge", "efa": True}
    assert _problems(obj) == [
        "platform.nodePools[1].efa: g6e.xlarge has no EFA interfaces; EFA needs e.g. p4d, p5, p5e, p5en"
    ]


def test_efa_on_a_cpu_pool():
    obj = platform_object("aws-dev")
    obj["nodePools"][0]["efa"] = True
    assert _problems(obj) == ["platform.nodePools[0].efa: EFA is for GPU pools"]


def test_vpc_id_without_subnets():
    obj = platform_object("aws-byo-vpc")
    del obj["network"]["subnetIds"]
    assert _problems(obj) == [
        "platform.network.subnetIds: required with vpcId (the private subnets nodes run in)"
    ]


def test_subnets_without_vpc_id_and_malformed_subnet_ids():
    obj = platform_object("aws-byo-vpc")
    del obj["network"]["vpcId"]
    obj["network"]["subnetIds"][1] = "sn-123"
    assert _problems(obj) == [
        "platform.network.vpcId: required with subnetIds",
        "platform.network.subnetIds[1]: 'sn-123' is not a subnet id (subnet-...)",
    ]


def test_pool_zones_must_be_zones_of_the_region():
    obj = platform_object("aws-h200-efa")
    obj["nodePools"][1]["zones"] = ["us-west-2a"]
    assert _problems(obj) == [
        "platform.nodePools[1].zones[0]: 'us-west-2a' is not an availability zone of region us-east-1"
    ]


def test_pool_zones_with_a_brought_vpc():
    obj = platform_object("aws-byo-vpc")
    obj["nodePools"][1]["zones"] = ["us-east-1a"]
    assert _problems(obj) == [
        "platform.nodePools[1].zones: with network.vpcId pools run in network.subnetIds; "
        "EFA and compact pools take the first of them"
    ]


def test_efs_takes_no_capacity():
    obj = platform_object("aws-byo-vpc")
    obj["storage"][0]["capacityGiB"] = 1024
    assert _problems(obj) == [
        "platform.storage[0].capacityGiB: EFS grows with its data and takes no capacity"
    ]


def test_the_program_reports_config_errors_without_registering_anything(plan_platform):
    obj = platform_object("aws-h200-efa")
    obj["storage"][0]["capacityGiB"] = 3000
    with pytest.raises(pulumi.RunError) as e:
        plan_platform(obj)
    assert (
        "platform.storage[0].capacityGiB: FSx for Lustre PERSISTENT_2 takes 1200 or a multiple of 2400 GiB"
        in str(e.value)
    )


def test_a_private_endpoint_needs_the_networks_that_reach_it():
    obj = platform_object("aws-byo-vpc")
    del obj["cluster"]["privateAccessCidrs"]
    assert _problems(obj) == [
        "platform.cluster.privateAccessCidrs: required with endpointAccess private: pulumi up and kubectl "
        "reach the API only from the CIDRs listed here (VPN, CI runners, a peered VPC)"
    ]


def test_private_access_cidrs_with_a_public_only_endpoint():
    obj = platform_object("aws-byo-vpc")
    obj["cluster"]["endpointAccess"] = "public"
    assert _problems(obj) == [
        "platform.cluster.privateAccessCidrs: only with endpointAccess private or both (they open the "
        "private endpoint); use authorizedNetworks for the public one"
    ]


@pytest.mark.parametrize(
    ("cidrs", "problem"),
    [
        (
            ["10.100.0.1/16"],
            "platform.cluster.privateAccessCidrs[0]: Input is not a valid IPv4 network (got '10.100.0.1/16')",
        ),
        (
            ["10.1.0.0/16", "vpn"],
            "platform.cluster.privateAccessCidrs[1]: Input is not a valid IPv4 network (got 'vpn')",
        ),
        (
            ["10.1.0.0/16", "10.1.0.0/16"],
            "platform.cluster.privateAccessCidrs: 10.1.0.0/16 is listed more than once",
        ),
    ],
)
def test_malformed_private_access_cidrs(cidrs, problem):
    obj = platform_object("aws-byo-vpc")
    obj["cluster"]["privateAccessCidrs"] = cidrs
    assert _problems(obj) == [problem]


def test_private_access_cidrs_is_an_aws_key():
    obj = platform_object("gcp-dev")
    obj["cluster"]["privateAccessCidrs"] = ["10.0.0.0/8"]
    assert _problems(obj) == [
        "platform.cluster.privateAccessCidrs: only for cloud aws, this stack is cloud gcp"
    ]


def test_the_cli_reports_a_private_endpoint_problem_in_one_line(tmp_path, capsys):
    import yaml

    from infra.cli import main
    from tests.helpers.plans import ROOT

    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-byo-vpc.yaml").read_text())
    del doc["config"]["trainplane:platform"]["cluster"]["privateAccessCidrs"]
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "platform.cluster.privateAccessCidrs: required with endpointAccess private" in err
    assert "Traceback" not in err
