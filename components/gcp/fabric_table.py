"""The GPUDirect fabrics of GKE machine types, as data: one row per fabric (see components/gcp/fabric.py
for what is built from them and for the sources' list; each value cites file@tag or file@commit).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer.contract import ENV_SCRIPT

# The host directory GKE's (and Google's COS installer's) NVIDIA driver lives in; the NCCL plugin
# installers copy the plugin and NCCL next to it (nccl-tcpxo-installer.yaml.tftpl@v1.95.0:
# `cp -r /var/lib/tcpxo/lib64/. /usr/local/nvidia/lib64` with /home/kubernetes/bin mounted at /usr/local).
NVIDIA_HOST_DIR = "/home/kubernetes/bin/nvidia"
NVIDIA_LIB_DIR = "/usr/local/nvidia/lib64"
# The fabric networks' address block when the stack names none: gke-a3-megagpu.yaml@v1.95.0, module
# `gpunets` (modules/network/multivpc): global_ip_address_range 192.168.0.0/16, subnetwork_cidr_suffix 20.
DEFAULT_FABRIC_CIDR = ipaddress.IPv4Network("192.168.0.0/16")
FABRIC_SUBNET_PREFIX = 20
PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"


@dataclass(frozen=True, kw_only=True)
class GkeFabric:
    """One GPUDirect flavour: its networks, cluster objects and pod wiring."""

    kind: str  # the key of components.nccl_floors floors: tcpx, tcpxo, rdma
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
    # RDMA: subnets of one RoCE VPC (one NIC each) besides the gVNIC networks, and that VPC's MTU.
    rdma_subnets: int = 0
    rdma_mtu: int | None = None

    @property
    def minimum_minor(self) -> str | None:
        versions = [tuple(int(x) for x in v.split(".")) for v in self.min_versions]
        return ".".join(map(str, min(versions))) if versions else None


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
    # pod completes when the trainer exits. Its arguments are the open-source RxDM's (from image v1.0.20):
    # only `--num_hops=2`; `--uid=`, `--alsologtostderr` and `--num_nics=` are ABSL_RETIRED_FLAGs there
    # (google/nccl-plugin-gpudirect-tcpxo@04815d1: README.md "Notes for Existing Users",
    # buffer_mgmt_daemon/fastrak_gpumem_manager.cc, main_cloud.cc), as container-engine-accelerators@992db81
    # gpudirect-tcpxo/nccl-test-latest.yaml runs it.
    sidecar={
        "name": "tcpxo-daemon",
        "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
        "restartPolicy": "Always",
        "command": ["/bin/sh", "-c"],
        "args": [
            "set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
            "/fts/entrypoint_rxdm_container.sh --num_hops=2\n"
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
    # gke-a3-highgpu/nccl-test.yaml@v1.95.0 tcpx-daemon (as a native sidecar here). Every flag is one the TCPX
    # RxDM defines (google/tcpgpudmarxd@a6e09b3 app/tcpgpudmarxd.cu ABSL_FLAGs); `--setup_param` is its own
    # default, handed to `setup.sh` through a shell, so it goes unquoted.
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

# RDMA (a3-ultragpu-8g, a4-highgpu-8g): one extra gVNIC network and 8 RDMA NICs in one VPC with the zone's
# RoCE network profile (gke-a3-ultragpu.yaml@v1.95.0: gke-a3-ultra-net-1, gke-a3-ultra-rdma-net with
# subnetworks_template count 8; both MTU 8896, the vpc and gpu-rdma-vpc modules' default). RoCE networks
# take no firewall rules (modules/network/vpc precondition, "rdma-network-profiles"). The NCCL gIB plugin's
# settings come from `source /usr/local/gib/scripts/set_nccl_env.sh` in the workload (nccl-jobset-example.yaml);
# only the variables set outside that script are here.
RDMA = GkeFabric(
    kind="rdma",
    machine_types=("a3-ultragpu-8g", "a4-highgpu-8g"),
    networks=1,
    mtu=8896,
    device_mode="NetDevice",
    min_versions={},
    rdma_subnets=8,
    rdma_mtu=8896,
    volumes=_hostpaths(gib="/home/kubernetes/bin/gib", nvidia=NVIDIA_HOST_DIR),
    volume_mounts=(
        {"name": "gib", "mountPath": "/usr/local/gib"},
        {"name": "nvidia", "mountPath": "/usr/local/nvidia"},
    ),
    # The rest of gIB's NCCL settings: the launcher sources the installer's script (trainer/envscript.py).
    env={
        "LD_LIBRARY_PATH": NVIDIA_LIB_DIR,
        "NCCL_NET": "gIB",
        ENV_SCRIPT: "/usr/local/gib/scripts/set_nccl_env.sh",
    },
    installers={
        # gke-a3-ultragpu/nccl-installer.yaml.tftpl@v1.95.0 with version v1.1.0 and 8 GPUs (alpine pinned).
        "nccl-rdma-installer": {
            "priorityClassName": "system-node-critical",
            "hostNetwork": True,
            "hostPID": True,
            "volumes": [
                {
                    "name": "library-dir-host",
                    "hostPath": {"path": f"{NVIDIA_HOST_DIR}/lib64", "type": "DirectoryOrCreate"},
                },
                {"name": "gib", "hostPath": {"path": "/home/kubernetes/bin/gib"}},
            ],
            "initContainers": [
                {
                    "name": "disable-log-martian",
                    "image": "alpine:3.20",
                    "command": ["/bin/sh"],
                    "securityContext": {"privileged": True},
                    "args": [
                        "-c",
                        "".join(f"sysctl -w net.ipv4.conf.gpu{i}rdma0.log_martians=0\n" for i in range(8)),
                    ],
                },
                {
                    "name": "nccl-rdma-installer",
                    "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.0",
                    "resources": {"requests": {"cpu": "150m"}},
                    "securityContext": {"privileged": True},
                    "volumeMounts": [
                        {
                            "name": "library-dir-host",
                            "mountPath": "/usr/local/home/kubernetes/bin/nvidia/lib64",
                        },
                        {"name": "gib", "mountPath": "/usr/local/home/kubernetes/bin/gib"},
                    ],
                    "command": ["/bin/sh", "-c"],
                    "args": [
                        "set -ex\n/scripts/container_entry.sh install --install-nccl\n"
                        "cp -r /var/lib/gib/lib64/. /usr/local/home/kubernetes/bin/nvidia/lib64\n"
                        "cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib\n"
                        'echo "installation finishes"\n'
                    ],
                },
            ],
            "containers": [{"name": "pause", "image": PAUSE_IMAGE}],
        }
    },
)

FABRICS: tuple[GkeFabric, ...] = (TCPX, TCPXO, RDMA)
