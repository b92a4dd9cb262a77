"""GPU node health: keep jobs off nodes whose GPUs are broken (`gpuHealth`, on by default).

What NVIDIA's stack and the clouds already do, and is used as is:
- the device plugin (gpu-operator v26.7.0 ships k8s-device-plugin v0.20.0) marks a GPU unhealthy on a
  critical XID, so the node's allocatable `nvidia.com/gpu` drops below its capacity;
- DCGM (the exporter, through Prometheus) reports each GPU's last XID;
- on EKS the node monitoring agent turns GPU faults into the condition AcceleratedHardwareReady=False
  and node repair replaces the node about 10 minutes later (EKS node-health docs); the AWS layer
  installs the agent.
What none of them does, and is added here:
- quarantine of such a node (a node condition alone does not stop the scheduler) and of a node that has
  fewer GPUs than its machine type: the NoSchedule taint, a cordon, the node condition, an Event, and its
  GPU pods evicted (quarantine.py), by one small kopf operator Deployment (gpu_health_operator.py, deciding
  with gpu_health_agent.assess);
- `dcgmi diag` once at node start (the EKS agent leaves active diagnostics off unless DCGM_DIAG_LEVEL is
  set; GKE runs none): a DaemonSet whose init container runs it in NVIDIA's DCGM image and reports through
  its termination message; the node carries a startup taint until the result is in.
NVIDIA NVSentinel does all of this and more (health monitors, fault quarantine that cordons and taints,
drain, remediation), but it needs a MongoDB or PostgreSQL datastore, cert-manager and DCGM in standalone
mode; no reference defaults of its chart are kept here to check values against. It is the path to take
when automated drain and remediation are wanted; its taints would then replace these.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import (
    MONITORING_NAMESPACE,
    POOL_LABEL,
    ClusterBundle,
    NodePoolInfo,
    gpu_taint_tolerations,
)
from components.incluster.gpu_diag_script import diag_script
from components.incluster.gpu_health_controller import (
    IdleTeam,
    controller_pod,
    controller_pod_monitor,
    controller_rules,
    idle_config,
)
from components.incluster.job_pod import CONTAINER as TRAINER_CONTAINER
from components.incluster.names import JOB_LABEL, PROMETHEUS_RELEASE
from components.spec import AgentImagesSpec, GpuHealthSpec, GpuOperatorSpec
from components.spec.images import controller_image
from contract.recovery import ALERT_STRAGGLER, CONTROLLER_NAME, HEALTH_TAINTS, XID_QUERY

CONTROLLER = CONTROLLER_NAME
DIAG = "trainplane-gpu-diag"
DIAG_CONTAINER = "dcgm-diag"
# Standalone DCGM (nv-hostengine, dcgmi and the diagnostic plugins) in the version gpu-operator v26.7.0
# pins for its `dcgm` component (chart values dcgm.repository/image/version).
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# The GPU operator labels every node with an NVIDIA GPU (from node-feature-discovery's PCI scan).
GPU_NODE_LABEL = "nvidia.com/gpu.present"
# gpu-operator's RuntimeClass (chart value operator.runtimeClass): exposes the GPUs without requesting them.
RUNTIME_CLASS = "nvidia"
# GPU memory faults that need a reset (or an RMA) whatever XID came last: reason -> an instant query whose
# samples above 0 name the node. Both fields are in the exporter's metrics list the platform ships
# (dashboards/metrics.py, dcgm_exporter_csv), and the alerts GpuEccUncorrectableErrors / GpuRowRemapFailure
# read the same series (alerts.py); verify's observability check fails a rule on a series nothing exports.
FAULT_QUERIES = {
    "ecc-uncorrectable": "max by (node) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)",
    "row-remap-failed": "max by (node) (DCGM_FI_DEV_ROW_REMAP_FAILURE)",
}
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-prometheus.{MONITORING_NAMESPACE}.svc:9090"

HEALTH_TAINT_KEYS = HEALTH_TAINTS


def pool_selector(pool: NodePoolInfo) -> dict[str, str]:
    """Labels that pick a pool's nodes: trainplane's pool label, or the selector of an existing cluster."""
    if POOL_LABEL in pool.labels:
        return {POOL_LABEL: pool.labels[POOL_LABEL]}
    return dict(pool.labels)


def expected_gpus(op: GpuOperatorSpec, pool: NodePoolInfo) -> int | None:
    """`nvidia.com/gpu` a healthy node of the pool advertises; None where MIG makes it a profile question."""
    if op.mig.strategy != "none":
        return None
    replicas = op.time_slicing.replicas if op.time_slicing else 1
    return pool.gpus_per_node * replicas or None


def controller_config(
    health: GpuHealthSpec,
    op: GpuOperatorSpec,
    bundle: ClusterBundle,
    namespace: str,
    straggler_quarantine: tuple[str, ...] = (),
    idle_teams: tuple[IdleTeam, ...] = (),
) -> dict[str, Any]:
    config = {
        "pools": [
            {
                "name": p.name,
                "matchLabels": pool_selector(p),
                "expectedGpus": expected_gpus(op, p),
                # How a node that stays quarantined is replaced (node_return.Replacement.from_config).
                "minNodes": p.min_nodes,
                "replacement": p.replacement.model_dump(by_alias=True),
            }
            for p in bundle.node_pools
            if p.gpu
        ],
        "diagnostic": {
            "enabled": health.diagnostic.enabled,
            "namespace": namespace,
            "podSelector": f"app={DIAG}",
            "container": DIAG_CONTAINER,
        },
        "ignoredXids": sorted(set(health.ignored_xids)),
        "startupGraceSeconds": health.startup_grace_minutes * 60,
        "prometheusUrl": PROMETHEUS_URL,
        # The recent XIDs per GPU (a signal that clears, unlike the last-XID gauge): the contract's query.
        "xidQuery": XID_QUERY,
        "faultQueries": FAULT_QUERIES,
        "intervalSeconds": 30,
        "quarantine": {
            "evictGpuPods": health.quarantine.evict_gpu_pods,
            "rediagnose": health.quarantine.rediagnose,
            "replaceAfterMinutes": health.quarantine.replace_after_minutes,
            # node_return.py rule 5: rerun only once the node's GPU pods are gone; retry a skipped run.
            "waitForGpuPods": True,
            "rediagnoseRetries": 3,
            "rediagnoseBackoffSeconds": 60,
        },
        # Hang exits (suspects.hang_exits): the training pods' trainer container and job label.
        "hangs": {"container": TRAINER_CONTAINER, "jobLabel": JOB_LABEL},
        # A firing straggler alert quarantines the node only in these namespaces (an Event elsewhere).
        "stragglers": {
            "alert": ALERT_STRAGGLER,
            "quarantineNamespaces": sorted(straggler_quarantine),
        },
    }
    if idle_teams:
        config["idle"] = idle_config(idle_teams)
    return config


def gpu_pool_tolerations(bundle: ClusterBundle) -> list[dict[str, str]]:
    """Every GPU pool taint with its own effect (NoExecute included), and the health taints."""
    return gpu_taint_tolerations(bundle.node_pools, HEALTH_TAINT_KEYS)


def diag_pod(
    config_map: str, bundle: ClusterBundle, level: int, images: AgentImagesSpec | None = None
) -> dict[str, Any]:
    images = images or AgentImagesSpec()
    return {
        "serviceAccountName": DIAG,
        # The diagnostic talks to no API.
        "automountServiceAccountToken": False,
        "nodeSelector": {GPU_NODE_LABEL: "true"},
        "tolerations": gpu_pool_tolerations(bundle),
        "runtimeClassName": RUNTIME_CLASS,
        "initContainers": [
            {
                "name": DIAG_CONTAINER,
                "image": images.gpu_diagnostic or DCGM_IMAGE,
                "command": ["/bin/bash", "/opt/diag/diag.sh"],
                "env": [
                    # Every GPU of the node, without requesting any (the nvidia runtime class reads these).
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
                ],
                # DCGM's diagnostic plugins need the devices and privileged access, as dcgm-exporter does.
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {"name": "script", "mountPath": "/opt/diag", "readOnly": True},
                    {
                        "name": "run-nvidia",
                        "mountPath": "/run/nvidia",
                        "readOnly": True,
                        "mountPropagation": "HostToContainer",
                    },
                ],
                "terminationMessagePolicy": "File",
            }
        ],
        "containers": [
            {
                "name": "done",
                "image": images.pause or PAUSE_IMAGE,
                "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "16Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
        "volumes": [
            {"name": "script", "configMap": {"name": config_map}},
            {"name": "run-nvidia", "hostPath": {"path": "/run/nvidia", "type": "Directory"}},
        ],
    }


@dataclass(frozen=True, kw_only=True)
class GpuHealthArgs:
    health: GpuHealthSpec
    # How GPUs are shared (MIG, time-slicing) decides how many a healthy node advertises.
    gpu_operator: GpuOperatorSpec
    bundle: ClusterBundle
    namespace: pulumi.Input[str]
    # The GPU operator release: the diagnostic uses its RuntimeClass and validation files.
    operator: pulumi.Resource | None = None
    # The namespaces of the teams whose straggler nodes are quarantined (teams[].stragglers: quarantine).
    straggler_quarantine: tuple[str, ...] = ()
    # The teams with an idle policy (teams[].idle): the controller's idle round, its RBAC and PodMonitor.
    idle_teams: tuple[IdleTeam, ...] = ()
    # The controller's and the diagnostic's image overrides (`platform.images`).
    images: AgentImagesSpec = field(default_factory=AgentImagesSpec)


@dataclass(frozen=True, kw_only=True)
class GpuHealthResources:
    controller: k8s.apps.v1.Deployment
    config: k8s.core.v1.ConfigMap
    # The node-start diagnostic; None when turned off.
    diagnostic: k8s.apps.v1.DaemonSet | None


class GpuHealth(pulumi.ComponentResource):
    """The health controller (taints) and the node-start diagnostic DaemonSet."""

    resources: GpuHealthResources

    def __init__(self, name: str, args: GpuHealthArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:GpuHealth", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        health, ns = args.health, args.namespace
        labels = {"app": CONTROLLER}

        def meta(obj_name: str, **extra: Any) -> dict[str, Any]:
            return {"name": obj_name, "namespace": ns, **extra}

        config = pulumi.Output.from_input(ns).apply(
            lambda n: json.dumps(
                controller_config(
                    health, args.gpu_operator, args.bundle, n, args.straggler_quarantine, args.idle_teams
                ),
                indent=2,
                sort_keys=True,
            )
        )
        # The config only (the code is the image's); the URN is the one that carried the source before.
        agent_cm = k8s.core.v1.ConfigMap(
            f"{name}-agent",
            metadata=meta(CONTROLLER, labels=labels),
            data={"config.json": config},
            opts=child,
        )
        # A changed config restarts the controller (a changed image changes the pod template itself).
        digest = config.apply(lambda c: hashlib.sha256(c.encode()).hexdigest()[:16])
        k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=meta(CONTROLLER, labels=labels), opts=child)
        # Least privilege: the contract's permissions (nodes, nodes/status, pods, evictions, Events).
        k8s.rbac.v1.ClusterRole(
            f"{name}-nodes",
            metadata={"name": CONTROLLER, "labels": labels},
            rules=controller_rules(idle=bool(args.idle_teams)),
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-nodes",
            metadata={"name": CONTROLLER, "labels": labels},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CONTROLLER},
            subjects=[{"kind": "ServiceAccount", "name": CONTROLLER, "namespace": ns}],
            opts=child,
        )
        # Grants nothing beyond the ClusterRole now (pods are watched cluster-wide); kept so its URN and
        # that of its binding stay as deployed.
        k8s.rbac.v1.Role(
            f"{name}-pods",
            metadata=meta(CONTROLLER, labels=labels),
            rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
            opts=child,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-pods",
            metadata=meta(CONTROLLER, labels=labels),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONTROLLER},
            subjects=[{"kind": "ServiceAccount", "name": CONTROLLER, "namespace": ns}],
            opts=child,
        )
        controller = k8s.apps.v1.Deployment(
            f"{name}-controller",
            metadata=meta(CONTROLLER, labels=labels),
            spec={
                "replicas": 1,
                # One operator at a time: kopf --standalone has no peering (kopf docs, "Health-checks").
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels, "annotations": {"trainplane.dev/config-digest": digest}},
                    "spec": controller_pod(
                        agent_cm.metadata["name"],
                        controller_image(args.images, args.images.gpu_health_controller),
                        metrics=bool(args.idle_teams),
                    ),
                },
            },
            opts=child,
        )
        if args.idle_teams:
            # The exemption series the idle alert excludes. Prometheus selects every PodMonitor of every
            # namespace (observability.py sets podMonitorSelectorNilUsesHelmValues false; the chart's
            # podMonitorSelector and podMonitorNamespaceSelector are {}: kube-prometheus-stack 88.5.3
            # values.yaml prometheus.prometheusSpec); its CRD comes with
            # kube-prometheus-stack, which the GPU operator release (args.operator) waits for.
            k8s.apiextensions.CustomResource(
                f"{name}-metrics",
                api_version="monitoring.coreos.com/v1",
                kind="PodMonitor",
                metadata=meta(CONTROLLER, labels=labels),
                spec=controller_pod_monitor(),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[args.operator] if args.operator else []),
            )
        diag = None
        if health.diagnostic.enabled:
            diag_labels = {"app": DIAG}
            level = health.diagnostic.level
            script = k8s.core.v1.ConfigMap(
                f"{name}-diag-script",
                metadata=meta(DIAG, labels=diag_labels),
                data={"diag.sh": diag_script(level)},
                opts=child,
            )
            k8s.core.v1.ServiceAccount(
                f"{name}-diag-sa",
                metadata=meta(DIAG, labels=diag_labels),
                automount_service_account_token=False,
                opts=child,
            )
            waits = [args.operator] if args.operator is not None else []
            diag = k8s.apps.v1.DaemonSet(
                f"{name}-diag",
                # Its pods finish only once each node's diagnostic ran (level 3: about 15 minutes, or later
                # on nodes that wait for their driver): `pulumi up` must not wait for that rollout
                # (pulumi-kubernetes skips its await logic for this annotation, pulumi-kubernetes#417).
                metadata=meta(DIAG, labels=diag_labels, annotations={"pulumi.com/skipAwait": "true"}),
                spec={
                    "selector": {"matchLabels": diag_labels},
                    "updateStrategy": {"type": "RollingUpdate"},
                    "template": {
                        "metadata": {"labels": diag_labels},
                        "spec": diag_pod(script.metadata["name"], args.bundle, level, args.images),
                    },
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=waits),
            )
        self.resources = GpuHealthResources(controller=controller, config=agent_cm, diagnostic=diag)
        self.register_outputs({})
