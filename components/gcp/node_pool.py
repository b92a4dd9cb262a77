"""NodePool: one GKE node pool from one `nodePools` entry (the GPU pools and the CPU system pool).

GPU pools follow NVIDIA's GKE guide for the GPU operator, which the in-cluster layer installs:
- `gpu_driver_installation_config.gpu_driver_version = INSTALLATION_DISABLED`: GKE does not install the
  driver; Google's COS driver-installer DaemonSet does, into /home/kubernetes/bin/nvidia, and the operator
  runs with its own driver disabled. (Changing this value replaces the pool.)
- label `gke-no-default-nvidia-gpu-device-plugin=true`: GKE's own device plugin stays off so the
  operator's device plugin, DCGM exporter and MIG manager own the GPUs.
- taint `nvidia.com/gpu=present:NoSchedule` declared in the pool: GKE adds the same taint to GPU nodes by
  itself; declaring it keeps `pulumi up` free of diffs (a taint diff would replace the pool).

Autoscaling uses `total_min_node_count`/`total_max_node_count`: `minNodes`/`maxNodes` mean whole-pool
counts on every cloud (an AWS node group's min/max), and team GPU quotas are checked against them; per-zone
limits would multiply them by the number of zones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.bundle import NodePoolInfo, TaintInfo, gpu_taint, pool_labels
from components.catalog import MachineShape
from components.gcp.capacity import (
    auto_repair,
    capacity_info,
    capacity_node_config,
    capacity_node_labels,
    capacity_pool_args,
    location_policy,
)
from components.gcp.fabric import GkeFabric, fabric_of, pod_fabric
from components.gcp.naming import GcpPlacement
from components.gcp.rack import (
    ARM_TAINT,
    DRANET_LABEL,
    PLACEMENT_TYPE,
    RACK_TOPOLOGY_LEVELS,
    WORKLOAD_POLICY_TYPE,
    accelerator_topology,
    dranet_network_config,
    is_rack,
    rack_domain,
    workload_policy_name,
)
from components.outputs import NodeReplacement
from components.spec import NodePoolSpec

# Turns GKE's default NVIDIA device plugin off on a GPU pool (NVIDIA GPU operator on GKE guide).
NO_DEFAULT_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
# Labels GKE itself puts on nodes.
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GPU_DRIVER_VERSION = "INSTALLATION_DISABLED"
# Kubernetes taint effects in GKE's API spelling.
GKE_TAINT_EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}
# Machine families whose boot disk must be Hyperdisk (no Persistent Disk support).
HYPERDISK_ONLY_PREFIXES = ("a3-ultragpu-", "a4-", "a4x-")  # a4x: gke-a4x.yaml@v1.95.0 disk_type
DEFAULT_GPU_DISK_GIB = 200  # training images (CUDA, PyTorch) are large
DEFAULT_CPU_DISK_GIB = 50  # docs/configuration.md: 200 (GPU), 50 (CPU)
# The type every GKE pool was registered as before all clouds' pools shared `NodePool`.
OLD_POOL_TYPE = pulumi.Alias(type_="trainplane:gcp:GpuNodePool")


@dataclass(frozen=True, kw_only=True)
class NodePoolArgs:
    placement: GcpPlacement
    pool: NodePoolSpec
    # The platform's zones, for a pool that names none.
    zones: Sequence[str] = ()
    # Whether the platform has Managed Lustre (whose CSI driver mounts on Secure Boot nodes only on GPUs).
    lustre: bool = False
    # The cluster's id (projects/<p>/locations/<l>/clusters/<n>) and location.
    cluster_id: pulumi.Input[str]
    location: str
    node_service_account: pulumi.Input[str]
    node_tag: str
    # What must exist before nodes boot (the node service account's role binding).
    depends_on: tuple[pulumi.Resource, ...] = ()
    # (network, subnetwork) of the platform's GPUDirect fabric networks, for pools whose machine has GPU NICs.
    fabric_networks: tuple[tuple[pulumi.Input[str], pulumi.Input[str]], ...] = ()
    # (network, subnetwork) of the RDMA NICs, for RDMA machines (a3-ultragpu, a4).
    rdma_networks: tuple[tuple[pulumi.Input[str], pulumi.Input[str]], ...] = ()


def pool_shape(pool: NodePoolSpec) -> MachineShape | None:
    from components.backends import backend  # the registry, which imports this package's backend module

    return backend("gcp").machine_of(pool)


def pool_zones(pool: NodePoolSpec, zones: Sequence[str]) -> list[str]:
    """The zones a pool's nodes run in: its own, else the platform's (compact pools have exactly one)."""
    return list(pool.zones or zones)


def secure_boot(lustre: bool, pool: NodePoolSpec, is_gpu: bool) -> bool:
    """Whether the pool's nodes boot with Secure Boot.

    GKE's Managed Lustre CSI driver mounts on Secure Boot nodes only when they are GPU machines (Managed
    Lustre docs, "Connect to an existing instance from GKE", Limitations: "Node pools with Secure boot
    enabled are supported only if the machine type of the node pool is a GPU machine type"). So Secure
    Boot stays on GPU pools and on pools no team pod can land on (a NoSchedule/NoExecute taint of their
    own), and goes off on the untainted CPU pools of a platform with Managed Lustre, where team pods (data
    preparation, evaluation) mount the team's Lustre claim.
    """
    if is_gpu or not lustre:
        return True
    return any(t.effect in ("NoSchedule", "NoExecute") for t in pool.taints)


def gke_taints(taints: tuple[TaintInfo, ...]) -> list[dict[str, str]]:
    return [{"key": t.key, "value": t.value, "effect": GKE_TAINT_EFFECTS[t.effect]} for t in taints]


def pool_fabric(machine_type: str, is_gpu: bool) -> GkeFabric | None:
    """The GPUDirect fabric of a GPU pool's machine type (None for CPU pools and smaller GPU shapes)."""
    return fabric_of(machine_type) if is_gpu else None


def fabric_network_config(
    fabric: GkeFabric | None,
    networks: tuple[tuple[pulumi.Input[str], pulumi.Input[str]], ...],
    rdma: tuple[tuple[pulumi.Input[str], pulumi.Input[str]], ...] = (),
) -> dict | None:
    """The pool's extra NICs: one per gVNIC fabric network, then one per RDMA subnet
    (gke-node-pool/main.tf@v1.95.0 network_config, in gke-a3-ultragpu.yaml's order)."""
    if fabric is None:
        return None
    assert len(networks) >= fabric.networks, "GcpCloud creates the fabric networks of every pool"
    assert len(rdma) >= fabric.rdma_subnets, "GcpCloud creates the RDMA subnets of every RDMA pool"
    nics = [*networks[: fabric.networks], *rdma[: fabric.rdma_subnets]]
    return {"additional_node_network_configs": [{"network": n, "subnetwork": s} for n, s in nics]}


# Node labels GKE puts on GPU nodes from the VMs' physical topology, broadest first: the Topology every
# cluster-toolkit GPU blueprint gives Kueue (examples/gke-a3-megagpu, gke-a3-highgpu, gke-a3-ultragpu, gke-a4
# kueue-configuration.yaml.tftpl@v1.95.0).
GKE_TOPOLOGY_LEVELS = (
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "kubernetes.io/hostname",
)
TOPOLOGY_MACHINES = ("a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g")


def topology_levels(machine_type: str, pool: NodePoolSpec, is_gpu: bool) -> tuple[str, ...]:
    """The pool's topology labels for Kueue TAS: only on the machine types Google's blueprints use them
    for, and only with compact placement, where the VMs are placed with a known physical topology; a node
    without the labels would never be picked by a topology-aware flavor, so other pools get none."""
    if is_gpu and machine_type in TOPOLOGY_MACHINES and pool.placement == "compact":
        return GKE_TOPOLOGY_LEVELS
    return ()


@dataclass(frozen=True, kw_only=True)
class NodePoolResources:
    node_pool: gcp.container.NodePool


class NodePool(pulumi.ComponentResource):
    """A GKE node pool; GPU pools carry their accelerators, driver mode, taint and labels.

    Registered as `trainplane:gcp:NodePool`, the node pool type of every cloud; it was
    `trainplane:gcp:GpuNodePool` (for CPU pools too), kept as an alias so deployed pools stay.
    """

    node_pool: gcp.container.NodePool
    info: NodePoolInfo
    resources: NodePoolResources

    def __init__(self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[OLD_POOL_TYPE]))
        super().__init__("trainplane:gcp:NodePool", name, None, opts)
        place, pool = args.placement, args.pool
        shape = pool_shape(pool)
        machine_type = shape.name if shape is not None else pool.machine_type
        assert machine_type, f"nodePools {pool.name}: no machine type (spec checks should have caught this)"
        zones = pool_zones(pool, args.zones)
        is_gpu = pool.is_gpu and shape is not None and shape.accelerator_type is not None
        fabric = pool_fabric(machine_type, is_gpu)
        rack = is_gpu and is_rack(shape)

        taints: tuple[TaintInfo, ...] = (gpu_taint(),) if is_gpu else ()
        taints += tuple(
            TaintInfo(key=t.key, value=t.value, effect=t.effect)
            for t in pool.taints
            if t.key != gpu_taint().key
        )
        labels = pool_labels(pool)
        node_labels = dict(labels)
        if is_gpu:
            node_labels[NO_DEFAULT_DEVICE_PLUGIN_LABEL] = "true"
        if rack:
            node_labels[DRANET_LABEL] = "true"  # GKE managed DRANET (components/gcp/rack.py)
        node_labels.update(capacity_node_labels(pool))

        node_config: dict = {
            "machine_type": machine_type,
            "image_type": "COS_CONTAINERD",  # the COS driver installer and the Lustre CSI driver need COS
            "disk_type": "hyperdisk-balanced"
            if machine_type.startswith(HYPERDISK_ONLY_PREFIXES)
            else "pd-balanced",
            "disk_size_gb": pool.disk_size_gib or (DEFAULT_GPU_DISK_GIB if is_gpu else DEFAULT_CPU_DISK_GIB),
            "service_account": args.node_service_account,
            "oauth_scopes": [
                "https://www.googleapis.com/auth/cloud-platform"
            ],  # IAM roles decide, not scopes
            "labels": node_labels,
            "taints": gke_taints(taints),
            "tags": [args.node_tag],
            "resource_labels": place.labels,
            "metadata": {"disable-legacy-endpoints": "true"},
            # Pods see the GKE metadata server (Workload Identity), never the node's own credentials.
            "workload_metadata_config": {"mode": "GKE_METADATA"},
            "shielded_instance_config": {
                "enable_secure_boot": secure_boot(args.lustre, pool, is_gpu),
                "enable_integrity_monitoring": True,
            },
            # spot, a reservation, flex-start (components/gcp/capacity.py)
            **capacity_node_config(pool, place.project),
        }
        if is_gpu:
            assert shape is not None
            node_config["guest_accelerators"] = [
                {
                    "type": shape.accelerator_type,
                    "count": shape.gpus,
                    "gpu_driver_installation_config": {"gpu_driver_version": GPU_DRIVER_VERSION},
                }
            ]
            node_config["gvnic"] = {"enabled": True}  # A3 needs gVNIC; all GPU families support it
        local_ssds = pool.local_ssd_count or (shape.local_ssd_count if shape is not None else 0)
        if local_ssds:
            # The machine's local SSDs become the node's ephemeral storage (image layers, emptyDir scratch).
            node_config["ephemeral_storage_local_ssd_config"] = {"local_ssd_count": local_ssds}

        placement_policy: dict | None = {"type": "COMPACT"} if pool.placement == "compact" else None
        network_config = fabric_network_config(fabric, args.fabric_networks, args.rdma_networks)
        if rack:
            assert shape is not None
            placement_policy = {
                "type": PLACEMENT_TYPE,
                "policy_name": self._workload_policy(name, args, shape),
            }
            network_config = dranet_network_config()
        # initial_node_count is per zone; the autoscaler then keeps the whole pool within min..max.
        initial = math.ceil(pool.min_nodes / max(len(zones), 1)) if pool.min_nodes else 0
        self.node_pool = gcp.container.NodePool(
            f"{name}-pool",
            name=pool.name,
            project=place.project,
            cluster=args.cluster_id,
            location=args.location,
            node_locations=zones or None,
            initial_node_count=initial,
            autoscaling={
                "total_min_node_count": pool.min_nodes,
                "total_max_node_count": pool.effective_max_nodes,
                # Spot, reservations, DWS: take capacity in whichever zone has it; on-demand: keep zones even.
                "location_policy": location_policy(pool),
            },
            # Always on: GKE refuses auto_upgrade false on a cluster in a release channel (every trainplane
            # cluster is); a TCPX platform's nodes are held by the cluster's maintenance exclusion instead
            # (components/gcp/maintenance.py; gke-a3-highgpu.yaml@v1.95.0 keeps auto_upgrade: true too).
            management={"auto_repair": auto_repair(pool), "auto_upgrade": True},
            # GPU capacity is scarce: upgrade one node at a time without asking for a surge node.
            upgrade_settings=(
                {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1}
                if is_gpu
                else {"strategy": "SURGE", "max_surge": 1, "max_unavailable": 0}
            ),
            placement_policy=placement_policy,
            network_config=network_config,
            node_config=node_config,
            **capacity_pool_args(pool),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(args.depends_on),
                # The autoscaler owns the node count; a changed initial count would replace the pool.
                ignore_changes=["node_count", "initial_node_count"],
            ),
        )

        info_labels = dict(labels)
        if is_gpu:
            assert shape is not None
            info_labels[GKE_ACCELERATOR_LABEL] = shape.accelerator_type or ""
        capacity = capacity_info(pool)
        info_labels.update(capacity["labels"])
        self.info = NodePoolInfo(
            name=pool.name,
            gpu=pool.gpu if is_gpu else None,
            gpus_per_node=shape.gpus if is_gpu and shape is not None else 0,
            capacity=pool.capacity,
            min_nodes=pool.min_nodes,
            max_nodes=pool.effective_max_nodes,
            labels=info_labels,
            # GKE's own taints for the capacity (queued provisioning) come after the declared ones.
            # GKE taints Arm nodes itself (rack machines are Grace, arm64): jobs and DaemonSets tolerate it.
            taints=taints + capacity["taints"] + ((ARM_TAINT,) if rack else ()),
            machine_types=(machine_type,),
            node_vcpus=shape.vcpus if shape is not None else None,
            node_memory_gib=shape.memory_gib if shape is not None else None,
            reservation=capacity["reservation"],
            provisioning_class=capacity["provisioning_class"],
            workload_annotations=capacity["workload_annotations"],
            fabric=pod_fabric(fabric) if fabric is not None else None,
            pod_env=dict(fabric.env) if fabric is not None else {},
            topology_levels=RACK_TOPOLOGY_LEVELS if rack else topology_levels(machine_type, pool, is_gpu),
            replacement=node_replacement(pool),
            rack=rack_domain(shape) if rack and shape is not None else None,
        )
        self.resources = NodePoolResources(node_pool=self.node_pool)
        self.register_outputs({"name": self.node_pool.name})

    def _workload_policy(self, name: str, args: NodePoolArgs, shape: MachineShape) -> pulumi.Output[str]:
        """The rack pool's Compute Engine workload policy (HIGH_THROUGHPUT, accelerator topology 1x72), in
        the pool's region (pulumi_gcp NodePoolPlacementPolicy.policy_name: same project and region)."""
        place = args.placement
        policy = gcp.compute.ResourcePolicy(
            f"{name}-workload-policy",
            name=workload_policy_name(place.cluster_name, args.pool.name),
            project=place.project,
            region=place.region,
            description=f"trainplane NVL72 topology of node pool {args.pool.name}",
            workload_policy={
                "type": WORKLOAD_POLICY_TYPE,
                "accelerator_topology": accelerator_topology(shape),
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        return policy.name


# GKE's cluster autoscaler (every pool here has `autoscaling`) removes a node unneeded for 10 minutes, the
# upstream default it is built from (kubernetes/autoscaler@cluster-autoscaler-1.33.1 config/const.go
# DefaultScaleDownUnneededTime; GKE Standard does not expose the flag): a quarantined node, once empty, too.
GKE_SCALE_DOWN_UNNEEDED_MINUTES = 10
# GKE auto-repair (GKE docs, "Auto-repair nodes", repair criteria): a node NotReady or silent for about 10
# minutes, or out of boot disk for about 30. No GPU condition: a quarantined node that is Ready stays.
AUTO_REPAIR_CONDITIONS = {"Ready": 10}


def node_replacement(pool: NodePoolSpec) -> NodeReplacement:
    """How a quarantined node of the pool is replaced: by the autoscaler, and auto-repair where it is on."""
    return NodeReplacement(
        autoscaler_unneeded_minutes=GKE_SCALE_DOWN_UNNEEDED_MINUTES,
        repair_conditions=dict(AUTO_REPAIR_CONDITIONS) if auto_repair(pool) else {},
    )


# The names this module had before every cloud's pool was a `NodePool`.
GpuNodePool = NodePool
GpuNodePoolArgs = NodePoolArgs
