"""Queueing with Kueue: a ResourceFlavor per GPU kind and capacity, a ClusterQueue per team with its
nominal GPU quota in one cohort (idle quota can be borrowed), a LocalQueue in every team namespace, and
all-or-nothing admission (waitForPodsReady) so a multi-node job never holds half its GPUs. Extended
resources of the pools (fabric devices) are covered next to the GPUs, in proportion to them.

Kueue objects use the v1beta2 API (storage version since Kueue 0.16): ClusterQueue `cohortName`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.bundle import ClusterBundle, NodePoolInfo, team_local_queue
from components.charts import CHARTS
from components.kubernetes.names import KUEUE_NAMESPACE, KUEUE_RELEASE, RELEASE_TIMEOUT_S
from components.kubernetes.tenancy import TEAM_LABEL, team_quota
from components.spec import QueueingSpec, TeamSpec

KUEUE_API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")


def manager_config() -> str:
    """Kueue's Configuration (chart value managerConfig.controllerManagerConfigYaml) with waitForPodsReady."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # A job is admitted whole or not at all: if its pods are not all running within the timeout, Kueue
        # evicts and requeues it, and admits nothing else meanwhile (blockAdmission), so two half-started
        # multi-node jobs cannot deadlock on each other's GPUs.
        "waitForPodsReady": {
            "timeout": "10m",
            "recoveryTimeout": "3m",
            "blockAdmission": True,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 3600,
            },
        },
        # Only the job kinds the platform runs: batch/v1 Job today, JobSet next (framework names from
        # kueue v0.19.2 pkg/controller/jobs/*/..._controller.go FrameworkName). Without `pod` the chart
        # renders its pod webhook with failurePolicy Ignore (templates/webhook/manifests.yaml), so a
        # Kueue outage cannot block pod creation of the GPU operator, monitoring or anything else.
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        # Kueue's job webhooks (failurePolicy Fail) see only the team namespaces, not the operators'
        # (chart: namespaceSelector of every job webhook = managedJobsNamespaceSelector when set).
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
    }
    return yaml.safe_dump(config, sort_keys=False)


def flavor_name(gpu: str, capacity: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"{gpu.lower()}-{capacity}")


@dataclass(frozen=True)
class Flavor:
    name: str
    gpus: int  # GPUs in the flavor at maximum scale
    node_labels: dict[str, str]
    tolerations: list[dict[str, str]]
    # Extended resources of the flavor's nodes (bundle NodePoolInfo.extended_resources), by name:
    # the count at maximum scale, and the most any pool of the flavor has per GPU.
    extended: dict[str, int] = field(default_factory=dict)
    extended_per_gpu: dict[str, float] = field(default_factory=dict)

    def extended_quota(self, resource: str, gpu_quota: int) -> int:
        """A team's share of `resource`: enough for `gpu_quota` GPUs on the flavor's densest pool, up to
        what the flavor has. A job pod requests all of its node's devices, so the share follows GPUs."""
        if resource not in self.extended:
            return 0
        return min(self.extended[resource], math.ceil(gpu_quota * self.extended_per_gpu[resource]))


def flavors(pools: tuple[NodePoolInfo, ...]) -> list[Flavor]:
    groups: dict[tuple[str, str], list[NodePoolInfo]] = {}
    for p in pools:
        if p.gpu:
            groups.setdefault((p.gpu, p.capacity), []).append(p)
    out = []
    for (gpu, capacity), members in sorted(groups.items()):
        # Labels every node of the group carries (pool-specific labels drop out when pools share a flavor).
        common = dict(members[0].labels)
        for m in members[1:]:
            common = {k: v for k, v in common.items() if m.labels.get(k) == v}
        taints = {(t.key, t.value, t.effect) for m in members for t in m.taints}
        extended: dict[str, int] = {}
        per_gpu: dict[str, float] = {}
        for m in members:
            for res, count in m.extended_resources.items():
                extended[res] = extended.get(res, 0) + count * m.max_nodes
                if m.gpus_per_node:
                    per_gpu[res] = max(per_gpu.get(res, 0.0), count / m.gpus_per_node)
        out.append(
            Flavor(
                name=flavor_name(gpu, capacity),
                gpus=sum(m.gpus_per_node * m.max_nodes for m in members),
                node_labels=common,
                tolerations=[
                    {"key": k, "operator": "Equal", "value": v, "effect": e} for k, v, e in sorted(taints)
                ],
                extended=extended,
                extended_per_gpu=per_gpu,
            )
        )
    return out


def cluster_queue_spec(
    queueing: QueueingSpec, pools: Sequence[NodePoolInfo], team: TeamSpec, fl: list[Flavor]
) -> dict[str, Any]:
    quota = team_quota(pools, team)
    cpu, memory = quota["requests.cpu"], quota["requests.memory"]

    def resource(name: str, nominal: str) -> dict[str, Any]:
        r: dict[str, Any] = {"name": name, "nominalQuota": nominal}
        if not queueing.borrowing:
            r["borrowingLimit"] = "0"
        return r

    # Kueue admits a workload only if its ClusterQueue covers every resource its pods request (kueue
    # flavorassigner), so every extended resource of any flavor is covered; a flavor without it gets 0.
    extended = sorted({r for f in fl for r in f.extended})

    return {
        "cohortName": queueing.cohort,
        # Only the team's own namespace feeds its queue.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.name}},
        "queueingStrategy": "BestEffortFIFO",
        # Borrowed GPUs are returned when their owner needs them.
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", GPU, *extended],
                "flavors": [
                    {
                        "name": f.name,
                        # Each flavor can hold the whole team quota, up to what the flavor has; the
                        # namespace ResourceQuota caps the team's total across flavors.
                        "resources": [
                            resource("cpu", cpu),
                            resource("memory", memory),
                            resource(GPU, str(min(team.gpu_quota, f.gpus))),
                            *(
                                resource(r, str(f.extended_quota(r, min(team.gpu_quota, f.gpus))))
                                for r in extended
                            ),
                        ],
                    }
                    for f in fl
                ],
            }
        ],
    }


@dataclass(frozen=True, kw_only=True)
class QueueingArgs:
    queueing: QueueingSpec
    teams: Sequence[TeamSpec]
    bundle: ClusterBundle
    # team name -> its namespace (each team's LocalQueue lives there)
    namespaces: Mapping[str, k8s.core.v1.Namespace]
    # The Prometheus release, whose ServiceMonitor CRD Kueue's metrics ServiceMonitor needs.
    prometheus: k8s.helm.v3.Release | None = None


@dataclass(frozen=True, kw_only=True)
class QueueingResources:
    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release
    flavors: Mapping[str, k8s.apiextensions.CustomResource]
    cluster_queues: Mapping[str, k8s.apiextensions.CustomResource]
    local_queues: Mapping[str, k8s.apiextensions.CustomResource]


class Queueing(pulumi.ComponentResource):
    """Kueue and the flavors and queues that turn team quotas into admission."""

    resources: QueueingResources

    def __init__(self, name: str, args: QueueingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:Queueing", name, None, opts)
        bundle = args.bundle
        ns = k8s.core.v1.Namespace(
            f"{name}-ns", metadata={"name": KUEUE_NAMESPACE}, opts=pulumi.ResourceOptions(parent=self)
        )
        chart = CHARTS["kueue"]
        values: dict[str, Any] = {"managerConfig": {"controllerManagerConfigYaml": manager_config()}}
        waits = list(bundle.ready)
        if args.prometheus is not None:
            values["enablePrometheus"] = True
            waits.append(args.prometheus)
        self.release = k8s.helm.v3.Release(
            f"{name}-kueue",
            name=KUEUE_RELEASE,
            namespace=ns.metadata["name"],
            **chart.release_args(),
            values=values,
            timeout=RELEASE_TIMEOUT_S,
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits),
        )
        # Kueue objects need the chart's CRDs (and its webhook) first.
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.release])
        fl = flavors(bundle.node_pools)
        flavor_res, cqs, lqs = {}, {}, {}
        for f in fl:
            flavor_spec: dict[str, Any] = {"nodeLabels": f.node_labels}
            if f.tolerations:
                flavor_spec["tolerations"] = f.tolerations
            flavor_res[f.name] = k8s.apiextensions.CustomResource(
                f"{name}-flavor-{f.name}",
                api_version=KUEUE_API,
                kind="ResourceFlavor",
                metadata={"name": f.name},
                spec=flavor_spec,
                opts=after,
            )
        for team in args.teams:
            cq = cqs[team.name] = k8s.apiextensions.CustomResource(
                f"{name}-cq-{team.name}",
                api_version=KUEUE_API,
                kind="ClusterQueue",
                metadata={"name": team.name},
                spec=cluster_queue_spec(args.queueing, bundle.node_pools, team, fl),
                opts=after,
            )
            lqs[team.name] = k8s.apiextensions.CustomResource(
                f"{name}-lq-{team.name}",
                api_version=KUEUE_API,
                kind="LocalQueue",
                metadata={
                    "name": team_local_queue(team),
                    "namespace": args.namespaces[team.name].metadata["name"],
                },
                spec={"clusterQueue": cq.metadata["name"]},
                opts=after,
            )
        self.resources = QueueingResources(
            namespace=ns, release=self.release, flavors=flavor_res, cluster_queues=cqs, local_queues=lqs
        )
        self.register_outputs({"release": self.release.name})
