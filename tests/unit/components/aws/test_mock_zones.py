"""The offline plan answers AWS per region (issue 18 defect 14): zones, ARNs and DNS names of the
stack's `aws:region`, from moto's per-region zone data rather than one region's hand list."""

from __future__ import annotations

import json

import pytest

from components.aws import mock as aws_mock
from tests.helpers.plans import plan_object, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

SUBNET = "aws:ec2/subnet:Subnet"


def _to_us_east_2(obj: dict) -> dict:
    text = json.dumps(obj).replace("us-east-1", "us-east-2")
    return json.loads(text)


def test_an_us_east_2_platform_with_pool_zones_plans_in_us_east_2():
    """Before: "us-east-2b not available in the region (available: us-east-1a ...)"."""
    obj = _to_us_east_2(platform_object("aws-h100-reserved"))
    assert obj["region"] == "us-east-2"
    result = plan_object(obj)
    zones = sorted({s.inputs["availabilityZone"] for s in result.of_type(SUBNET)})
    assert zones == ["us-east-2a", "us-east-2b", "us-east-2c"]
    block = next(r for r in result.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("h100-block-ng"))
    assert block.inputs["subnetIds"] == ["h100-reserved-net-private-us-east-2b-id"]
    # What AWS answers there: the file system's DNS name the PersistentVolume mounts, the OIDC issuer.
    pv = next(r for r in result.of_type("kubernetes:core/v1:PersistentVolume"))
    assert ".fsx.us-east-2.amazonaws.com" in pv.inputs["spec"]["csi"]["volumeAttributes"]["dnsname"]
    oidc = next(iter(result.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")))
    assert oidc.inputs["url"].startswith("https://oidc.eks.us-east-2.amazonaws.com/")
    assert result.outputs["region"] == "us-east-2"


def test_a_zone_of_another_region_is_refused_with_the_regions_zones(tmp_path, capsys):
    from infra.cli import main
    from tests.helpers.plans import ROOT

    text = (ROOT / "stacks" / "Pulumi.aws-h100-reserved.yaml").read_text().replace("us-east-1", "us-east-2")
    stack = tmp_path / "Pulumi.ohio.yaml"
    stack.write_text(text.replace("zones: [us-east-2b]", "zones: [us-east-2d]"))
    assert main(["plan", str(stack)]) == 2
    err = capsys.readouterr().err
    assert "us-east-2d not available in the region (available: us-east-2a, us-east-2b, us-east-2c)" in err


def test_partition_follows_the_region():
    assert aws_mock.partition("cn-north-1") == ("aws-cn", "amazonaws.com.cn")
    assert aws_mock.partition("us-gov-west-1")[0] == "aws-us-gov"
    assert aws_mock.zones("eu-west-1")[0] == ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
