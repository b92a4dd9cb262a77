"""Regions, zones and machine types are checked per cloud, with a did-you-mean (issue 22): they used to
plan and verify clean, or price every total as n/a without a word."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from components import regions
from components.spec import ConfigError, PlatformSpec
from tests.helpers.cli import cli
from tests.helpers.plans import ROOT, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def problems(obj) -> list[str]:
    with pytest.raises(ConfigError) as err:
        PlatformSpec.load(obj)
    return err.value.problems


# ---- the data and its sources -----------------------------------------------------------------------


def test_aws_instance_types_are_the_provider_sdks():
    from pulumi_aws.ec2._enums import InstanceType

    from components.aws.regions import aws_instance_types

    assert aws_instance_types() == {m.value for m in InstanceType}


def test_aws_regions_are_botocores():
    botocore = pytest.importorskip("botocore")
    data = json.loads(resources.files(botocore).joinpath("data/endpoints.json").read_text())
    (aws,) = [p for p in data["partitions"] if p["partition"] == "aws"]
    assert regions.regions("aws") == sorted(aws["regions"])


def test_every_reference_stack_is_in_a_known_region():
    for stack in ("aws-dev", "aws-h100-reserved", "gcp-dev", "gcp-h100-mega", "gcp-byo-network"):
        PlatformSpec.load(platform_object(stack))


# ---- regions and zones ------------------------------------------------------------------------------


def _gcp(**changes):
    obj = platform_object("gcp-dev")
    obj.update(changes)
    return obj


@pytest.mark.parametrize(
    ("region", "line"),
    [
        ("us-east-1", "'us-east-1' is not a GCP region (it is an AWS region); did you mean 'us-east1'?"),
        ("europe-wset4", "'europe-wset4' is not a GCP region; did you mean 'europe-west4'?"),
        ("us-est-1", "'us-est-1' is not a GCP region; did you mean 'us-east1' or 'us-west1'?"),
    ],
)
def test_a_gcp_region_that_does_not_exist(region, line):
    obj = _gcp(region=region)
    obj.pop("zones", None)
    for pool in obj["nodePools"]:
        pool.pop("zones", None)
    assert f"platform.region: {line}" in problems(obj)


def test_a_gcp_zone_the_region_does_not_have():
    obj = _gcp(region="europe-west4", zones=["europe-west4-a", "europe-west4-z"])
    for pool in obj["nodePools"]:
        pool.pop("zones", None)
    assert problems(obj) == [
        "platform.zones[1]: 'europe-west4-z' is not a zone of region europe-west4; its zones: "
        "europe-west4-a, europe-west4-b, europe-west4-c"
    ]


def test_an_aws_region_that_does_not_exist():
    obj = platform_object("aws-dev")
    obj["region"] = "us-est-1"
    assert problems(obj) == [
        "platform.region: 'us-est-1' is not an AWS region; did you mean 'us-east-1' or 'us-west-1'?"
    ]


# ---- machine types ----------------------------------------------------------------------------------


def test_a_mistyped_instance_type_is_an_error_with_a_suggestion():
    obj = platform_object("aws-dev")
    assert obj["nodePools"][0]["instanceType"] == "m6i.xlarge"
    obj["nodePools"][0]["instanceType"] = "m6i.xlarg"
    assert problems(obj) == [
        "platform.nodePools[0].instanceType: 'm6i.xlarg' is not an EC2 instance type; did you mean 'm6i.xlarge'?"
    ]


def test_a_mistyped_machine_type_is_an_error_with_a_suggestion():
    obj = _gcp()
    assert obj["nodePools"][0]["machineType"] == "e2-standard-4"
    obj["nodePools"][0]["machineType"] = "e2-standrd-4"
    assert problems(obj) == [
        "platform.nodePools[0].machineType: 'e2-standrd-4' is not a Compute Engine machine type; "
        "did you mean 'e2-standard-4'?"
    ]


@pytest.mark.parametrize(
    ("stack", "key", "name"),
    [("aws-dev", "instanceType", "m7i.4xlarge"), ("gcp-dev", "machineType", "n2-standard-16")],
)
def test_a_real_type_the_catalog_does_not_price_is_accepted(stack, key, name):
    obj = platform_object(stack)
    obj["nodePools"][0][key] = name
    PlatformSpec.load(obj)


def test_the_providers_region_must_be_the_platforms(tmp_path):
    text = (ROOT / "stacks" / "Pulumi.aws-dev.yaml").read_text()
    assert "  aws:region: us-east-1" in text
    bad = tmp_path / "Pulumi.two-regions.yaml"
    bad.write_text(text.replace("  aws:region: us-east-1", "  aws:region: us-west-2"))
    proc = cli("plan", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"{bad}: 1 problem(s)",
        "aws:region: 'us-west-2' differs from platform.region 'us-east-1'; set both to the same region "
        "(or drop aws:region)",
    ]
