"""GPUDirect on GKE, chosen from the machine type: what each fabric needs, as plain data (no pulumi).

One table row per fabric (`FABRICS`): how many extra VPCs the GPU NICs sit in and their MTU, the
GKE multi-network objects naming them, the NCCL plugin installer (and NRI device injector) DaemonSets,
and what a training pod on the pool carries (interface annotations, the RxDM sidecar, volumes, mounts,
NCCL environment). The GCP components (network, cluster, node pool, profile) and verify read it.

Reference for every value: Google's cluster-toolkit at tag v1.95.0 (`examples/gke-a3-megagpu/*`,
`modules/compute/gke-node-pool/gpu_direct.tf` and `gpu-direct-workload/scripts/enable-tcpx*-in-workload.py`,
`modules/network/multivpc`, `modules/scheduler/gke-cluster/templates/*`) and
GoogleCloudPlatform/container-engine-accelerators (no release tags cover these files; cited by commit:
`gpudirect-tcpxo/README.md`@992db81 "Jan 9, 2026" release, `gpudirect-tcpx/*`@204a57c, the commit
cluster-toolkit v1.95.0 pins for TCPX).

Example:
    >>> fabric_of("a3-megagpu-8g").kind, fabric_of("a3-megagpu-8g").networks
    ('tcpxo', 8)
    >>> fabric_of("a3-highgpu-4g") is None  # smaller A3 High shapes have no GPU NICs
    True
    >>> fabric_network_names("mega", 2)
    [('mega-gpunet-0', 'mega-gpunet-0-subnet'), ('mega-gpunet-1', 'mega-gpunet-1-subnet')]
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from typing import Any

from components.bundle import PodFabric, SystemObject
from components.gcp.fabric_table import (
    DEFAULT_FABRIC_CIDR,
    FABRIC_SUBNET_PREFIX,
    FABRICS,
    NVIDIA_HOST_DIR,
    NVIDIA_LIB_DIR,
    RDMA,
    TCPX,
    TCPXO,
    GkeFabric,
)

__all__ = [
    "DEFAULT_FABRIC_CIDR",
    "FABRICS",
    "NVIDIA_HOST_DIR",
    "NVIDIA_LIB_DIR",
    "RDMA",
    "TCPX",
    "TCPXO",
    "GkeFabric",
]

# Pod network names: gke-a3-megagpu.yaml@v1.95.0 gke_cluster `k8s_network_names: {gvnic_prefix: vpc,
# gvnic_start_index: 1}`, the names the interface annotations of the upstream workloads use (vpc1..vpcN).
POD_NETWORK_PREFIX = "vpc"
DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
# The NRI device injector gives the named container these devices (nri_device_injector/README.md).
DEVICES_ANNOTATION = "devices.gke.io/container.{container}"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

_BY_MACHINE = {m: f for f in FABRICS for m in f.machine_types}


def fabric_of(machine_type: str | None) -> GkeFabric | None:
    """The GPUDirect fabric a GKE machine type comes with; None for machines without GPU NICs."""
    return _BY_MACHINE.get(machine_type or "")


def fabric_network_names(cluster: str, count: int) -> list[tuple[str, str]]:
    """(VPC, subnet) names of a platform's fabric networks (modules/network/multivpc@v1.95.0 naming:
    `<prefix>-<i>` and `<prefix>-<i>-subnet` with prefix `<deployment>-gpunet`)."""
    return [(f"{cluster}-gpunet-{i}", f"{cluster}-gpunet-{i}-subnet") for i in range(count)]


def fabric_subnets(cidr: ipaddress.IPv4Network, count: int) -> list[ipaddress.IPv4Network]:
    """The subnet ranges of `count` fabric networks: consecutive /20s of `cidr` (multivpc's cidrsubnet)."""
    return list(cidr.subnets(new_prefix=FABRIC_SUBNET_PREFIX))[:count]


def fabric_capacity(cidr: ipaddress.IPv4Network) -> int:
    """How many fabric subnets `cidr` holds."""
    return 2 ** (FABRIC_SUBNET_PREFIX - cidr.prefixlen) if cidr.prefixlen <= FABRIC_SUBNET_PREFIX else 0


def pod_network(index: int) -> str:
    """The GKE Network object (and pod network name) of fabric network `index` (0-based)."""
    return f"{POD_NETWORK_PREFIX}{index + 1}"


def interfaces(fabric: GkeFabric) -> list[dict[str, str]]:
    """The pod's interfaces: eth0 on the cluster's network, then eth1..N on the gVNIC fabric networks (TCPX,
    TCPXO), or for RDMA only the RDMA NICs, after the node's gVNIC ones (gpudirect-rdma/nccl-test.yaml)."""
    nics = [{"interfaceName": "eth0", "network": "default"}]
    if fabric.rdma_subnets:
        first = fabric.networks + 1
        return nics + [
            {"interfaceName": f"eth{first + i}", "network": rdma_network(i)}
            for i in range(fabric.rdma_subnets)
        ]
    return nics + [
        {"interfaceName": f"eth{i + 1}", "network": pod_network(i)} for i in range(fabric.networks)
    ]


def rdma_network(index: int) -> str:
    """The GKE Network of RDMA subnet `index` (gke-cluster k8s_network_names default rdma-<i>@v1.95.0)."""
    return f"rdma-{index}"


def rdma_network_names(cluster: str, count: int) -> tuple[str, list[str]]:
    """The RoCE VPC and its subnets (gke-a3-ultragpu.yaml@v1.95.0: <deployment>-rdma-net, -rdma-sub-<i>)."""
    return f"{cluster}-rdma-net", [f"{cluster}-rdma-sub-{i}" for i in range(count)]


def rdma_subnet_ranges(cidr: ipaddress.IPv4Network, count: int) -> list[ipaddress.IPv4Network]:
    """RDMA subnets: the upper half of the fabric block split in `count` (gVNIC /20s use the lower half)."""
    upper = list(cidr.subnets(prefixlen_diff=1))[1]
    bits = max(count - 1, 0).bit_length()
    return list(upper.subnets(prefixlen_diff=bits))[:count]


def pod_fabric(fabric: GkeFabric) -> PodFabric:
    """What a training pod on a pool of this fabric carries besides `fabric.env`."""
    annotations = {
        DEFAULT_INTERFACE_ANNOTATION: "eth0",
        INTERFACES_ANNOTATION: json.dumps(interfaces(fabric)),
    }
    if fabric.sidecar is not None and fabric.sidecar_devices:
        key = DEVICES_ANNOTATION.format(container=fabric.sidecar["name"])
        annotations[key] = "".join(f"- path: {d}\n" for d in fabric.sidecar_devices)
    return PodFabric(
        kind=fabric.kind,
        annotations=annotations,
        volumes=tuple(dict(v) for v in fabric.volumes),
        volume_mounts=tuple(dict(m) for m in fabric.volume_mounts),
        sidecars=(dict(fabric.sidecar),) if fabric.sidecar is not None else (),
    )


def _device_network(name: str, vpc: str, subnet: str, device_mode: str) -> tuple[SystemObject, SystemObject]:
    """The GKENetworkParamSet of one fabric subnet and the Device Network pods name it by."""
    ref = {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name}
    return (
        SystemObject(
            resource_name=f"params-{name}",
            api_version="networking.gke.io/v1",
            kind="GKENetworkParamSet",
            metadata={"name": name},
            spec={"vpc": vpc, "vpcSubnet": subnet, "deviceMode": device_mode},
        ),
        SystemObject(
            resource_name=f"network-{name}",
            api_version="networking.gke.io/v1",
            kind="Network",
            metadata={"name": name},
            spec={"type": "Device", "parametersRef": ref},
        ),
    )


def network_objects(count: int, cluster: str, device_mode: str = "NetDevice") -> tuple[SystemObject, ...]:
    """GKENetworkParamSet + Network per fabric network (gke-cluster/templates/*.yaml.tftpl@v1.95.0)."""
    return tuple(
        obj
        for i, (vpc, subnet) in enumerate(fabric_network_names(cluster, count))
        for obj in _device_network(pod_network(i), vpc, subnet, device_mode)
    )


def installer_object(name: str, pod: Mapping[str, Any], machine_types: list[str]) -> SystemObject:
    """A fabric DaemonSet in kube-system, only on the fabric's machine types, tolerating every taint (the
    GPU taint and a pool's own) as the upstream manifests do. Affinity by machine type, not accelerator:
    a3-highgpu-4g has the same GPU as a3-highgpu-8g but no GPU NICs."""
    labels = {"k8s-app": name}
    term = {"matchExpressions": [{"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": machine_types}]}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    return SystemObject(
        resource_name=name,
        api_version="apps/v1",
        kind="DaemonSet",
        metadata={"name": name, "namespace": "kube-system", "labels": labels},
        spec={
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {**pod, "affinity": affinity, "tolerations": [{"operator": "Exists"}]},
            },
        },
    )


def rdma_subnet_count(fabrics: tuple[GkeFabric, ...]) -> int:
    return max((f.rdma_subnets for f in fabrics), default=0)


def rdma_objects(count: int, cluster: str) -> tuple[SystemObject, ...]:
    """GKENetworkParamSet (deviceMode RDMA) + Network per RDMA subnet (gke-cluster/main.tf@v1.95.0)."""
    vpc, subnets = rdma_network_names(cluster, count)
    return tuple(
        obj
        for i, subnet in enumerate(subnets)
        for obj in _device_network(rdma_network(i), vpc, subnet, "RDMA")
    )


def gvnic_network_count(fabrics: tuple[GkeFabric, ...]) -> int:
    """How many gVNIC fabric networks a platform needs: TCPX and TCPXO pools share them (same MTU and
    device mode; a3-highgpu-8g uses the first 4 of a3-megagpu-8g's 8)."""
    return max((f.networks for f in fabrics), default=0)


def cluster_objects(fabrics: tuple[GkeFabric, ...], cluster: str) -> tuple[SystemObject, ...]:
    """Every object the platform's fabrics need in the cluster: the network objects once, and each
    DaemonSet once, on every machine type that needs it (the NRI injector serves TCPX and TCPXO)."""
    machines: dict[str, list[str]] = {}
    pods: dict[str, Mapping[str, Any]] = {}
    for f in fabrics:
        for name, pod in f.installers.items():
            pods[name] = pod
            machines.setdefault(name, [])
            machines[name] += [m for m in f.machine_types if m not in machines[name]]
    installers = tuple(installer_object(n, pods[n], machines[n]) for n in pods)
    networks = network_objects(gvnic_network_count(fabrics), cluster)
    return networks + rdma_objects(rdma_subnet_count(fabrics), cluster) + installers
