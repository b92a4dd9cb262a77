"""Rack-scale GPUs on GKE: A4X (GB200, a4x-highgpu-4g) and A4X Max (GB300, a4x-maxgpu-4g-metal) pools.

Pure (no pulumi_gcp): node_pool.py builds the pool from these pieces, rules.py checks a stack with
`check_rack`, profile.py gives the DRA driver its GKE values. Sources, each value below:

- cluster-toolkit@v1.95.0 (its newest tag) examples/gke-a4x/gke-a4x.yaml and
  examples/gke-a4x-max-bm/gke-a4x-max-bm.yaml: a `modules/compute/resource-policy` with
  `workload_policy: {type: HIGH_THROUGHPUT, accelerator_topology: "1x72"}` that the pool `use`s, the pool
  bound to one reservation (`consume_reservation_type: SPECIFIC_RESERVATION`), 4 GPUs, hyperdisk-balanced;
  modules/compute/resource-policy/outputs.tf: the pool's `placement_policy` is `{type: COMPACT, name:
  <policy name>}` (gke-node-pool/main.tf `placement_policy { type, policy_name }`).
- Networks: gke-a4x.yaml@v1.95.0 sets `enable_dranet: true` and no additional networks (PR #5682 removed
  them, #5822 added DRANET); gke-node-pool/main.tf@v1.95.0 then sets `network_config.accelerator_network_profile
  = "auto"` and the node label `cloud.google.com/gke-networking-dra-driver: "true"`, and
  gke-node-pool/gpu_direct.tf@v1.95.0 `dranet_min_version = "1.34.1-gke.1829001"` with Dataplane V2 (every
  trainplane cluster: components/gcp/cluster.py ADVANCED_DATAPATH). GKE docs "Allocate network resources by
  using GKE managed DRANET": the networking-dra-driver DaemonSet runs on GPU nodes with DRANET enabled and
  GKE >= 1.34.1-gke.1829001 installs its DeviceClasses. Until v1.90.0 the blueprint attached 1 extra gVNIC
  network and one RoCE VPC of 4 subnets instead (docs/rack-scale.md "GKE").
- A4X Max: GKE >= 1.34.3-gke.1318000 (components/gcp/data/catalog.yaml, GKE "Create a custom AI-optimized GKE
  cluster with A4X Max"); modelled with the same DRANET settings. UNCONFIRMED: gke-a4x-max-bm.yaml@v1.95.0
  sets the DRANET label by hand but attaches its own IDPF network and a `<zone>-vpc-roce-metal` VPC.
- Topology: Kueue Topology of gke-a4x/kueue-configuration.yaml.tftpl@v1.95.0: gce-topology-block,
  gce-topology-subblock, (gke-nodepool), gce-topology-host, kubernetes.io/hostname; Compute Engine "About
  workload policies" (accelerator topology): A4X and A4X Max are organised in sub-blocks, a 1x72 slice is one
  NVLink domain of 18 instances. The clique label (contract/rack.py) goes between the sub-block and the host.
- GPU driver: as every trainplane GPU pool, `INSTALLATION_DISABLED` and `gke-no-default-nvidia-gpu-device-plugin`
  (node_pool.py), which GKE "Prepare GKE infrastructure for DRA workloads" (kubernetes-engine/docs/how-to/
  set-up-dra) requires of a DRA GPU pool; the COS installer puts the driver in /home/kubernetes/bin/nvidia.
- Arm: GKE selects the arm64 node image from the machine type and taints Arm nodes
  `kubernetes.io/arch=arm64:NoSchedule` (GKE "Prepare an Arm workload for deployment"; gke-a4x.yaml@v1.95.0 job templates tolerate it);
  a job's image must be arm64 (or multi-arch).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from components.bundle import TaintInfo
from components.catalog import MachineShape
from components.outputs import RackDomain
from contract.rack import CLIQUE_LABEL

# Compute Engine workload policy of a rack pool (cluster-toolkit@v1.95.0 examples/gke-a4x/gke-a4x.yaml
# `workload_policy`); pulumi_gcp 10.2 ResourcePolicyWorkloadPolicy {type, accelerator_topology}.
WORKLOAD_POLICY_TYPE = "HIGH_THROUGHPUT"
# The placement policy type that names the workload policy (resource-policy/outputs.tf@v1.95.0).
PLACEMENT_TYPE = "COMPACT"
# DRANET (gke-node-pool/main.tf@v1.95.0, enable_dranet_actual).
ACCELERATOR_NETWORK_PROFILE = "auto"
DRANET_LABEL = "cloud.google.com/gke-networking-dra-driver"
# GKE's taint on Arm nodes (GKE "Prepare an Arm workload for deployment", cloud.google.com/kubernetes-engine/
# docs/how-to/prepare-arm-workloads-for-deployment; gke-a4x.yaml@v1.95.0 job templates tolerate it).
ARM_TAINT = TaintInfo(key="kubernetes.io/arch", value="arm64", effect="NoSchedule")
# Kubernetes minor rack pools need: DRA is GA (resource.k8s.io/v1) from 1.34 and the DRA driver for GPUs
# needs 1.34.2 (../shared/FACTS.md "NVL72"); the spec pins minors, GKE picks the channel's newest patch.
RACK_MIN_MINOR = (1, 34)
# GKE version floors per machine (patch level: a stack pins minors only, so these are stated, not checked).
GKE_FLOORS = {
    "a4x-highgpu-4g": "1.34.1-gke.1829001",  # DRANET, gke-node-pool/gpu_direct.tf@v1.95.0
    "a4x-maxgpu-4g-metal": "1.34.3-gke.1318000",  # catalog.yaml A4X Max note (GKE A4X Max guide)
}
# GKE node labels of the physical topology, broadest first, with the clique just above the node
# (gke-a4x/kueue-configuration.yaml.tftpl@v1.95.0 minus gke-nodepool and gce-topology-host: one VM per
# host on A4X, so the host level adds nothing below the clique).
RACK_TOPOLOGY_LEVELS = (
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    CLIQUE_LABEL,
    "kubernetes.io/hostname",
)
# The DeviceClass of DRANET's RDMA NICs: GKE >= 1.34.1-gke.1829001 installs it on DRANET clusters (GKE
# "Allocate network resources by using GKE managed DRANET", docs.cloud.google.com/kubernetes-engine/docs/
# how-to/allocate-network-resources-dra: "the mrdma.google.com class for RDMA-capable devices");
# cluster-toolkit@v1.95.0 modules/compute/gke-node-pool/variables.tf `dranet_device_class_name` default
# "mrdma.google.com" (netdev.google.com is for non-RDMA machines).
DRANET_RDMA_DEVICE_CLASS = "mrdma.google.com"
# RDMA NICs DRANET hands out per node, which a training pod (one per node) claims all of, with allocationMode
# ExactCount: Kueue 0.19.2 refuses `All` (pkg/dra/claims.go countDevicesPerClass), which
# cluster-toolkit@v1.95.0 gke-node-pool/resource-claim-template.yaml.tftpl uses by default (variables.tf
# `dranet_allocation_mode` "All"), so the count is written out.
DRANET_RDMA_NICS = {
    # Compute Engine "Networking and GPU machines" (docs.cloud.google.com/compute/docs/gpus/gpu-network-bandwidth):
    # A4X has 4 NVIDIA ConnectX-7 NICs for GPU-to-GPU traffic (MRDMA virtual functions); the catalog's
    # gpuNics (components/gcp/data/catalog.yaml) says 4 too.
    "a4x-highgpu-4g": 4,
    # cluster-toolkit@v1.95.0 examples/gke-a4x-max-bm/nccl-jobset-example.yaml: ResourceClaimTemplate with
    # deviceClassName mrdma.google.com, allocationMode ExactCount, count 8 (4 ConnectX-8 SuperNICs in an
    # 8-way rail-aligned topology, "Networking and GPU machines"). UNCONFIRMED on a running A4X Max node.
    "a4x-maxgpu-4g-metal": 8,
}
GKE_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"


def is_rack(shape: MachineShape | None) -> bool:
    """Whether a machine's NVLink domain spans nodes (catalog `nvlinkDomain` larger than its GPUs)."""
    return shape is not None and shape.gpus > 0 and shape.nvlink_domain > shape.gpus


def rack_domain(shape: MachineShape) -> RackDomain:
    """The NVLink domain of a rack machine: 72 GPUs, 18 nodes of 4 for A4X / A4X Max; its RDMA NICs come from
    DRANET (every rack pool has it: node_pool.py), claimed from DRANET_RDMA_DEVICE_CLASS. A rack machine
    missing from DRANET_RDMA_NICS is a KeyError: its NIC count must be looked up, not guessed."""
    return RackDomain(
        gpus=shape.nvlink_domain,
        nodes=shape.nvlink_domain // shape.gpus,
        nic_device_class=DRANET_RDMA_DEVICE_CLASS,
        nics_per_node=DRANET_RDMA_NICS[shape.name],
    )


def accelerator_topology(shape: MachineShape) -> str:
    """The workload policy's accelerator topology: "1x72" (Compute Engine "Create workload policies":
    `--accelerator-topology=1x72` for A4X Max and A4X)."""
    return f"1x{shape.nvlink_domain}"


def workload_policy_name(cluster: str, pool: str) -> str:
    """The resource policy's name (RFC 1035, 63 characters at most)."""
    return f"{cluster}-{pool}-topology"[:63].rstrip("-")


def dranet_network_config() -> dict[str, Any]:
    """network_config of a rack pool (pulumi_gcp 10.2 NodePoolNetworkConfig.accelerator_network_profile)."""
    return {"accelerator_network_profile": ACCELERATOR_NETWORK_PROFILE}


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def check_rack(spec: Any, pool: Any, shape: MachineShape, path: str) -> Iterable[str]:
    """Create-time rules of one rack pool (A4X / A4X Max), one line each."""
    domain = rack_domain(shape)
    if pool.capacity != "reservation" or not pool.reservation:
        yield (
            f"{path}.capacity: {shape.name} ({pool.gpu} NVL72) runs only from a specific reservation on GKE; "
            "set capacity: reservation and name the reservation"
        )
    for key, count in (("minNodes", pool.min_nodes), ("maxNodes", pool.effective_max_nodes)):
        if count % domain.nodes:
            yield (
                f"{path}.{key}: {count} is not a whole number of NVL72 racks; {shape.name} comes in racks of "
                f"{domain.nodes} nodes ({domain.gpus} GPUs): use a multiple of {domain.nodes}"
            )
    version = spec.cluster.kubernetes_version
    if _minor(version) < RACK_MIN_MINOR:
        floor = GKE_FLOORS.get(shape.name, "")
        yield (
            f"{spec_root(path)}.cluster.kubernetesVersion: {pool.gpu} pools need Kubernetes "
            f"{'.'.join(map(str, RACK_MIN_MINOR))} or newer (DRA GA; GKE {floor} or newer), not {version}"
        )


def spec_root(path: str) -> str:
    """`platform` from `platform.nodePools[1]`."""
    return path.split(".nodePools[", 1)[0]


def dra_driver_values() -> dict[str, Any]:
    """The DRA driver's values on GKE (chart dra-driver-nvidia-gpu 0.4.1): `nvidiaDriverRoot`, as GKE's COS
    nodes keep the driver in /home/kubernetes/bin/nvidia (values.yaml: "For driver installed directly on a
    host, a value of `/` is used"; the driver root is where the host's driver tree lives, here GKE's;
    cluster-toolkit@v1.95.0 modules/management/kubectl-apply/main.tf `install_nvidia_dra_driver` sets the same
    path). The kubelet plugin's placement is the neutral one (components/incluster/dra_driver.py: the rack
    pools' nodes by their pool label, tolerating each of their taints, GKE's Arm taint included, which
    NodePoolInfo.taints carries), so nothing of it is GKE's own."""
    return {"nvidiaDriverRoot": GKE_NVIDIA_DIR}
