"""NVIDIA GPU Operator: device plugin, DCGM exporter, MIG manager and, where the node image lacks them,
the driver and container toolkit; values per cloud profile.

- eks: the AL2023/Bottlerocket NVIDIA AMIs ship the driver and toolkit, so the operator must not.
- gke: NVIDIA's GKE path. The GCP layer disables GKE's driver install and device plugin on GPU pools
  (gpu_driver_version INSTALLATION_DISABLED, label gke-no-default-nvidia-gpu-device-plugin=true); here
  Google's COS driver installer puts the driver in /home/kubernetes/bin/nvidia, the operator points at it
  and uses CDI, and a ResourceQuota lets system-critical priority classes run outside kube-system.
- kubernetes: the operator installs the driver unless `gpuOperator.driver: false`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.bundle import GPU_TAINT_KEY, ClusterBundle
from components.charts import CHARTS
from components.kubernetes.dashboards.metrics import dcgm_exporter_csv
from components.kubernetes.gpu_health import HEALTH_TAINT_KEYS, GpuHealth, GpuHealthArgs
from components.kubernetes.names import GPU_OPERATOR_NAMESPACE, GPU_OPERATOR_RELEASE, GPU_OPERATOR_TIMEOUT_S
from components.spec import GpuOperatorSpec, PlatformSpec

GKE_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
# The exporter's metrics list. dcgm-exporter reads it from this ConfigMap (key `metrics`) through the API
# when DCGM_EXPORTER_CONFIGMAP_DATA=<namespace>:<name> is set (4.5.3-4.8.2 counters.readConfigMap); the
# operator then mounts the exporter's token (dcgmExporterEnvRequiresAPIAccess), and its Role lets the exporter
# get configmaps in the operator namespace (assets/state-dcgm-exporter/0200_role.yaml). The chart's
# `dcgmExporter.config` would do the same through a file but is only documented in a comment of its
# defaults, which the values-key check rejects.
DCGM_METRICS_CONFIG = "trainplane-dcgm-metrics"
DCGM_CONFIGMAP_ENV = "DCGM_EXPORTER_CONFIGMAP_DATA"
# node-feature-discovery worker tolerations of the chart (values node-feature-discovery.worker.tolerations):
# a value replaces the list, so it is repeated before the platform's own.
NFD_DEFAULT_TOLERATIONS = [
    {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Equal",
        "value": "",
        "effect": "NoSchedule",
    },
    {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
]
# Target relabelings of the DCGM ServiceMonitor, after prometheus-operator's own (v0.93 promcfg.go
# generateServiceMonitorConfig sets namespace, service, pod, container, job, endpoint from the target first).
DCGM_RELABELINGS = [
    # The GPU's node under the name kube-state-metrics uses, so rules can join DCGM with kube_node_*.
    {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"},
    # With honorLabels the exporter's own pod/namespace/container survive; the target's (the exporter pod)
    # must go, or a GPU no pod holds would carry the exporter as its "workload".
    {"action": "labeldrop", "regex": "pod|namespace|container"},
]
# GKE admits pods of these priority classes only in kube-system unless a quota in the namespace names them.
SYSTEM_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
TIME_SLICING_CONFIG = "time-slicing"


def _version_at_least(version: str, minimum: tuple[int, int]) -> bool:
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= minimum


def device_plugin_config(op: GpuOperatorSpec) -> dict[str, str] | None:
    """The device plugin's config file (one entry of its ConfigMap), or None for the chart default."""
    if op.time_slicing is None:
        return None
    config = {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {
            "timeSlicing": {
                # Keep the resource name nvidia.com/gpu so quotas and Kueue flavors need no change.
                "renameByDefault": False,
                "resources": [{"name": "nvidia.com/gpu", "replicas": op.time_slicing.replicas}],
            }
        },
    }
    return {TIME_SLICING_CONFIG: yaml.safe_dump(config, sort_keys=False)}


def gpu_operator_values(spec: PlatformSpec, bundle: ClusterBundle) -> dict[str, Any]:
    """Helm values of the gpu-operator chart for this platform; every key exists in the chart defaults."""
    op = spec.gpu_operator
    profile = bundle.profile.name
    # The operator's DaemonSets must land on every GPU node, whatever extra taints a pool carries, and on a
    # node the health controller holds back (its diagnostic needs the validated GPU stack; DCGM must keep
    # reporting on a quarantined node).
    taint_keys = {GPU_TAINT_KEY} | {t.key for p in bundle.node_pools if p.gpu for t in p.taints}
    if spec.gpu_health.enabled:
        taint_keys |= set(HEALTH_TAINT_KEYS)
    tolerations = [{"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in sorted(taint_keys)]
    values: dict[str, Any] = {
        "daemonsets": {"tolerations": tolerations},
        # node-feature-discovery's worker finds the GPUs the operator's labels (and so its operands) key on.
        "node-feature-discovery": {
            "worker": {
                "tolerations": NFD_DEFAULT_TOLERATIONS + [t for t in tolerations if t["key"] != GPU_TAINT_KEY]
            }
        },
        "mig": {"strategy": op.mig.strategy},
        "dcgmExporter": dcgm_exporter_values(),
    }
    if op.mig.profile:
        # The MIG manager applies its default config to every GPU node without an nvidia.com/mig.config
        # label, so one profile for the platform needs no per-node labelling.
        values["migManager"] = {"config": {"default": op.mig.profile}}
    plugin = device_plugin_config(op)
    if plugin is not None:
        values["devicePlugin"] = {
            "config": {
                "create": True,
                "name": "device-plugin-config",
                "default": TIME_SLICING_CONFIG,
                "data": plugin,
            }
        }
    if profile == "eks":
        values["driver"] = {"enabled": False}
        values["toolkit"] = {"enabled": False}
    elif profile == "gke":
        values["driver"] = {"enabled": False}
        values["hostPaths"] = {"driverInstallDir": GKE_NVIDIA_DIR}
        toolkit: dict[str, Any] = {"installDir": GKE_NVIDIA_DIR}
        if _version_at_least(spec.cluster.kubernetes_version, (1, 33)):
            # GKE 1.33+ containerd keeps its config in drop-in files the toolkit must read, not the CLI.
            toolkit["env"] = [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]
        values["toolkit"] = toolkit
        # chart v26.7.0 has no cdi.default any more: CDI is the default runtime mode once enabled.
        values["cdi"] = {"enabled": True}
    else:
        values["driver"] = {"enabled": op.driver if op.driver is not None else True}
    return values


def dcgm_exporter_values() -> dict[str, Any]:
    """DCGM exporter: the health fields the alerts need, and its ServiceMonitor keeping the GPU's workload.

    Prometheus selects every ServiceMonitor (serviceMonitorSelectorNilUsesHelmValues=false). dcgm-exporter
    labels a GPU's series with the pod, namespace and container that hold it; honorLabels keeps those
    instead of renaming them exported_* (gpu-operator v26.7.0 applyServiceMonitorCustomEdits copies
    honorLabels and relabelings onto the ServiceMonitor's endpoint).
    """
    return {
        "enabled": True,
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            "honorLabels": True,
            "relabelings": DCGM_RELABELINGS,
        },
        "env": [{"name": DCGM_CONFIGMAP_ENV, "value": f"{GPU_OPERATOR_NAMESPACE}:{DCGM_METRICS_CONFIG}"}],
    }


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


@dataclass(frozen=True)
class GpuOperatorArgs:
    spec: PlatformSpec
    bundle: ClusterBundle
    # kube-prometheus-stack's release: it installs the monitoring.coreos.com CRDs, and the operator creates
    # the DCGM ServiceMonitor only if they exist when it reconciles (controllers/object_controls.go
    # ServiceMonitor -> crdExists), so the operator release waits for it.
    prometheus: pulumi.Resource | None = None


class GpuOperator(pulumi.ComponentResource):
    """The GPU operator release in its own namespace, plus the GKE driver installer and quota."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:GpuOperator", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ns = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={
                "name": GPU_OPERATOR_NAMESPACE,
                # The operator's DaemonSets are privileged (driver, toolkit, device plugin).
                "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
            },
            opts=child,
        )
        waits: list[pulumi.Resource] = list(args.bundle.ready)
        if args.prometheus is not None:
            waits.append(args.prometheus)
        if args.bundle.profile.name == "gke":
            quota = k8s.core.v1.ResourceQuota(
                f"{name}-system-priority",
                metadata={"name": "gpu-operator-system-priority", "namespace": ns.metadata["name"]},
                spec=gke_system_quota(),
                opts=child,
            )
            # The installer runs on its own; the operator's validator waits for the driver it writes.
            k8s.apps.v1.DaemonSet(
                f"{name}-cos-driver-installer",
                metadata={
                    "name": "nvidia-driver-installer",
                    "namespace": "kube-system",
                    "labels": {"k8s-app": "nvidia-driver-installer"},
                },
                spec=cos_driver_installer_spec(),
                opts=child,
            )
            # Without the quota GKE rejects the operator's system-node-critical pods.
            waits.append(quota)
        # The exporter exits when its metrics ConfigMap is missing: it exists before the release.
        waits.append(
            k8s.core.v1.ConfigMap(
                f"{name}-dcgm-metrics",
                metadata={"name": DCGM_METRICS_CONFIG, "namespace": ns.metadata["name"]},
                data={"metrics": dcgm_exporter_csv()},
                opts=child,
            )
        )
        chart = CHARTS["gpu-operator"]
        version = args.spec.gpu_operator.version or chart.version
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=GPU_OPERATOR_RELEASE,
            namespace=ns.metadata["name"],
            **{**chart.release_args(), "version": version},
            values=gpu_operator_values(args.spec, args.bundle),
            timeout=GPU_OPERATOR_TIMEOUT_S,
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits),
        )
        self.health = (
            GpuHealth(
                f"{name}-health",
                GpuHealthArgs(args.spec, args.bundle, ns.metadata["name"], operator=self.release),
                child,
            )
            if args.spec.gpu_health.enabled
            else None
        )
        self.register_outputs({"release": self.release.name})
