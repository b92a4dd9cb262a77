"""Rack-scale pools in the cluster: the DRA driver's ComputeDomain half on the rack nodes only, GPU Feature
Discovery on, Kueue mapping the channel class (and on GKE DRANET's RDMA class) and quota for them; none of it
without a rack pool."""

from __future__ import annotations

import pytest
import yaml

from contract.rack import CHANNEL_DEVICE_CLASS, KUEUE_CHANNEL_RESOURCE, KUEUE_RDMA_NIC_RESOURCE
from tests.helpers.plans import planned

pytestmark = pytest.mark.plans

DRA = "kubernetes:helm.sh/v3:Release"


def _release(stack: str, chart: str):
    return [
        r
        for r in planned(stack).resources
        if r.type == DRA and str(r.inputs.get("chart", "")).endswith(chart)
    ]


def test_dra_driver_runs_compute_domains_on_the_rack_pool_only() -> None:
    (rel,) = _release("aws-gb200", "/dra-driver-nvidia-gpu")
    assert rel.inputs["chart"] == "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
    assert rel.inputs["version"] == "0.4.1"
    values = rel.inputs["values"]
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert values["nvidiaDriverRoot"] == "/"
    terms = values["kubeletPlugin"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "trainplane.dev/pool", "operator": "In", "values": ["gb200-block"]}]}
    ]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["kubeletPlugin"][
        "tolerations"
    ]
    (ns,) = [
        r
        for r in planned("aws-gb200").resources
        if r.type == "kubernetes:core/v1:Namespace"
        and r.inputs["metadata"]["name"] == "dra-driver-nvidia-gpu"
    ]
    assert ns.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_gpu_feature_discovery_is_on_for_rack_pools() -> None:
    (op,) = _release("aws-gb200", "gpu-operator")
    assert op.inputs["values"]["gfd"] == {"enabled": True}


def test_kueue_maps_the_channel_class_and_queues_have_channel_quota() -> None:
    (kueue,) = _release("aws-gb200", "/kueue")
    config = yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["resources"]["deviceClassMappings"] == [
        {"name": KUEUE_CHANNEL_RESOURCE, "deviceClassNames": [CHANNEL_DEVICE_CLASS]}
    ]
    queues = [r for r in planned("aws-gb200").resources if r.type.endswith(":ClusterQueue")]
    quota = {}
    for q in queues:
        (group,) = q.inputs["spec"]["resourceGroups"]
        assert KUEUE_CHANNEL_RESOURCE in group["coveredResources"]
        (flavor,) = group["flavors"]
        (res,) = [r for r in flavor["resources"] if r["name"] == KUEUE_CHANNEL_RESOURCE]
        quota[q.inputs["metadata"]["name"]] = int(res["nominalQuota"])
    # One channel per 4-GPU pod: research's share of the 72 GPUs needs 17 channels, eval's 2.
    assert quota == {"research": 17, "eval": 2}


def test_no_rack_pool_no_driver_no_mapping() -> None:
    assert _release("aws-dev", "/dra-driver-nvidia-gpu") == []
    (kueue,) = _release("aws-dev", "/kueue")
    assert "resources" not in yaml.safe_load(
        kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
    )


def test_kueue_on_gke_maps_dranets_rdma_class_too_and_queues_have_nic_quota() -> None:
    (kueue,) = _release("gcp-gb200", "/kueue")
    config = yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["resources"]["deviceClassMappings"] == [
        {"name": KUEUE_CHANNEL_RESOURCE, "deviceClassNames": [CHANNEL_DEVICE_CLASS]},
        {"name": KUEUE_RDMA_NIC_RESOURCE, "deviceClassNames": ["mrdma.google.com"]},
    ]
    (queue,) = [r for r in planned("gcp-gb200").resources if r.type.endswith(":ClusterQueue")]
    (group,) = queue.inputs["spec"]["resourceGroups"]
    assert KUEUE_RDMA_NIC_RESOURCE in group["coveredResources"]
    (flavor,) = group["flavors"]
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    # pretrain's 72 GPUs: 18 pods, each claiming one channel and the 4 RDMA NICs of its node.
    assert (quota[KUEUE_CHANNEL_RESOURCE], quota[KUEUE_RDMA_NIC_RESOURCE]) == ("18", "72")
