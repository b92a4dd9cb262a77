"""Bad GCP stack input fails before anything is registered, one line per problem naming the key path."""

from __future__ import annotations

import re

import pulumi
import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.gcp.naming import service_account_id, short_id
from components.spec import ConfigError, PlatformSpec
from tests.helpers.gcp import mutated, plan_platform

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def problems(obj) -> list[str]:
    with pytest.raises(ConfigError) as err:
        PlatformSpec.load(obj)
    return err.value.problems


@pytest.mark.parametrize("stack", ["gcp-dev", "gcp-h100-mega", "gcp-byo-network"])
def test_reference_stacks_are_valid(stack):
    PlatformSpec.load(mutated(stack))


def test_compact_placement_across_zones():
    obj = mutated("gcp-h100-mega")
    obj["nodePools"][1]["zones"] = ["us-central1-a", "us-central1-c"]
    assert problems(obj) == [
        "platform.nodePools[1].placement: compact placement needs exactly one zone; "
        "set nodePools[1].zones to a single zone"
    ]


def test_compact_placement_inheriting_three_platform_zones():
    obj = mutated("gcp-h100-mega")
    del obj["nodePools"][1]["zones"]
    assert [p.split(":")[0] for p in problems(obj)] == ["platform.nodePools[1].placement"]


def test_filestore_capacity_below_the_tier_minimum():
    obj = mutated("gcp-dev")
    obj["storage"][0]["capacityGiB"] = 2048
    assert problems(obj) == [
        "platform.storage[0].capacityGiB: Filestore BASIC_SSD takes 2560 to 65433 GiB, not 2048"
    ]


def test_filestore_default_tier_is_checked_too():
    obj = mutated("gcp-dev")
    del obj["storage"][0]["tier"]
    obj["storage"][0]["capacityGiB"] = 1024
    assert problems(obj) == [
        "platform.storage[0].capacityGiB: Filestore BASIC_SSD takes 2560 to 65433 GiB, not 1024"
    ]


@pytest.mark.parametrize(
    ("tier", "cap", "message"),
    [
        ("ENTERPRISE", 1100, "Filestore ENTERPRISE grows in steps of 256 GiB; 1100 is not a multiple of 256"),
        ("ZONAL", 12000, "Filestore ZONAL takes multiples of 2560 GiB from 10240 GiB; 12000 is not one"),
        ("BASIC_HDD", 512, "Filestore BASIC_HDD takes 1024 to 65433 GiB, not 512"),
    ],
)
def test_filestore_steps_and_bounds(tier, cap, message):
    obj = mutated("gcp-dev")
    obj["storage"][0].update(tier=tier, capacityGiB=cap)
    assert problems(obj) == [f"platform.storage[0].capacityGiB: {message}"]


def test_accelerator_count_the_machine_type_does_not_have():
    obj = mutated("gcp-dev")
    obj["nodePools"][1]["machineType"] = "a3-highgpu-8g"
    obj["nodePools"][1]["gpusPerNode"] = 4
    assert problems(obj) == ["platform.nodePools[1].gpusPerNode: a3-highgpu-8g has 8 GPUs, not 4"]


def test_gpu_count_no_gcp_machine_has():
    obj = mutated("gcp-byo-network")
    obj["nodePools"][1]["gpusPerNode"] = 3
    assert problems(obj) == [
        "platform.nodePools[1].gpusPerNode: L4 does not come in 3 per node on gcp; allowed: 1, 2, 4, 8"
    ]


def test_machine_type_of_another_gpu():
    obj = mutated("gcp-h100-mega")
    obj["nodePools"][1]["machineType"] = "a3-highgpu-8g"
    obj["cluster"]["kubernetesVersion"] = "1.34"  # a3-highgpu-8g's newest (its own rule, not this test's)
    obj["cluster"]["releaseChannel"] = "EXTENDED"  # the channel that holds it there (its own rule too)
    (line,) = problems(obj)
    assert line.startswith("platform.nodePools[1].machineType: 'a3-highgpu-8g' does not carry H100-MEGA")


@pytest.mark.parametrize(
    ("cap", "tput", "line"),
    [
        (
            10000,
            1000,
            "capacityGiB: GCP Managed Lustre at 1000 MB/s per TiB grows in steps of 9000 GiB up to "
            "1530000 GiB; 10000 is not a multiple of it",
        ),
        (
            9000,
            500,
            "capacityGiB: GCP Managed Lustre at 500 MB/s per TiB takes 18000 to 20016000 GiB, not 9000",
        ),
        (18000, 300, "throughputPerTiB: Managed Lustre allows 125, 250, 500, 1000 MB/s per TiB, not 300"),
        (
            1_602_000,
            1000,
            "capacityGiB: GCP Managed Lustre at 1000 MB/s per TiB grows in steps of 72000 GiB above "
            "1530000 GiB; 1602000 is not a multiple of it",
        ),
    ],
)
def test_managed_lustre_capacity_and_throughput(cap, tput, line):
    obj = mutated("gcp-h100-mega")
    obj["storage"][0].update(capacityGiB=cap, throughputPerTiB=tput)
    assert problems(obj) == [f"platform.storage[0].{line}"]


def test_managed_lustre_large_sizes_in_big_steps_are_valid():
    obj = mutated("gcp-h100-mega")
    obj["storage"][0].update(capacityGiB=1_584_000, throughputPerTiB=1000)
    PlatformSpec.load(obj)


def test_managed_lustre_needs_gke_133():
    obj = mutated("gcp-h100-mega")
    obj["cluster"]["kubernetesVersion"] = "1.32"
    assert problems(obj) == [
        "platform.storage[0].kind: the GKE Managed Lustre CSI driver needs GKE 1.33 or newer; "
        "cluster.kubernetesVersion is 1.32"
    ]


def test_zonal_storage_needs_a_zone():
    obj = mutated("gcp-dev")
    del obj["zones"]
    (line,) = problems(obj)
    assert line.startswith("platform.zones: required for platform.storage[0] (datasets)")


def test_pool_zone_outside_the_region():
    obj = mutated("gcp-h100-mega")
    obj["nodePools"][1]["zones"] = ["us-east5-a"]
    assert problems(obj) == [
        "platform.nodePools[1].zones[0]: 'us-east5-a' is not a zone of region us-central1"
    ]


def test_overlapping_ranges():
    obj = mutated("gcp-dev")
    obj["network"]["servicesCidr"] = "10.50.8.0/24"
    assert problems(obj) == [
        "platform.network.servicesCidr: 10.50.8.0/24 overlaps cidr 10.50.0.0/20; the ranges must be disjoint"
    ]


def test_default_ranges_count_in_the_overlap_check():
    obj = mutated("gcp-dev")
    del obj["network"]["podsCidr"], obj["network"]["servicesCidr"]
    obj["network"]["cidr"] = "10.64.0.0/20"
    assert problems(obj) == [
        "platform.network.podsCidr: 10.64.0.0/14 overlaps cidr 10.64.0.0/20; the ranges must be disjoint"
    ]


def test_range_names_only_with_a_brought_network():
    obj = mutated("gcp-dev")
    obj["network"]["podsRangeName"] = "pods"
    obj["network"]["servicesRangeName"] = "svc"
    assert problems(obj) == [
        "platform.network.podsRangeName: only with a bring-your-own network/subnetwork",
        "platform.network.servicesRangeName: only with a bring-your-own network/subnetwork",
    ]


def test_brought_network_needs_its_subnetwork():
    obj = mutated("gcp-byo-network")
    del obj["network"]["subnetwork"]
    assert problems(obj) == [
        "platform.network: network and subnetwork go together when bringing your own network"
    ]


def test_gcp_keys_on_aws_are_named():
    obj = mutated("aws-dev")
    obj["network"]["podsRangeName"] = "pods"
    assert "platform.network.podsRangeName: only for cloud gcp, this stack is cloud aws" in problems(obj)


def test_the_program_reports_config_errors_without_registering_anything():
    obj = mutated("gcp-dev")
    obj["nodePools"][1]["machineType"] = "a3-highgpu-8g"
    obj["nodePools"][1]["gpusPerNode"] = 4
    with pytest.raises(pulumi.RunError) as err:
        plan_platform(obj)
    assert "platform.nodePools[1].gpusPerNode: a3-highgpu-8g has 8 GPUs, not 4" in str(err.value)


DNS_LABEL = st.from_regex(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True)


@given(DNS_LABEL, DNS_LABEL, DNS_LABEL)
def test_service_account_ids_fit_gcp_rules_and_stay_distinct(cluster, team, other):
    sid = service_account_id(cluster, team)
    assert re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", sid), sid
    assert sid == service_account_id(cluster, team)  # stable: a changed id would replace the identity
    if other != team:
        assert service_account_id(cluster, other) != sid
    assert len(short_id(f"{cluster}-{team}", 63)) <= 63
