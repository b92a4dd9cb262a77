"""What the in-cluster layer must know about GKE: the cloud profile and the StorageClass GKE provides.

Kept apart from the resource modules so that code which only needs these facts (verify, tests) does not
import pulumi_gcp.

GPU operator on GKE (NVIDIA's GKE guide): the GCP layer disables GKE's driver install and device plugin
on GPU pools (gpu_driver_version INSTALLATION_DISABLED, label gke-no-default-nvidia-gpu-device-plugin=true);
Google's COS driver installer (a DaemonSet this profile adds) puts the driver in /home/kubernetes/bin/nvidia,
the operator points at it and uses CDI, and a ResourceQuota lets system-critical priority classes run
outside kube-system. Spot VMs: GKE gives non-system pods about 15-30 s after the preemption notice.
"""

from __future__ import annotations

from typing import Any

from components.bundle import CloudProfile, NetworkEndpoint, SystemObject
from components.gcp.rack import dra_driver_values

GKE_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
# GKE admits pods of these priority classes only in kube-system unless a quota in the namespace names them.
SYSTEM_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
WORKLOAD_IDENTITY_ANNOTATION = "iam.gke.io/gcp-service-account"

# Workload Identity: pods get Google credentials from the GKE metadata server at 169.254.169.254, port
# 80. GKE's Workload Identity docs ("Limitations": network policies) require egress to
# 169.254.169.254/32 port 80 on Dataplane V2 clusters, which trainplane always creates
# (components/gcp/cluster.py, ADVANCED_DATAPATH). The other addresses that page lists (127.0.0.1:988
# before 1.21.0-gke.1000, 169.254.169.252:988 on the iptables dataplane, where traffic is DNATed to the
# node's metadata server before policy applies) do not apply to Dataplane V2 on GKE 1.33+.
GKE_METADATA_SERVER = NetworkEndpoint("169.254.169.254/32", 80)


def gke_system_quota() -> dict[str, Any]:
    return {
        "hard": {"pods": "100"},
        "scopeSelector": {
            "matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": list(SYSTEM_PRIORITY_CLASSES)}
            ]
        },
    }


def cos_driver_installer_spec() -> dict[str, Any]:
    """Google's COS driver installer (container-engine-accelerators, preloaded image variant).

    It runs on GKE GPU nodes whose driver GKE does not install (no gke-gpu-driver-version label) and
    writes the driver to GKE_NVIDIA_DIR, where the operator's toolkit and device plugin look for it.
    """
    labels = {"k8s-app": "nvidia-driver-installer"}
    host = {
        "dev": "/dev",
        "nvidia-install-dir-host": GKE_NVIDIA_DIR,
        "vulkan-icd-mount": f"{GKE_NVIDIA_DIR}/vulkan/icd.d",
        "root-mount": "/",
        "cos-tools": "/var/lib/cos-tools",
    }
    env = {
        "NVIDIA_INSTALL_DIR_HOST": GKE_NVIDIA_DIR,
        "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
        "VULKAN_ICD_DIR_HOST": f"{GKE_NVIDIA_DIR}/vulkan/icd.d",
        "VULKAN_ICD_DIR_CONTAINER": "/etc/vulkan/icd.d",
        "ROOT_MOUNT_DIR": "/root",
        "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
        "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
    }
    mounts = {
        "nvidia-install-dir-host": "/usr/local/nvidia",
        "vulkan-icd-mount": "/etc/vulkan/icd.d",
        "dev": "/dev",
        "root-mount": "/root",
        "cos-tools": "/build/cos-tools",
    }
    return {
        "selector": {"matchLabels": labels},
        "updateStrategy": {"type": "RollingUpdate"},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "priorityClassName": "system-node-critical",
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"},
                                        {
                                            "key": "cloud.google.com/gke-gpu-driver-version",
                                            "operator": "DoesNotExist",
                                        },
                                    ]
                                }
                            ]
                        }
                    }
                },
                "tolerations": [{"operator": "Exists"}],
                "hostNetwork": True,
                "hostPID": True,
                "volumes": [{"name": n, "hostPath": {"path": p}} for n, p in host.items()],
                "initContainers": [
                    {
                        # The installer image is preloaded on GKE COS nodes in the version matching the node.
                        "name": "nvidia-driver-installer",
                        "image": "cos-nvidia-installer:fixed",
                        "imagePullPolicy": "Never",
                        "resources": {"requests": {"cpu": "150m"}},
                        "securityContext": {"privileged": True},
                        "env": [{"name": k, "value": v} for k, v in env.items()],
                        "volumeMounts": [{"name": n, "mountPath": p} for n, p in mounts.items()],
                    }
                ],
                "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
            },
        },
    }


def _version_at_least(version: str, minimum: tuple[int, int]) -> bool:
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= minimum


def gpu_operator_values(kubernetes_version: str) -> dict[str, Any]:
    """The operator's values on GKE: the driver comes from the COS installer, the toolkit goes to its dir."""
    toolkit: dict[str, Any] = {"installDir": GKE_NVIDIA_DIR}
    if _version_at_least(kubernetes_version, (1, 33)):
        # GKE 1.33+ containerd keeps its config in drop-in files the toolkit must read, not the CLI.
        toolkit["env"] = [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]
    return {
        "driver": {"enabled": False},
        "hostPaths": {"driverInstallDir": GKE_NVIDIA_DIR},
        "toolkit": toolkit,
        # chart v26.7.0 has no cdi.default any more: CDI is the default runtime mode once enabled.
        "cdi": {"enabled": True},
    }


SYSTEM_OBJECTS = (
    # Without the quota GKE rejects the operator's system-node-critical pods: the release waits for it.
    SystemObject(
        resource_name="system-priority",
        api_version="v1",
        kind="ResourceQuota",
        metadata={"name": "gpu-operator-system-priority"},
        spec=gke_system_quota(),
        gates_operator=True,
    ),
    # The installer runs on its own; the operator's validator waits for the driver it writes.
    SystemObject(
        resource_name="cos-driver-installer",
        api_version="apps/v1",
        kind="DaemonSet",
        metadata={
            "name": "nvidia-driver-installer",
            "namespace": "kube-system",
            "labels": {"k8s-app": "nvidia-driver-installer"},
        },
        spec=cos_driver_installer_spec(),
    ),
)


def gke_profile(kubernetes_version: str, fabric_objects: tuple[SystemObject, ...] = ()) -> CloudProfile:
    """GKE's profile; `fabric_objects` are the GPUDirect objects of the platform's pools (fabric.py)."""
    return CloudProfile(
        name="gke",
        object_store="gs",
        # Loki keeps its chunks in the platform's GCS logs bucket (loki chart 18.11.0 values.yaml:
        # `loki.storage.type: gcs`; the bucket's location needs no setting).
        loki_storage={"type": "gcs"},
        identity_annotation=WORKLOAD_IDENTITY_ANNOTATION,
        identity_endpoints=(GKE_METADATA_SERVER,),
        gpu_operator_values=gpu_operator_values(kubernetes_version),
        system_objects=SYSTEM_OBJECTS,
        fabric_objects=fabric_objects,
        # GKE gives non-system pods of a spot VM about 15-30 s by default (GKE docs, "Spot VMs").
        preemption_grace_seconds=30,
        # The NVIDIA DRA driver on GKE's COS nodes, for A4X / A4X Max pools (components/gcp/rack.py).
        dra_driver_values=dra_driver_values(),
    )


# The block-volume StorageClass GKE installs with the Compute Engine Persistent Disk CSI driver
# (addons_config.gce_persistent_disk_csi_driver_config, on in every trainplane cluster): `standard-rwo`,
# provisioner pd.csi.storage.gke.io, disk type pd-balanced, volumeBindingMode WaitForFirstConsumer
# (GKE docs, "Using the Compute Engine persistent disk CSI Driver"). Prometheus and Loki run on the CPU
# pools (GPU nodes are tainted), whose machine types take Persistent Disk; the Hyperdisk-only families
# (a3-ultragpu, a4) are GPU pools, where no platform volume goes.
GKE_STORAGE_CLASS = "standard-rwo"
