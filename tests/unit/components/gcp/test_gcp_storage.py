"""Filestore and Managed Lustre as GCP would receive them, their storage handles and dependencies."""

from __future__ import annotations

import pytest

from tests.helpers.gcp import (
    CLUSTER,
    FILESTORE,
    LUSTRE,
    NODE_POOL,
    mutated,
    one,
    plan,
    plan_platform,
    upstream,
)

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def test_filestore_instance_in_the_platform_zone_exported_to_its_subnet():
    fs = one(plan("gcp-dev"), FILESTORE).inputs
    assert fs["name"] == "ml-dev-datasets"
    assert fs["tier"] == "BASIC_SSD"
    assert fs["location"] == "us-central1-a"
    assert fs["fileShares"] == {
        "name": "datasets",
        "capacityGb": 2560.0,
        "nfsExportOptions": [
            {"ipRanges": ["10.50.0.0/20"], "accessMode": "READ_WRITE", "squashMode": "NO_ROOT_SQUASH"}
        ],
    }
    assert fs["networks"] == [
        {"network": "ml-dev-vpc", "modes": ["MODE_IPV4"], "connectMode": "DIRECT_PEERING"}
    ]


def test_filestore_handle_uses_the_gke_csi_static_volume_format():
    (handle,) = plan("gcp-dev").outputs["storage"]
    assert handle["csiDriver"] == "filestore.csi.storage.gke.io"
    assert handle["volumeHandle"] == "modeInstance/us-central1-a/ml-dev-datasets/datasets"
    assert handle["volumeAttributes"] == {"ip": "10.50.8.2", "volume": "datasets"}
    assert handle["kind"] == "nfs" and handle["capacityGiB"] == 2560


def test_byo_filestore_zonal_tier():
    result = plan("gcp-byo-network")
    fs = one(result, FILESTORE).inputs
    assert (fs["tier"], fs["location"], fs["fileShares"]["capacityGb"]) == ("ZONAL", "europe-west4-a", 1024.0)
    assert fs["networks"][0]["network"] == "lab-vpc"
    (handle,) = result.outputs["storage"]
    assert handle["volumeHandle"] == "modeInstance/europe-west4-a/l4-lab-datasets/datasets"


def test_regional_filestore_lives_in_the_region():
    obj = mutated("gcp-dev")
    obj["storage"][0].update(tier="REGIONAL", capacityGiB=1024)
    fs = one(plan_platform(obj), FILESTORE).inputs
    assert fs["location"] == "us-central1"


def test_managed_lustre_next_to_the_compact_gpu_pool():
    result = plan("gcp-h100-mega")
    lustre = one(result, LUSTRE)
    inp = lustre.inputs
    assert inp["instanceId"] == "mega-scratch"
    assert inp["location"] == "us-central1-c"  # the zone of the compact H100-MEGA pool
    assert inp["filesystem"] == "scratch"
    assert inp["capacityGib"] == "18000"
    assert inp["perUnitStorageThroughput"] == "1000"
    assert inp["network"] == "projects/example-ml-prod/global/networks/mega-vpc"
    assert "gkeSupportEnabled" not in inp  # GKE 1.34: default LNet port
    peering = one(result, "gcp:servicenetworking/connection:Connection")
    assert peering.urn in lustre.deps


def test_lustre_handle_uses_the_gke_csi_static_volume_format():
    (handle,) = plan("gcp-h100-mega").outputs["storage"]
    assert handle["csiDriver"] == "lustre.csi.storage.gke.io"
    assert handle["volumeHandle"] == "example-ml-prod/us-central1-c/mega-scratch"
    assert handle["volumeAttributes"] == {"ip": "10.72.0.3", "filesystem": "scratch"}
    assert handle["kind"] == "lustre" and handle["capacityGiB"] == 18000


@pytest.mark.parametrize(
    ("stack", "type_"), [("gcp-dev", FILESTORE), ("gcp-h100-mega", LUSTRE), ("gcp-byo-network", FILESTORE)]
)
def test_storage_does_not_wait_for_the_cluster_or_its_pools(stack, type_):
    result = plan(stack)
    waits = upstream(result, one(result, type_))
    assert one(result, CLUSTER).urn not in waits
    assert not waits & {p.urn for p in result.of_type(NODE_POOL)}
    assert not any("pulumi:providers:kubernetes" in urn for urn in waits)
