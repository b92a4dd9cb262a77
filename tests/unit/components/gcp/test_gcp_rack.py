"""A4X / A4X Max (GB200 / GB300 NVL72) on GKE: the create-time rules, the rack record, the DRA driver values
(components/gcp/rack.py). Fast: spec loading and pure functions, no plan."""

from __future__ import annotations

import copy

import pytest

from components.catalog import catalog
from components.gcp.profile import gke_profile
from components.gcp.rack import (
    DRANET_RDMA_DEVICE_CLASS,
    DRANET_RDMA_NICS,
    RACK_TOPOLOGY_LEVELS,
    accelerator_topology,
    is_rack,
    rack_domain,
    workload_policy_name,
)
from components.spec import ConfigError, PlatformSpec
from contract.rack import CLIQUE_LABEL
from tests.helpers.plans import platform_object

RACK = 1  # index of the gb200 pool in stacks/Pulumi.gcp-gb200.yaml


def gb200() -> dict:
    return copy.deepcopy(platform_object("gcp-gb200"))


def problems(obj) -> list[str]:
    with pytest.raises(ConfigError) as err:
        PlatformSpec.load(obj)
    return err.value.problems


def test_the_reference_stack_is_valid():
    PlatformSpec.load(gb200())


@pytest.mark.parametrize(("machine", "gpu"), [("a4x-highgpu-4g", "GB200"), ("a4x-maxgpu-4g-metal", "GB300")])
def test_a4x_machines_are_racks_of_18_nodes_of_4_gpus(machine, gpu):
    shape = catalog().machine("gcp", machine)
    assert shape is not None and shape.gpu == gpu and shape.arch == "arm64"
    assert is_rack(shape)
    domain = rack_domain(shape)
    assert (domain.gpus, domain.nodes) == (72, 18)
    assert accelerator_topology(shape) == "1x72"


@pytest.mark.parametrize(("machine", "nics"), [("a4x-highgpu-4g", 4), ("a4x-maxgpu-4g-metal", 8)])
def test_a4x_racks_claim_every_dranet_rdma_nic_of_a_node(machine, nics):
    shape = catalog().machine("gcp", machine)
    assert shape is not None
    domain = rack_domain(shape)
    assert (domain.nic_device_class, domain.nics_per_node) == (DRANET_RDMA_DEVICE_CLASS, nics)
    assert DRANET_RDMA_DEVICE_CLASS == "mrdma.google.com"
    # The catalog's GPU NICs (Compute Engine "Networking and GPU machines") agree with DRANET's count.
    assert shape.gpu_nics == nics


def test_every_gcp_rack_machine_has_its_dranet_nic_count():
    c = catalog()
    racks = {n for n in c.machine_names("gcp") if is_rack(c.machine("gcp", n))}
    assert racks and racks <= set(DRANET_RDMA_NICS)


def test_an_8_gpu_nvlink_node_is_no_rack():
    assert not is_rack(catalog().machine("gcp", "a4-highgpu-8g"))


def test_clique_level_sits_between_the_sub_block_and_the_node():
    levels = list(RACK_TOPOLOGY_LEVELS)
    assert levels.index("cloud.google.com/gce-topology-subblock") < levels.index(CLIQUE_LABEL)
    assert levels.index(CLIQUE_LABEL) == levels.index("kubernetes.io/hostname") - 1


def test_workload_policy_name_is_an_rfc1035_name():
    assert workload_policy_name("gb200", "gb200") == "gb200-gb200-topology"
    assert len(workload_policy_name("c" * 40, "p" * 40)) <= 63


def test_rack_pool_without_a_specific_reservation():
    obj = gb200()
    pool = obj["nodePools"][RACK]
    pool["capacity"] = "on-demand"
    del pool["reservation"]
    assert problems(obj) == [
        "platform.nodePools[1].capacity: a4x-highgpu-4g (GB200 NVL72) runs only from a specific reservation on "
        "GKE; set capacity: reservation and name the reservation"
    ]


def test_rack_pool_that_is_not_a_whole_number_of_racks():
    obj = gb200()
    obj["nodePools"][RACK].update(minNodes=0, maxNodes=20)
    assert problems(obj) == [
        "platform.nodePools[1].maxNodes: 20 is not a whole number of NVL72 racks; a4x-highgpu-4g comes in "
        "racks of 18 nodes (72 GPUs): use a multiple of 18"
    ]


def test_rack_pool_with_the_wrong_gpus_per_node():
    obj = gb200()
    obj["nodePools"][RACK]["gpusPerNode"] = 8
    assert problems(obj) == ["platform.nodePools[1].gpusPerNode: a4x-highgpu-4g has 4 GPUs, not 8"]


def test_rack_pool_on_kubernetes_older_than_dra_ga():
    obj = gb200()
    obj["cluster"]["kubernetesVersion"] = "1.33"
    assert (
        "platform.cluster.kubernetesVersion: GB200 pools need Kubernetes 1.34 or newer (DRA GA; GKE "
        "1.34.1-gke.1829001 or newer), not 1.33"
    ) in problems(obj)


def test_gb300_pool_states_the_a4x_max_floor():
    obj = gb200()
    obj["cluster"]["kubernetesVersion"] = "1.33"
    obj["nodePools"][RACK].update(gpu="GB300", machineType="a4x-maxgpu-4g-metal")
    assert any(
        "GB300 pools need Kubernetes 1.34 or newer" in p and "1.34.3-gke.1318000" in p for p in problems(obj)
    )


def test_gke_profile_gives_the_dra_driver_gkes_driver_root_only():
    """The plugin's placement is the neutral one (the rack pools' nodes by pool label): a GKE affinity of its
    own replaced it in the merge and left the rack pool out (verify rack-platform dra-driver failed)."""
    assert gke_profile("1.35").dra_driver_values == {"nvidiaDriverRoot": "/home/kubernetes/bin/nvidia"}
