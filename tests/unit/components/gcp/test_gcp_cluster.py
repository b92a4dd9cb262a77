"""The GKE cluster as GCP would receive it, its kubeconfig and the Kubernetes provider."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers.gcp import CLUSTER, FIREWALL, LUSTRE, mutated, one, plan, plan_platform

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def test_standard_cluster_with_workload_identity_private_nodes_and_dataplane_v2():
    c = one(plan("gcp-dev"), CLUSTER).inputs
    assert c["name"] == "ml-dev"
    assert c["location"] == "us-central1"
    assert c["nodeLocations"] == ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert c["removeDefaultNodePool"] is True
    assert c["releaseChannel"] == {"channel": "EXTENDED"}  # held on 1.34 (TCPX): EXTENDED
    assert c["minMasterVersion"] == "1.34"
    assert c["workloadIdentityConfig"] == {"workloadPool": "example-ml-dev.svc.id.goog"}
    assert c["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}
    assert c["enableShieldedNodes"] is True
    assert c["datapathProvider"] == "ADVANCED_DATAPATH"
    # Dataplane V2 enforces NetworkPolicy itself; GKE rejects the Calico add-on next to it.
    assert "networkPolicy" not in c
    assert "networkPolicyConfig" not in c["addonsConfig"]
    assert c["networkingMode"] == "VPC_NATIVE"
    assert c["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "pods",
        "servicesSecondaryRangeName": "services",
    }
    assert c["network"] == "projects/example-ml-dev/global/networks/ml-dev-vpc"
    assert c["subnetwork"] == "projects/example-ml-dev/regions/us-central1/subnetworks/ml-dev-us-central1"
    assert "masterAuthorizedNetworksConfig" not in c


def test_storage_addons_follow_the_storage_kinds():
    dev = one(plan("gcp-dev"), CLUSTER).inputs["addonsConfig"]
    assert dev["gcpFilestoreCsiDriverConfig"] == {"enabled": True}
    assert "lustreCsiDriverConfig" not in dev
    mega = one(plan("gcp-h100-mega"), CLUSTER).inputs["addonsConfig"]
    assert mega["gcpFilestoreCsiDriverConfig"] == {"enabled": False}
    assert mega["lustreCsiDriverConfig"] == {"enabled": True, "enableLegacyLustrePort": False}


def test_gke_133_uses_the_legacy_lustre_port_on_both_ends():
    obj = mutated("gcp-h100-mega")
    obj["cluster"]["kubernetesVersion"] = "1.33"
    result = plan_platform(obj)
    addon = one(result, CLUSTER).inputs["addonsConfig"]["lustreCsiDriverConfig"]
    assert addon == {"enabled": True, "enableLegacyLustrePort": True}
    assert one(result, LUSTRE).inputs["gkeSupportEnabled"] is True
    fw = one(result, FIREWALL, "mega-net-lustre").inputs
    assert fw["allows"] == [{"protocol": "tcp", "ports": ["6988"]}]


def test_authorized_networks_narrow_the_control_plane():
    c = one(plan("gcp-h100-mega"), CLUSTER).inputs
    assert c["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "authorized-0"}],
        "gcpPublicCidrsAccessEnabled": False,
    }
    assert c["minMasterVersion"] == "1.35"


def test_kubeconfig_is_secret_and_authenticates_with_the_gke_plugin():
    result = plan("gcp-dev")
    assert "kubeconfig" in result.secret_outputs
    doc = yaml.safe_load(result.outputs["kubeconfig"])
    assert doc["clusters"][0]["cluster"] == {
        "server": "https://203.0.113.10",
        "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=",
    }
    user = doc["users"][0]["user"]
    assert set(user) == {"exec"}  # no token, no client key: nothing to leak
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert user["exec"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert doc["current-context"] == doc["contexts"][0]["name"] == "gke_example-ml-dev_us-central1_ml-dev"


def test_kubernetes_provider_is_built_from_the_cluster():
    result = plan("gcp-dev")
    provider = one(result, "pulumi:providers:kubernetes")
    assert one(result, CLUSTER).urn in provider.deps
    assert provider.inputs["enableServerSideApply"] in (True, "true")


def test_platform_outputs_match_the_cloud_neutral_contract():
    out = plan("gcp-dev").outputs
    assert out["cloud"] == "gcp"
    assert out["clusterName"] == "ml-dev"
    assert out["region"] == "us-central1"
    assert out["objectStore"] == "gs"
    assert set(out) >= {"kubeconfig", "nodePools", "storage", "buckets", "teams"}


def test_platform_volumes_use_gkes_pd_class_once_its_driver_is_on():
    """Prometheus' and Loki's volumes name standard-rwo (PD CSI driver, pd-balanced) and their releases
    wait for the cluster whose add-on provides it."""
    result = plan("gcp-dev")
    cluster = one(result, CLUSTER)
    assert cluster.inputs["addonsConfig"]["gcePersistentDiskCsiDriverConfig"] == {"enabled": True}
    releases = {r.inputs["chart"]: r for r in result.of_type("kubernetes:helm.sh/v3:Release")}
    prom, loki = releases["kube-prometheus-stack"], releases["loki"]
    claim = prom.inputs["values"]["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]
    assert claim["spec"]["storageClassName"] == "standard-rwo"
    assert loki.inputs["values"]["singleBinary"]["persistence"]["storageClass"] == "standard-rwo"
    for release in (prom, loki):
        assert cluster.urn in release.deps, release.name


# ---- GPUDirect-TCPX: held on its minor (cluster-toolkit PR #5673) --------------------------------------
POOL = "gcp:container/nodePool:NodePool"


def test_a_tcpx_platform_holds_minor_and_node_upgrades_until_end_of_support():
    # gcp-dev's H100 pool is a3-highgpu-8g (TCPX): a channel upgrade to 1.35 (COS 125) would leave it
    # without nodes, so the cluster carries the toolkit's exclusion and keeps its pinned version.
    c = one(plan("gcp-dev"), CLUSTER).inputs
    assert c["minMasterVersion"] == "1.34" and c["releaseChannel"] == {"channel": "EXTENDED"}
    (exclusion,) = c["maintenancePolicy"]["maintenanceExclusions"]
    assert exclusion["exclusionOptions"] == {
        "scope": "NO_MINOR_OR_NODE_UPGRADES",
        "endTimeBehavior": "UNTIL_END_OF_SUPPORT",
    }
    # A fixed start (never the wall clock) and no end_time: the provider takes exactly one of the two.
    assert exclusion["startTime"] == "2026-04-01T00:00:00Z" and "endTime" not in exclusion
    assert c["maintenancePolicy"]["dailyMaintenanceWindow"] == {"startTime": "09:00"}
    # GKE keeps node auto-upgrade on in a release channel; the exclusion is what holds the nodes.
    pools = [p.inputs for p in plan("gcp-dev").resources if p.type == POOL]
    assert all(p["management"]["autoUpgrade"] is True for p in pools)


def test_platforms_without_tcpx_pools_keep_gkes_upgrades():
    for stack in ("gcp-h100-mega", "gcp-byo-network"):  # TCPXO (a3-megagpu-8g) and L4 pools
        assert "maintenancePolicy" not in one(plan(stack), CLUSTER).inputs, stack


def test_a_tcpx_platform_on_a_cos_125_minor_is_refused_naming_the_key():
    from components.spec import ConfigError, PlatformSpec

    obj = mutated("gcp-dev")
    obj["cluster"]["kubernetesVersion"] = "1.35"
    try:
        PlatformSpec.load(obj)
    except ConfigError as err:
        problems = err.problems
    else:
        problems = []
    assert any(
        p.startswith("platform.cluster.kubernetesVersion: GPUDirect-TCPX machines (a3-highgpu-8g)")
        and "use 1.34 or older" in p
        for p in problems
    ), problems
    obj["cluster"]["kubernetesVersion"] = "1.34"
    assert PlatformSpec.load(obj).cluster.kubernetes_version == "1.34"


def test_an_unset_release_channel_is_extended_on_a_held_cluster_and_regular_elsewhere():
    # A held cluster's exclusion outlasts its minor's standard support only on EXTENDED (maintenance.py);
    # before, an unset channel was REGULAR and GKE upgraded the TCPX cluster past 1.34 after 2026-10-01.
    held = mutated("gcp-dev")
    del held["cluster"]["releaseChannel"]
    assert one(plan_platform(held), CLUSTER).inputs["releaseChannel"] == {"channel": "EXTENDED"}
    plain = mutated("gcp-dev")
    del plain["cluster"]["releaseChannel"]
    plain["nodePools"] = [p for p in plain["nodePools"] if not p.get("gpu")]
    plain.pop("teams", None)
    assert one(plan_platform(plain), CLUSTER).inputs["releaseChannel"] == {"channel": "REGULAR"}
