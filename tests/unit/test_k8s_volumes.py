"""Shared volumes: one static RWX PV per (storage, team), pre-bound to that team's claim."""

from __future__ import annotations

import functools

import pytest

from components.spec import ConfigError, PlatformSpec
from infra.mockcloud.kubernetes import plan_incluster
from tests.conftest import platform_object

PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


@functools.cache
def plan(stack: str):
    return plan_incluster(platform_object(stack), stack)


def two_teams(stack: str) -> dict:
    obj = platform_object(stack)
    obj["teams"] = [{"name": "research", "gpuQuota": 8}, {"name": "vision", "gpuQuota": 8}]
    return obj


def test_eks_lustre_is_a_csi_volume_with_the_fsx_node_plugin():
    result = plan("aws-dev")
    (pv,) = result.of_type(PV)
    spec = pv.inputs["spec"]
    assert spec["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0datasets0123456",
        "volumeAttributes": {"dnsname": "fs-0datasets.fsx.us-east-1.amazonaws.com", "mountname": "abcdefgh"},
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
    result = plan_incluster(two_teams(stack))
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
    result = plan_incluster(obj)
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
