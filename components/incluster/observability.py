"""Metrics and dashboards: kube-prometheus-stack (Prometheus, Alertmanager, Grafana), the GPU and
training dashboards as ConfigMaps and the trainplane alert rules (each training job brings its own PodMonitor;
trainer series carry job, node_rank and, on per-GPU series, the trainer's own rank).

Prometheus selects every ServiceMonitor, PodMonitor and PrometheusRule in the cluster (the
*SelectorNilUsesHelmValues=false settings), so the DCGM exporter's ServiceMonitor and ours need no
release label. Objects of the chart's CRDs wait for the release; nothing else does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import MONITORING_NAMESPACE, ClusterBundle, NodePoolInfo, gpu_taint_tolerations
from components.charts import CHARTS
from components.incluster.alerts import alert_groups
from components.incluster.cost_rules import PoolPrice, cost_groups, node_pool_service_monitor
from components.incluster.dashboards import dashboards
from components.incluster.idle_rules import idle_groups
from components.incluster.names import (
    JOB_NAME_LABEL,
    LOKI_URL,
    PROMETHEUS_RELEASE,
    RANK_LABEL,
    RELEASE_TIMEOUT_S,
    TRAINER_METRICS_PORT_NAME,
)
from components.spec import APPLICATION_XIDS, GpuHealthSpec, ObservabilitySpec, TeamSpec

DASHBOARD_LABEL = "grafana_dashboard"


def _meta_label(label: str) -> str:
    """Prometheus' service-discovery name of a pod label."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


# prometheus-node-exporter 4.56.1's default tolerations (values.yaml; infra/verify/facts.yaml): NoSchedule
# taints only. A value replaces the list, so it is repeated before the pools' other effects.
NODE_EXPORTER_DEFAULT_TOLERATIONS = [{"effect": "NoSchedule", "operator": "Exists"}]


def node_exporter_values(pools: Sequence[NodePoolInfo]) -> dict[str, Any]:
    """The node exporter's tolerations when a GPU pool has a taint its defaults miss (NoExecute,
    PreferNoSchedule); nothing otherwise, so the chart's own default stays in force."""
    extra = [t for t in gpu_taint_tolerations(pools) if t["effect"] != "NoSchedule"]
    if not extra:
        return {}
    return {"prometheus-node-exporter": {"tolerations": NODE_EXPORTER_DEFAULT_TOLERATIONS + extra}}


def prometheus_values(obs: ObservabilitySpec, storage_class: str | None = None) -> dict[str, Any]:
    """kube-prometheus-stack values. Of the volumes the chart can ask for, only Prometheus' is on: the
    volumeClaimTemplate below, in the bundle's StorageClass (None: the cluster's default class).
    Alertmanager keeps `alertmanagerSpec.storage: {}` (emptyDir) and Grafana `persistence.enabled: false`
    (chart 88.5.3 defaults; templates/prometheus/prometheus.yaml and alertmanager/alertmanager.yaml render
    a volume only from those keys), so nothing else waits for a volume."""
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{obs.prometheus_storage_gib}Gi"}},
    }
    if storage_class:
        claim["storageClassName"] = storage_class
    values: dict[str, Any] = {
        "prometheus": {
            "prometheusSpec": {
                "retention": f"{obs.retention_days}d",
                "storageSpec": {"volumeClaimTemplate": {"spec": claim}},
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
            }
        },
        "grafana": {"enabled": obs.grafana},
    }
    if obs.grafana:
        values["grafana"]["sidecar"] = {
            "dashboards": {
                "enabled": True,
                "label": DASHBOARD_LABEL,
                "labelValue": "1",
                "searchNamespace": "ALL",
            }
        }
        if obs.loki:
            values["grafana"]["additionalDataSources"] = [
                {"name": "Loki", "type": "loki", "uid": "loki", "access": "proxy", "url": LOKI_URL}
            ]
    return values


def trainer_pod_monitor(job_name: str) -> dict[str, Any]:
    """The PodMonitor spec of one training job (created by its job stack, in the team's namespace)."""
    return {
        "selector": {"matchLabels": {JOB_NAME_LABEL: job_name}},
        "podMetricsEndpoints": [
            {
                "port": TRAINER_METRICS_PORT_NAME,
                "interval": "15s",
                # namespace and pod come with every PodMonitor target; job and node_rank (the pod's
                # completion index) from the Job's labels, node from the pod's spec.nodeName. `rank` is
                # left to the trainer: it labels its per-GPU series with the global rank, and a target
                # label of the same name would rename the trainer's to exported_rank (honorLabels is off).
                "relabelings": [
                    {
                        "sourceLabels": [_meta_label(JOB_NAME_LABEL)],
                        "targetLabel": "job",
                        "action": "replace",
                    },
                    {
                        "sourceLabels": [_meta_label(RANK_LABEL)],
                        "targetLabel": "node_rank",
                        "action": "replace",
                    },
                    # The pod's node under the name kube-state-metrics and the DCGM series use (the
                    # straggler alert names the node; the GPU health controller quarantines it).
                    {
                        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                        "targetLabel": "node",
                        "action": "replace",
                    },
                ],
            }
        ],
    }


@dataclass(frozen=True, kw_only=True)
class ObservabilityArgs:
    observability: ObservabilitySpec
    bundle: ClusterBundle
    # The monitoring namespace (the stack and its dashboards live there).
    namespace: k8s.core.v1.Namespace
    # XIDs the GPU XID alert ignores (the GPU health settings').
    ignored_xids: tuple[int, ...] = APPLICATION_XIDS
    # GPU pools' prices: the cost recording rules (components/incluster/cost_rules.py).
    pool_prices: tuple[PoolPrice, ...] = ()
    # The straggler and quarantine alerts' thresholds (gpuHealth.stragglers, gpuHealth.quarantine).
    gpu_health: GpuHealthSpec = field(default_factory=GpuHealthSpec)
    # Teams: each one's idle policy becomes its idle alert (components/incluster/idle_rules.py).
    teams: tuple[TeamSpec, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ObservabilityResources:
    release: k8s.helm.v3.Release
    dashboards: tuple[k8s.core.v1.ConfigMap, ...]
    alerts: k8s.apiextensions.CustomResource | None


class Observability(pulumi.ComponentResource):
    """kube-prometheus-stack plus trainplane's dashboards, alerts and training-job scraping."""

    release: k8s.helm.v3.Release
    resources: ObservabilityResources

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:Observability", name, None, opts)
        obs = args.observability
        ns = args.namespace.metadata["name"]
        child = pulumi.ResourceOptions(parent=self)
        chart = CHARTS["kube-prometheus-stack"]
        self.release = k8s.helm.v3.Release(
            f"{name}-prometheus",
            name=PROMETHEUS_RELEASE,
            namespace=ns,
            **chart.release_args(),
            values={
                **prometheus_values(obs, storage_class=args.bundle.storage_class),
                **node_exporter_values(args.bundle.node_pools),
            },
            timeout=RELEASE_TIMEOUT_S,
            # Prometheus' volume needs its StorageClass and provisioner before the release can be ready.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*args.bundle.ready, *args.bundle.storage_ready]
            ),
        )
        # Objects of the chart's CRDs (PrometheusRule, PodMonitor) wait for the release that installs them.
        after_crds = pulumi.ResourceOptions(parent=self, depends_on=[self.release])
        boards = []
        if obs.grafana:
            for file_name, board in dashboards().items():
                boards.append(
                    k8s.core.v1.ConfigMap(
                        f"{name}-dashboard-{file_name.removesuffix('.json')}",
                        metadata={
                            "name": f"trainplane-dashboard-{file_name.removesuffix('.json')}",
                            "namespace": ns,
                            "labels": {DASHBOARD_LABEL: "1"},
                        },
                        data={file_name: json.dumps(board, indent=2)},
                        opts=child,
                    )
                )
        alerts = None
        if obs.alerts:
            alerts = k8s.apiextensions.CustomResource(
                f"{name}-alerts",
                api_version="monitoring.coreos.com/v1",
                kind="PrometheusRule",
                metadata={"name": "trainplane", "namespace": ns},
                spec={
                    "groups": alert_groups(list(args.ignored_xids), args.gpu_health)
                    + cost_groups(args.pool_prices)
                    + idle_groups(args.teams)
                },
                opts=after_crds,
            )
            # The cost rules' node -> pool series (cost_rules.node_pool_service_monitor).
            k8s.apiextensions.CustomResource(
                f"{name}-node-pools",
                api_version="monitoring.coreos.com/v1",
                kind="ServiceMonitor",
                metadata={"name": "trainplane-node-pools", "namespace": ns},
                spec=node_pool_service_monitor(MONITORING_NAMESPACE),
                opts=after_crds,
            )
        self.resources = ObservabilityResources(release=self.release, dashboards=tuple(boards), alerts=alerts)
        self.register_outputs({"release": self.release.name})
