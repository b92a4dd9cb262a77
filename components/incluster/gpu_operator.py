"""NVIDIA GPU Operator: device plugin, DCGM exporter, MIG manager and, where the node image lacks them,
the driver and container toolkit.

What differs per cloud comes from the bundle's CloudProfile, never from a cloud name here: the values
that decide driver, toolkit and CDI (`gpu_operator_values`, merged over the cloud-neutral ones) and the
objects the GPU stack needs beside the release (`system_objects`, e.g. GKE's COS driver installer and a
quota for system priority classes). See components/aws/profile.py, components/gcp/profile.py and
components/kubernetes/cluster.py for what each cloud sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.bundle import GPU_TAINT_KEY, ClusterBundle, SystemObject, gpu_taint_tolerations
from components.charts import CHARTS
from components.incluster.dashboards.metrics import dcgm_exporter_csv
from components.incluster.gpu_health import HEALTH_TAINT_KEYS, GpuHealth, GpuHealthArgs, IdleTeam
from components.incluster.names import GPU_OPERATOR_NAMESPACE, GPU_OPERATOR_RELEASE, GPU_OPERATOR_TIMEOUT_S
from components.spec import AgentImagesSpec, GpuHealthSpec, GpuOperatorSpec

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
TIME_SLICING_CONFIG = "time-slicing"


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


def gpu_operator_values(op: GpuOperatorSpec, health: GpuHealthSpec, bundle: ClusterBundle) -> dict[str, Any]:
    """Helm values of the gpu-operator chart for this platform; every key exists in the chart defaults."""
    # The operator's DaemonSets must land on every GPU node, whatever extra taints a pool carries, and on a
    # node the health controller holds back (its diagnostic needs the validated GPU stack; DCGM must keep
    # reporting on a quarantined node).
    # Each pool taint is tolerated with its own effect: a NoExecute taint (docs/configuration.md allows it)
    # is not matched by a NoSchedule toleration, and the DaemonSets would never run on that pool.
    ours = [GPU_TAINT_KEY, *(HEALTH_TAINT_KEYS if health.enabled else ())]
    tolerations = gpu_taint_tolerations(bundle.node_pools, ours)
    values: dict[str, Any] = {
        "daemonsets": {"tolerations": tolerations},
        # node-feature-discovery's worker finds the GPUs the operator's labels (and so its operands) key on.
        "node-feature-discovery": {
            "worker": {
                "tolerations": NFD_DEFAULT_TOLERATIONS
                + [t for t in tolerations if t not in NFD_DEFAULT_TOLERATIONS]
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
    if any(p.rack is not None for p in bundle.node_pools):
        # GPU Feature Discovery labels each rack node with its NVLink clique (nvidia.com/gpu.clique), which
        # ComputeDomains and clique placement need (dra-driver-nvidia-gpu@v0.4.1 docs/prerequisites.md);
        # on by default in the chart (gpu-operator@v26.7.0 values.yaml `gfd.enabled`), said out loud here.
        values["gfd"] = {"enabled": True}
    # The cloud's own values (driver, toolkit, CDI) win over the cloud-neutral ones.
    return deep_merge(values, bundle.profile.gpu_operator_values)


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over` merged in: mappings merge key by key, anything else in `over` replaces."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


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


# The typed classes a cloud profile's system objects may be (typed, so URNs and schemas stay exact).
SYSTEM_OBJECT_KINDS: dict[tuple[str, str], Any] = {
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ResourceQuota"): k8s.core.v1.ResourceQuota,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
}


def system_object(
    resource_name: str, obj: SystemObject, ns: k8s.core.v1.Namespace, opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    """Register one of the profile's objects; without a namespace it goes in the operator's."""
    cls = SYSTEM_OBJECT_KINDS.get((obj.api_version, obj.kind))
    if cls is None:
        raise ValueError(f"system object {obj.resource_name}: {obj.api_version}/{obj.kind} is not supported")
    metadata: dict[str, Any] = {**obj.metadata}
    metadata.setdefault("namespace", ns.metadata["name"])
    body: dict[str, Any] = {"data": dict(obj.spec)} if obj.kind == "ConfigMap" else {"spec": dict(obj.spec)}
    return cls(resource_name, metadata=metadata, **body, opts=opts)


@dataclass(frozen=True, kw_only=True)
class GpuOperatorArgs:
    gpu_operator: GpuOperatorSpec
    gpu_health: GpuHealthSpec
    bundle: ClusterBundle
    # kube-prometheus-stack's release: it installs the monitoring.coreos.com CRDs, and the operator creates
    # the DCGM ServiceMonitor only if they exist when it reconciles (controllers/object_controls.go
    # ServiceMonitor -> crdExists), so the operator release waits for it.
    prometheus: pulumi.Resource | None = None
    # The namespaces of the teams whose straggler nodes are quarantined (teams[].stragglers: quarantine).
    straggler_quarantine: tuple[str, ...] = ()
    # The teams with an idle policy (gpu_health.IdleTeam).
    idle_teams: tuple[IdleTeam, ...] = ()
    # The health controller's and diagnostic's image overrides (`platform.images`).
    images: AgentImagesSpec = field(default_factory=AgentImagesSpec)


@dataclass(frozen=True, kw_only=True)
class GpuOperatorResources:
    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release
    # The DCGM exporter's metrics list.
    metrics_config: k8s.core.v1.ConfigMap
    # The cloud profile's objects (e.g. GKE's COS driver installer and system-priority quota).
    system_objects: tuple[pulumi.CustomResource, ...]
    # GPU node health (controller, diagnostic); None when turned off.
    health: GpuHealth | None


class GpuOperator(pulumi.ComponentResource):
    """The GPU operator release in its own namespace, plus what the cloud profile adds beside it."""

    release: k8s.helm.v3.Release
    resources: GpuOperatorResources

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:GpuOperator", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ns = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={
                "name": GPU_OPERATOR_NAMESPACE,
                # The operator's DaemonSets are privileged (driver, toolkit, device plugin).
                "labels": {"pod-security.kubernetes.io/enforce": "privileged", **args.bundle.owner_labels},
            },
            opts=child,
        )
        waits: list[pulumi.Resource] = list(args.bundle.ready)
        if args.prometheus is not None:
            waits.append(args.prometheus)
        # What the cloud's GPU stack needs beside the release (driver installers, quotas...).
        system = [
            system_object(f"{name}-{o.resource_name}", o, ns, child)
            for o in args.bundle.profile.system_objects
        ]
        waits += [
            res for res, o in zip(system, args.bundle.profile.system_objects, strict=True) if o.gates_operator
        ]
        # The exporter exits when its metrics ConfigMap is missing: it exists before the release.
        metrics = k8s.core.v1.ConfigMap(
            f"{name}-dcgm-metrics",
            metadata={"name": DCGM_METRICS_CONFIG, "namespace": ns.metadata["name"]},
            data={"metrics": dcgm_exporter_csv()},
            opts=child,
        )
        waits.append(metrics)
        chart = CHARTS["gpu-operator"]
        version = args.gpu_operator.version or chart.version
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=GPU_OPERATOR_RELEASE,
            namespace=ns.metadata["name"],
            **{**chart.release_args(), "version": version},
            values=gpu_operator_values(args.gpu_operator, args.gpu_health, args.bundle),
            timeout=GPU_OPERATOR_TIMEOUT_S,
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits),
        )
        self.health = (
            GpuHealth(
                f"{name}-health",
                GpuHealthArgs(
                    health=args.gpu_health,
                    gpu_operator=args.gpu_operator,
                    bundle=args.bundle,
                    namespace=ns.metadata["name"],
                    operator=self.release,
                    straggler_quarantine=args.straggler_quarantine,
                    idle_teams=args.idle_teams,
                    images=args.images,
                ),
                child,
            )
            if args.gpu_health.enabled
            else None
        )
        self.resources = GpuOperatorResources(
            namespace=ns,
            release=self.release,
            metrics_config=metrics,
            system_objects=tuple(system),
            health=self.health,
        )
        self.register_outputs({"release": self.release.name})
