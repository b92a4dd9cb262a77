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
from dataclasses import dataclass, field
from typing import Any

from components.bundle import PodFabric, SystemObject

# The host directory GKE's (and Google's COS installer's) NVIDIA driver lives in; the NCCL plugin
# installers copy the plugin and NCCL next to it (nccl-tcpxo-installer.yaml.tftpl@v1.95.0:
# `cp -r /var/lib/tcpxo/lib64/. /usr/local/nvidia/lib64` with /home/kubernetes/bin mounted at /usr/local).
NVIDIA_HOST_DIR = "/home/kubernetes/bin/nvidia"
NVIDIA_LIB_DIR = "/usr/local/nvidia/lib64"
# The fabric networks' address block when the stack names none: gke-a3-megagpu.yaml@v1.95.0, module
# `gpunets` (modules/network/multivpc): global_ip_address_range 192.168.0.0/16, subnetwork_cidr_suffix 20.
DEFAULT_FABRIC_CIDR = ipaddress.IPv4Network("192.168.0.0/16")
FABRIC_SUBNET_PREFIX = 20
# Pod network names: gke-a3-megagpu.yaml@v1.95.0 gke_cluster `k8s_network_names: {gvnic_prefix: vpc,
# gvnic_start_index: 1}`, the names the interface annotations of the upstream workloads use (vpc1..vpcN).
POD_NETWORK_PREFIX = "vpc"
DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
# The NRI device injector gives the named container these devices (nri_device_injector/README.md).
DEVICES_ANNOTATION = "devices.gke.io/container.{container}"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"


@dataclass(frozen=True, kw_only=True)
class GkeFabric:
    """One GPUDirect flavour: its networks, cluster objects and pod wiring."""

    kind: str  # the key of components.fabrics floors: tcpx, tcpxo, rdma
    machine_types: tuple[str, ...]
    # Extra gVNIC VPCs (one subnet each) the GPU NICs sit in, and their MTU.
    networks: int
    mtu: int
    device_mode: str  # GKENetworkParamSet.spec.deviceMode
    # GKE versions per minor below which GPUDirect is not supported (gpu_direct.tf@v1.95.0
    # major_minor_version_acceptable_map); minors newer than the map's are fine, older ones are refused.
    min_versions: Mapping[str, str]
    sidecar: Mapping[str, Any] | None = None
    sidecar_devices: tuple[str, ...] = ()
    volumes: tuple[Mapping[str, Any], ...] = ()
    volume_mounts: tuple[Mapping[str, Any], ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    # DaemonSets (name -> pod spec without affinity/tolerations) the fabric's nodes need.
    installers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def minimum_minor(self) -> str:
        return min(self.min_versions, key=lambda v: tuple(int(x) for x in v.split(".")))


def _hostpaths(**paths: str) -> tuple[dict[str, Any], ...]:
    return tuple({"name": n.replace("_", "-"), "hostPath": {"path": p}} for n, p in paths.items())


def _gpu_devices(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    return (*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl", "/dev/nvidia-uvm", *extra)


def _installer(image: str, lib: str, pre: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """nccl-tcpx(o)-installer pod spec (nccl-tcpxo-installer.yaml.tftpl@v1.95.0, nccl-tcpx-installer.yaml
    @204a57c): copy the plugin and NCCL into the driver's host dir, then sleep in a pause container."""
    chmod = "chmod 755 /scripts/container_entry.sh\n" if lib == "tcpxo" else ""  # TCPXO's manifest only
    script = (
        f"set -ex\n{chmod}/scripts/container_entry.sh install --install-nccl\n"
        f'mkdir -p {NVIDIA_LIB_DIR}\ncp -r /var/lib/{lib}/lib64/. {NVIDIA_LIB_DIR}\necho "installation finishes"\n'
    )
    return {
        "priorityClassName": "system-node-critical",
        "hostNetwork": True,
        "hostPID": True,
        "volumes": list(_hostpaths(var_lib="/var/lib", library_dir_host="/home/kubernetes/bin")),
        "initContainers": [
            *(pre or []),
            {
                "name": f"nccl-{lib}-installer",
                "image": image,
                "resources": {"requests": {"cpu": "150m"}},
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {"name": "var-lib", "mountPath": "/var/lib"},
                    {"name": "library-dir-host", "mountPath": "/usr/local"},
                ],
                "command": ["/bin/sh", "-c"],
                "args": [script],
            },
        ],
        "containers": [{"name": "pause", "image": PAUSE_IMAGE}],
    }


# TCPXO's pre-installation step (nccl-tcpxo-installer.yaml.tftpl@v1.95.0): open the host firewall, load
# the dmabuf import helper and expose the NICs' aperture devices. Upstream runs it from an untagged
# `ubuntu` image through nsenter into the host; pinned here to a tag (only nsenter is used from it).
_TCPXO_PRE = (
    "/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT && modprobe import-helper\n"
    "sudo mkdir -p /dev/aperture_devices\n"
    "while IFS= read -r line; do\n"
    "  BDF=$( echo \"$line\" | awk '{print $1}' );\n"
    '  target_aperture_path="/dev/aperture_devices/$BDF"\n'
    '  host_aperture_device=$(readlink -f "/sys/bus/pci/devices/$BDF");\n'
    "  sudo mkdir -p $target_aperture_path;\n"
    "  sudo umount -R $target_aperture_path;\n"
    "  sudo mount --bind $host_aperture_device $target_aperture_path;\n"
    "done < <(lspci -nn -D | grep '1ae0:0084')\n"
    "if [ -d /dev/aperture_devices ]; then\n"
    "    chmod -R a+r /dev/aperture_devices/\n"
    "    chmod a+rw /dev/aperture_devices/*/resource*\n"
    "fi\n"
)
# NRI device injector (gke-a3-megagpu/nri-device-injector.yaml@v1.95.0, image pinned by digest there).
NRI_INJECTOR: dict[str, Any] = {
    "priorityClassName": "system-node-critical",
    "hostNetwork": True,
    "hostPID": True,
    "containers": [
        {
            "name": "device-injector",
            "image": "gcr.io/gke-release/nri-device-injector@sha256:"
            "6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970",
            "resources": {"requests": {"cpu": "150m"}},
            "securityContext": {"privileged": True},
            "volumeMounts": [
                {"name": "dev", "mountPath": "/dev"},
                {"name": "nri", "mountPath": "/var/run/nri"},
            ],
        }
    ],
    "volumes": list(_hostpaths(nri="/var/run/nri", dev="/dev")),
}

# TCPXO (a3-megagpu-8g): 8 GPU NICs. Images: gpudirect-tcpxo/README.md@992db81 "Jan 9, 2026" release
# (installer v1.0.15, RxDM v1.0.21), the same pair gke-a3-megagpu.yaml (nccl_tcpxo_version) and
# nccl-test-latest.yaml pin at v1.95.0.
TCPXO = GkeFabric(
    kind="tcpxo",
    machine_types=("a3-megagpu-8g",),
    networks=8,  # gke-a3-megagpu.yaml@v1.95.0 gpunets network_count: 8 (gpu_direct.tf min_additional_networks)
    mtu=8244,  # gke-a3-megagpu.yaml@v1.95.0 gpunets mtu: 8244
    device_mode="NetDevice",  # gke-cluster/main.tf@v1.95.0: NetDevice unless the NIC type is RDMA
    min_versions={
        "1.28": "1.28.15-gke.3163000",
        "1.29": "1.29.15-gke.2467000",
        "1.30": "1.30.14-gke.1922000",
        "1.31": "1.31.14-gke.1243000",
        "1.32": "1.32.11-gke.1174000",
    },
    # enable-tcpxo-in-workload.py@v1.95.0 add_tcpxo_daemon_container, run as a native sidecar so the job's
    # pod completes when the trainer exits.
    sidecar={
        "name": "tcpxo-daemon",
        "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
        "restartPolicy": "Always",
        "command": ["/bin/sh", "-c"],
        "args": [
            "set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
            "/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8 --uid= --alsologtostderr\n"
        ],
        "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
        "volumeMounts": [
            {"name": "nvidia-install-dir-host", "mountPath": "/usr/local/nvidia"},
            {"name": "sys", "mountPath": "/hostsysfs"},
            {"name": "proc-sys", "mountPath": "/hostprocsysfs"},
        ],
        "env": [{"name": "LD_LIBRARY_PATH", "value": NVIDIA_LIB_DIR}],
    },
    sidecar_devices=_gpu_devices(("/dev/dmabuf_import_helper",)),
    # enable-tcpxo-in-workload.py@v1.95.0 add_volumes / update_gpu_containers; the trainer also mounts the
    # driver dir at /usr/local/nvidia (GKE's device plugin does that itself; the GPU operator's does not).
    volumes=_hostpaths(
        nvidia_install_dir_host=NVIDIA_HOST_DIR,
        sys="/sys",
        proc_sys="/proc/sys",
        aperture_devices="/dev/aperture_devices",
    ),
    volume_mounts=(
        {"name": "aperture-devices", "mountPath": "/dev/aperture_devices"},
        {"name": "nvidia-install-dir-host", "mountPath": "/usr/local/nvidia"},
    ),
    # gpudirect-tcpxo/README.md@992db81 "Jan 9, 2026" NCCL configs, with the lib dir replaced by the
    # installer's destination as the README says; LD_LIBRARY_PATH and NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY from
    # enable-tcpxo-in-workload.py@v1.95.0. Left out: CUDA_VISIBLE_DEVICES (the device plugin numbers a pod's
    # GPUs itself) and NCCL_DEBUG* (the job's choice).
    env={
        "LD_LIBRARY_PATH": NVIDIA_LIB_DIR,
        "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices",
        "NCCL_FASTRAK_CTRL_DEV": "eth0",
        "NCCL_FASTRAK_IFNAME": "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_CROSS_NIC": "0",
        "NCCL_PROTO": "Simple,LL128",
        "NCCL_MIN_NCHANNELS": "4",
        "NCCL_TUNER_PLUGIN": "libnccl-tuner.so",
        "NCCL_TUNER_CONFIG_PATH": f"{NVIDIA_LIB_DIR}/a3plus_tuner_config.textproto",
        "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": f"{NVIDIA_LIB_DIR}/a3plus_guest_config.textproto",
        "NCCL_NVLSTREE_MAX_CHUNKSIZE": "131072",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_P2P_PCI_CHUNKSIZE": "524288",
        "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
        "NCCL_FASTRAK_NUM_FLOWS": "2",
        "NCCL_FASTRAK_USE_SNAP": "1",
        "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS": "600000",
        "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL": "0",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING": "0",
        "NCCL_FASTRAK_USE_LLCM": "1",
        "NCCL_NVLS_ENABLE": "1",
    },
    installers={
        "nccl-tcpxo-installer": _installer(
            "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
            "tcpxo",
            pre=[
                {
                    "name": "pre-installation",
                    "image": "ubuntu:24.04",
                    "securityContext": {"privileged": True},
                    "command": ["nsenter", "-at", "1", "--", "sh", "-c", _TCPXO_PRE],
                }
            ],
        ),
        "device-injector": NRI_INJECTOR,
    },
)

# TCPX (a3-highgpu-8g): 4 GPU NICs. gke-a3-highgpu.yaml@v1.95.0 (gpunets: 4 networks, MTU 8244;
# nccl_tcpx_version v3.1.9) and gpu_direct.tf@v1.95.0 (rxdm v2.0.12 "matching nccl-tcpx-installer v3.1.9").
TCPX = GkeFabric(
    kind="tcpx",
    machine_types=("a3-highgpu-8g",),
    networks=4,
    mtu=8244,
    device_mode="NetDevice",
    min_versions={
        "1.27": "1.27.16-gke.2874000",
        "1.28": "1.28.15-gke.3163000",
        "1.29": "1.29.15-gke.2467000",
    },
    # gke-a3-highgpu/nccl-test.yaml@v1.95.0 tcpx-daemon (as a native sidecar here).
    sidecar={
        "name": "tcpx-daemon",
        "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
        "restartPolicy": "Always",
        "command": [
            "/tcpgpudmarxd/build/app/tcpgpudmarxd",
            "--gpu_nic_preset",
            "a3vm",
            "--gpu_shmem_type",
            "fd",
            "--uds_path",
            "/run/tcpx",
            "--setup_param",
            "--verbose 128 2 0 ",
        ],
        "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
        "volumeMounts": [
            {"name": "libraries", "mountPath": NVIDIA_LIB_DIR},
            {"name": "tcpx-socket", "mountPath": "/run/tcpx"},
            {"name": "sys", "mountPath": "/hostsysfs"},
            {"name": "proc-sys", "mountPath": "/hostprocsysfs"},
        ],
        "env": [{"name": "LD_LIBRARY_PATH", "value": NVIDIA_LIB_DIR}],
    },
    sidecar_devices=_gpu_devices(),
    # enable-tcpx-in-workload.py@v1.95.0 add_volumes / update_gpu_containers (the socket dir is pod-private).
    volumes=(
        {"name": "libraries", "hostPath": {"path": f"{NVIDIA_HOST_DIR}/lib64"}},
        {"name": "tcpx-socket", "emptyDir": {}},
        *_hostpaths(sys="/sys", proc_sys="/proc/sys"),
    ),
    volume_mounts=(
        {"name": "tcpx-socket", "mountPath": "/tmp"},
        {"name": "libraries", "mountPath": NVIDIA_LIB_DIR},
    ),
    # gpudirect-tcpx/nccl-config.yaml@204a57c run-nccl.sh (the -x settings of its mpirun, NCCL_DEBUG* left out).
    env={
        "LD_LIBRARY_PATH": NVIDIA_LIB_DIR,
        "NCCL_GPUDIRECTTCPX_FORCE_ACK": "0",
        "NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP": "1000",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_P2P_PCI_CHUNKSIZE": "524288",
        "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
        "NCCL_GPUDIRECTTCPX_TX_BINDINGS": "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
        "NCCL_GPUDIRECTTCPX_RX_BINDINGS": "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
        "NCCL_NSOCKS_PERTHREAD": "4",
        "NCCL_SOCKET_NTHREADS": "1",
        "NCCL_MAX_NCHANNELS": "8",
        "NCCL_MIN_NCHANNELS": "8",
        "NCCL_BUFFSIZE": "4194304",
        "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": "eth1,eth2,eth3,eth4",
        "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
        "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
        "NCCL_CROSS_NIC": "0",
        "NCCL_ALGO": "Ring",
        "NCCL_PROTO": "Simple",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_P2P_PXN_LEVEL": "0",
    },
    installers={
        # gpudirect-tcpx/nccl-tcpx-installer.yaml@204a57c (the commit gpu_direct.tf@v1.95.0 pins).
        "nccl-tcpx-installer": _installer(
            "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9", "tcpx"
        ),
        "device-injector": NRI_INJECTOR,
    },
)

FABRICS: tuple[GkeFabric, ...] = (TCPX, TCPXO)
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
    """The pod's interfaces: eth0 on the cluster's network, eth1..N on the fabric networks."""
    nics = [{"interfaceName": "eth0", "network": "default"}]
    return nics + [
        {"interfaceName": f"eth{i + 1}", "network": pod_network(i)} for i in range(fabric.networks)
    ]


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
        volumes=fabric.volumes,
        volume_mounts=fabric.volume_mounts,
        sidecars=(fabric.sidecar,) if fabric.sidecar is not None else (),
    )


def network_objects(count: int, cluster: str, device_mode: str = "NetDevice") -> tuple[SystemObject, ...]:
    """GKENetworkParamSet + Network per fabric network (gke-cluster/templates/*.yaml.tftpl@v1.95.0)."""
    objects: list[SystemObject] = []
    for i, (vpc, subnet) in enumerate(fabric_network_names(cluster, count)):
        name = pod_network(i)
        objects.append(
            SystemObject(
                resource_name=f"params-{name}",
                api_version="networking.gke.io/v1",
                kind="GKENetworkParamSet",
                metadata={"name": name},
                spec={"vpc": vpc, "vpcSubnet": subnet, "deviceMode": device_mode},
            )
        )
        objects.append(
            SystemObject(
                resource_name=f"network-{name}",
                api_version="networking.gke.io/v1",
                kind="Network",
                metadata={"name": name},
                spec={
                    "type": "Device",
                    "parametersRef": {
                        "group": "networking.gke.io",
                        "kind": "GKENetworkParamSet",
                        "name": name,
                    },
                },
            )
        )
    return tuple(objects)


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
    return network_objects(gvnic_network_count(fabrics), cluster) + installers
