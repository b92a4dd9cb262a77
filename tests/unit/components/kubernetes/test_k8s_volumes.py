"""Shared volumes: one static RWX PV per (storage, team), pre-bound to that team's claim."""

from __future__ import annotations

import pytest

from components.spec import ConfigError, PlatformSpec
from tests.helpers.plans import one, plan_object, planned, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def plan(stack: str):
    return planned(stack)


def two_teams(stack: str) -> dict:
    obj = platform_object(stack)
    obj["teams"] = [{"name": "research", "gpuQuota": 8}, {"name": "vision", "gpuQuota": 8}]
    return obj


def test_eks_lustre_is_a_csi_volume_with_the_fsx_node_plugin():
    result = plan("aws-dev")
    (pv,) = result.of_type(PV)
    spec = pv.inputs["spec"]
    # The file system the AWS layer made: its id, DNS name and mount name.
    fs = one(result, "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert spec["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": f"{fs.name}-id",
        "volumeAttributes": {
            "dnsname": "fs-00000002184833592.fsx.us-east-1.amazonaws.com",
            "mountname": "abcdefgh",
        },
    }
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["capacity"] == {"storage": "2400Gi"}
    (fsx,) = [
        r
        for r in result.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == "aws-fsx-csi-driver"
    ]
    assert fsx.inputs["version"] == "1.17.0"
    assert fsx.inputs["repositoryOpts"] == {"repo": "https://kubernetes-sigs.github.io/aws-fsx-csi-driver"}
    assert fsx.inputs["values"]["node"]["tolerateAllTaints"] is True
    assert fsx.urn in pv.deps


def test_no_fsx_chart_without_fsx():
    for stack in ("gcp-dev", "onprem-dev"):
        charts = [r.inputs["chart"] for r in plan(stack).of_type("kubernetes:helm.sh/v3:Release")]
        assert "aws-fsx-csi-driver" not in charts


def test_existing_cluster_nfs_uses_the_in_tree_source():
    (pv,) = plan("onprem-dev").of_type(PV)
    assert pv.inputs["spec"]["nfs"] == {"server": "nfs.lab.example.internal", "path": "/export/datasets"}
    assert "csi" not in pv.inputs["spec"]
    assert pv.inputs["spec"]["mountOptions"] == ["nfsvers=4.1", "hard", "noatime"]


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_one_pv_per_storage_and_team_each_prebound_to_its_claim(stack):
    result = plan_object(two_teams(stack))
    pvs = {r.inputs["metadata"]["name"]: r for r in result.of_type(PV)}
    claims = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r for r in result.of_type(PVC)
    }
    assert set(pvs) == {"datasets-research", "datasets-vision"}
    assert set(claims) == {("research", "datasets"), ("vision", "datasets")}
    for (ns, claim_name), claim in claims.items():
        pv = pvs[claim.inputs["spec"]["volumeName"]]
        assert pv.inputs["spec"]["claimRef"] == {"namespace": ns, "name": claim_name}
        assert claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
        assert claim.inputs["spec"]["storageClassName"] == pv.inputs["spec"]["storageClassName"] == ""
        assert (
            claim.inputs["spec"]["resources"]["requests"]["storage"]
            == pv.inputs["spec"]["capacity"]["storage"]
        )
        # The claim waits for its namespace.
        ns_res = [
            r for r in result.of_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == ns
        ]
        assert ns_res[0].urn in claim.deps


def test_team_without_the_storage_gets_no_claim():
    obj = two_teams("onprem-dev")
    obj["teams"][1]["storage"] = []
    result = plan_object(obj)
    assert [r.inputs["metadata"]["namespace"] for r in result.of_type(PVC)] == ["research"]
    assert [r.inputs["metadata"]["name"] for r in result.of_type(PV)] == ["datasets-research"]


def test_team_referring_to_unknown_storage_is_a_config_error():
    obj = platform_object("onprem-dev")
    obj["teams"][0]["storage"] = ["datasets", "scratch"]
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert e.value.problems == [
        "platform.teams[0].storage[1]: 'scratch' is not a storage of this platform; known: datasets"
    ]


# ---- the platform's own volumes name their StorageClass ----------------------------------------

RELEASE = "kubernetes:helm.sh/v3:Release"


def release_values(result, chart: str) -> dict:
    (r,) = [r for r in result.of_type(RELEASE) if r.inputs["chart"].rsplit("/", 1)[-1] == chart]
    return r.inputs["values"]


def claims_asked_of_charts(result) -> dict[str, dict]:
    """Every volume claim the charts create from the values sent (chart -> claim spec), by the keys
    their templates read: kube-prometheus-stack 88.5.3 prometheus.prometheusSpec.storageSpec,
    alertmanager.alertmanagerSpec.storage, grafana.persistence (grafana 12.11.1); loki 18.11.0
    singleBinary.persistence (templates/_workload.tpl volumeClaimTemplates)."""
    prom = release_values(result, "kube-prometheus-stack")
    out = {"prometheus": prom["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]}
    assert not prom.get("alertmanager", {}).get("alertmanagerSpec", {}).get("storage"), "no Alertmanager PVC"
    assert not prom["grafana"].get("persistence", {}).get("enabled"), "no Grafana PVC"
    loki = [r for r in result.of_type(RELEASE) if r.inputs["chart"] == "loki"]
    if loki:
        persistence = loki[0].inputs["values"]["singleBinary"]["persistence"]
        assert persistence["enabled"] is True  # the chart's default: Loki asks for a volume
        out["loki"] = {"storageClassName": persistence.get("storageClass")}
    return out


@pytest.mark.parametrize(
    ("stack", "storage_class"),
    [("aws-dev", "gp3-encrypted"), ("gcp-dev", "standard-rwo")],
)
def test_every_platform_volume_names_the_bundles_storage_class(stack, storage_class):
    claims = claims_asked_of_charts(plan(stack))
    assert set(claims) == {"prometheus", "loki"}
    assert {name: c.get("storageClassName") for name, c in claims.items()} == {
        "prometheus": storage_class,
        "loki": storage_class,
    }


def test_existing_cluster_volumes_use_the_configured_class_or_the_default():
    # Without cluster.storageClass: no class named, the cluster's default class provisions them.
    claims = claims_asked_of_charts(plan("onprem-dev"))
    assert all(c.get("storageClassName") is None for c in claims.values())
    obj = platform_object("onprem-dev")
    obj["cluster"]["storageClass"] = "ceph-rbd"
    claims = claims_asked_of_charts(plan_object(obj))
    assert {name: c["storageClassName"] for name, c in claims.items()} == {
        "prometheus": "ceph-rbd",
        "loki": "ceph-rbd",
    }


def test_storage_class_key_is_checked():
    obj = platform_object("onprem-dev")
    obj["cluster"]["storageClass"] = "Fast_SSD"
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert e.value.problems == [
        "platform.cluster.storageClass: 'Fast_SSD' is not valid here; expected a Kubernetes object name "
        "(lowercase a-z, 0-9, '-' and '.')"
    ]


def test_storage_class_key_is_for_existing_clusters_only():
    obj = platform_object("gcp-dev")
    obj["cluster"]["storageClass"] = "premium-rwo"
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert e.value.problems == [
        "platform.cluster.storageClass: only for cloud kubernetes, this stack is cloud gcp"
    ]


def test_fsx_csi_controller_is_not_deployed():
    """chart 1.17.0 renders the controller Deployment whatever nodeComponentOnly says; zero replicas."""
    values = release_values(plan("aws-dev"), "aws-fsx-csi-driver")
    assert values["controller"]["replicaCount"] == 0
    assert values["nodeComponentOnly"] is True  # drops the controller's PodDisruptionBudget
