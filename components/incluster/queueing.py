"""Queueing with Kueue: a ResourceFlavor per GPU kind and capacity kind, a ClusterQueue per team with its
nominal GPU quota in one cohort (idle quota can be borrowed) and its flavors in the platform's capacity
order (reserved, on-demand, DWS, spot), a LocalQueue in every team namespace, and all-or-nothing admission
(waitForPodsReady) so a multi-node job never holds half its GPUs. Extended resources of the pools (fabric
devices) are covered next to the GPUs, in proportion to them. Pools with topology levels Kueue can use get
a Topology (topology-aware scheduling); pools provisioned through a ProvisioningRequest class (GKE queued
provisioning) get the ProvisioningRequest admission check. The object specs live in kueue_objects.py.

Kueue objects use the v1beta2 API (storage version since Kueue 0.16): ClusterQueue `cohortName`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import ClusterBundle, team_local_queue
from components.charts import CHARTS
from components.incluster.block_window import BlockWindow, BlockWindowArgs
from components.incluster.kueue_objects import (
    GPU,
    KUEUE_API,
    KUEUE_FRAMEWORKS,
    Flavor,
    admission_check_spec,
    cluster_queue_spec,
    flavors,
    manager_config,
    provisioning_check_name,
    provisioning_config_spec,
    topologies,
)
from components.incluster.names import KUEUE_NAMESPACE, KUEUE_RELEASE, RELEASE_TIMEOUT_S
from components.spec import QueueingSpec, TeamSpec
from components.spec.images import CONTROLLER_IMAGE_UNSET

__all__ = [
    "GPU",
    "KUEUE_API",
    "KUEUE_FRAMEWORKS",
    "Flavor",
    "Queueing",
    "QueueingArgs",
    "QueueingResources",
    "cluster_queue_spec",
    "flavors",
    "manager_config",
]


@dataclass(frozen=True, kw_only=True)
class QueueingArgs:
    queueing: QueueingSpec
    teams: Sequence[TeamSpec]
    bundle: ClusterBundle
    # team name -> its namespace (each team's LocalQueue lives there)
    namespaces: Mapping[str, k8s.core.v1.Namespace]
    # The Prometheus release, whose ServiceMonitor CRD Kueue's metrics ServiceMonitor needs.
    prometheus: k8s.helm.v3.Release | None = None
    # The JobSet release: Kueue starts after the JobSet CRD exists, so its jobset.x-k8s.io/jobset
    # integration is set up at start-up rather than whenever Kueue next notices the API.
    jobset: k8s.helm.v3.Release | None = None
    # capacity-block pool name -> (blockStart, blockEnd): Kueue admits to the block only between them.
    block_windows: Mapping[str, tuple[datetime, datetime]] = field(default_factory=dict)
    # The block-window controller's image (images.controller_image).
    block_window_image: str = CONTROLLER_IMAGE_UNSET


@dataclass(frozen=True, kw_only=True)
class QueueingResources:
    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release
    flavors: Mapping[str, k8s.apiextensions.CustomResource]
    cluster_queues: Mapping[str, k8s.apiextensions.CustomResource]
    local_queues: Mapping[str, k8s.apiextensions.CustomResource]
    # Topology name -> its object; ProvisioningRequest class -> (its config, its admission check).
    topologies: Mapping[str, k8s.apiextensions.CustomResource] = field(default_factory=dict)
    provisioning: Mapping[str, tuple[k8s.apiextensions.CustomResource, ...]] = field(default_factory=dict)
    # The Capacity Block window controller; None without capacity-block pools.
    block_window: BlockWindow | None = None


def _kueue_object(
    resource_name: str, kind: str, name: str, spec: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        resource_name, api_version=KUEUE_API, kind=kind, metadata={"name": name}, spec=dict(spec), opts=opts
    )


class Queueing(pulumi.ComponentResource):
    """Kueue and the flavors and queues that turn team quotas into admission."""

    resources: QueueingResources

    def __init__(self, name: str, args: QueueingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:Queueing", name, None, opts)
        bundle = args.bundle
        ns = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={"name": KUEUE_NAMESPACE, "labels": dict(bundle.owner_labels)},
            opts=pulumi.ResourceOptions(parent=self),
        )
        chart = CHARTS["kueue"]
        values: dict[str, Any] = {
            "managerConfig": {
                "controllerManagerConfigYaml": manager_config(args.queueing, args.bundle.node_pools)
            }
        }
        waits = list(bundle.ready)
        if args.prometheus is not None:
            values["enablePrometheus"] = True
            waits.append(args.prometheus)
        if args.jobset is not None:
            waits.append(args.jobset)
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
        topo = {
            t: _kueue_object(f"{name}-topology-{t}", "Topology", t, spec, after)
            for t, spec in topologies(fl).items()
        }
        provisioning = self._provisioning(name, fl, after)
        flavor_res = {}
        for f in fl:
            # A flavor that names a Topology must come after it (Kueue resolves the name at admission).
            deps = [self.release, *([topo[f.spec()["topologyName"]]] if f.levels else [])]
            flavor_res[f.name] = _kueue_object(
                f"{name}-flavor-{f.name}",
                "ResourceFlavor",
                f.name,
                f.spec(),
                pulumi.ResourceOptions(parent=self, depends_on=deps),
            )
        cq_deps = [self.release, *(r for objs in provisioning.values() for r in objs)]
        cqs, lqs = {}, {}
        for team in args.teams:
            cq = cqs[team.name] = _kueue_object(
                f"{name}-cq-{team.name}",
                "ClusterQueue",
                team.name,
                cluster_queue_spec(args.queueing, bundle.node_pools, team, fl, args.teams),
                pulumi.ResourceOptions(parent=self, depends_on=cq_deps),
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
        # Capacity Block pools with their dates: their flavor gets quota only inside them (block_window.py).
        windowed = [
            p for p in bundle.node_pools if p.capacity == "capacity-block" and p.name in args.block_windows
        ]
        block_window = (
            BlockWindow(
                f"{name}-block-window",
                BlockWindowArgs(
                    queueing=args.queueing,
                    teams=args.teams,
                    pools=windowed,
                    windows=args.block_windows,
                    namespace=ns.metadata["name"],
                    cluster_queues=list(cqs.values()),
                    image=args.block_window_image,
                ),
                pulumi.ResourceOptions(parent=self),
            )
            if windowed
            else None
        )
        self.resources = QueueingResources(
            namespace=ns,
            release=self.release,
            flavors=flavor_res,
            cluster_queues=cqs,
            local_queues=lqs,
            topologies=topo,
            provisioning=provisioning,
            block_window=block_window,
        )
        self.register_outputs({"release": self.release.name})

    def _provisioning(
        self, name: str, fl: Sequence[Flavor], after: pulumi.ResourceOptions
    ) -> dict[str, tuple[k8s.apiextensions.CustomResource, ...]]:
        """Per ProvisioningRequest class of the pools: its ProvisioningRequestConfig and AdmissionCheck."""
        out = {}
        for cls in sorted({c for f in fl for c in f.provisioning_classes}):
            check = provisioning_check_name(cls)
            config = _kueue_object(
                f"{name}-provreq-{check}",
                "ProvisioningRequestConfig",
                check,
                provisioning_config_spec(cls),
                after,
            )
            ac = _kueue_object(
                f"{name}-check-{check}",
                "AdmissionCheck",
                check,
                admission_check_spec(cls),
                pulumi.ResourceOptions(parent=self, depends_on=[self.release, config]),
            )
            out[cls] = (config, ac)
        return out
