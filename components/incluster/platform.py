"""InClusterPlatform: everything trainplane runs inside the cluster, on any cloud.

It receives the cloud layer's ClusterBundle and never branches on the cloud beyond `bundle.profile`.
Every child uses the bundle's Kubernetes provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import MONITORING_NAMESPACE, ClusterBundle, owner_labels, team_namespace
from components.incluster.cost_rules import PoolPrice
from components.incluster.dra_driver import DraDriver, DraDriverArgs, rack_pools
from components.incluster.fabric import FabricObjects, FabricObjectsArgs
from components.incluster.gpu_operator import GpuOperator, GpuOperatorArgs
from components.incluster.jobset import JobSetController, JobSetControllerArgs
from components.incluster.logs import Logs, LogsArgs
from components.incluster.observability import Observability, ObservabilityArgs
from components.incluster.queueing import Queueing, QueueingArgs
from components.incluster.tenancy import TeamTenancy, TeamTenancyArgs
from components.incluster.volumes import SharedVolumes, SharedVolumesArgs
from components.spec import PlatformSpec
from components.spec.images import controller_image


@dataclass(frozen=True, kw_only=True)
class InClusterArgs:
    # The whole platform spec: this is the composition of every in-cluster component (each of which
    # takes only its own part of it).
    spec: PlatformSpec
    bundle: ClusterBundle
    # Each GPU pool's price for the cost recording rules (components.pricing.gpu_pool_prices).
    pool_prices: tuple[PoolPrice, ...] = ()


@dataclass(frozen=True, kw_only=True)
class InClusterResources:
    teams: Mapping[str, TeamTenancy]
    volumes: SharedVolumes
    monitoring_namespace: k8s.core.v1.Namespace
    observability: Observability
    gpu_operator: GpuOperator
    logs: Logs | None
    queueing: Queueing | None
    jobset: JobSetController
    # The pools' GPU fabric objects; None when the cloud profile has none.
    fabric: FabricObjects | None = None
    # The NVIDIA DRA driver's ComputeDomains; None without rack-scale pools.
    dra_driver: DraDriver | None = None


class InClusterPlatform(pulumi.ComponentResource):
    """GPU operator, shared volumes, observability, tenancy, queueing and the JobSet controller."""

    resources: InClusterResources

    def __init__(self, name: str, args: InClusterArgs, opts: pulumi.ResourceOptions | None = None):
        # Children inherit the bundle's provider: nothing here may reach the ambient kubeconfig.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args.bundle.provider]))
        super().__init__("trainplane:kubernetes:InClusterPlatform", name, None, opts)
        spec = args.spec
        bundle = replace(args.bundle, owner_labels=owner_labels(spec.team, spec.cost_center))
        child = pulumi.ResourceOptions(parent=self)
        self.teams = {
            t.name: TeamTenancy(f"{name}-team-{t.name}", TeamTenancyArgs(team=t, bundle=bundle), child)
            for t in spec.teams
        }
        self.volumes = SharedVolumes(
            f"{name}-volumes",
            SharedVolumesArgs(
                teams=spec.teams,
                bundle=bundle,
                namespaces={team: t.namespace for team, t in self.teams.items()},
            ),
            child,
        )
        monitoring = k8s.core.v1.Namespace(
            f"{name}-monitoring-ns",
            metadata={
                "name": MONITORING_NAMESPACE,
                # node-exporter and Alloy read the host (hostNetwork, hostPID, hostPath).
                "labels": {"pod-security.kubernetes.io/enforce": "privileged", **bundle.owner_labels},
            },
            opts=child,
        )
        self.observability = Observability(
            f"{name}-observability",
            ObservabilityArgs(
                observability=spec.observability,
                bundle=bundle,
                namespace=monitoring,
                ignored_xids=tuple(spec.gpu_health.ignored_xids),
                pool_prices=args.pool_prices,
                gpu_health=spec.gpu_health,
                teams=tuple(spec.teams),
            ),
            child,
        )
        self.gpu_operator = GpuOperator(
            f"{name}-gpu-operator",
            GpuOperatorArgs(
                gpu_operator=spec.gpu_operator,
                gpu_health=spec.gpu_health,
                bundle=bundle,
                prometheus=self.observability.release,
                straggler_quarantine=tuple(
                    team_namespace(t) for t in spec.teams if t.stragglers == "quarantine"
                ),
                idle_teams=tuple((t.name, team_namespace(t), t.idle) for t in spec.teams if t.idle),
                images=spec.images,
            ),
            child,
        )
        self.logs = (
            Logs(
                f"{name}-logs",
                LogsArgs(observability=spec.observability, bundle=bundle, namespace=monitoring),
                child,
            )
            if spec.observability.loki
            else None
        )
        namespaces = {team: t.namespace for team, t in self.teams.items()}
        # The runtime of training jobs, with or without Kueue.
        self.jobset = JobSetController(f"{name}-jobset", JobSetControllerArgs(bundle=bundle), child)
        self.queueing = (
            Queueing(
                f"{name}-queueing",
                QueueingArgs(
                    queueing=spec.queueing,
                    teams=spec.teams,
                    bundle=bundle,
                    namespaces=namespaces,
                    prometheus=self.observability.release,
                    jobset=self.jobset.resources.release,
                    block_windows={
                        p.name: (p.block_start, p.block_end)
                        for p in spec.node_pools
                        if p.capacity == "capacity-block" and p.block_start and p.block_end
                    },
                    block_window_image=controller_image(spec.images, spec.images.block_window),
                ),
                child,
            )
            if spec.queueing.enabled
            else None
        )
        self.fabric = (
            FabricObjects(f"{name}-fabric", FabricObjectsArgs(bundle=bundle), child)
            if bundle.profile.fabric_objects
            else None
        )
        # Rack-scale pools (NVL72) reach across nodes over NVLink only through the DRA driver's ComputeDomains.
        self.dra_driver = (
            DraDriver(f"{name}-dra-driver", DraDriverArgs(bundle=bundle), child)
            if rack_pools(bundle.node_pools)
            else None
        )
        self.resources = InClusterResources(
            teams=self.teams,
            volumes=self.volumes,
            monitoring_namespace=monitoring,
            observability=self.observability,
            gpu_operator=self.gpu_operator,
            logs=self.logs,
            queueing=self.queueing,
            jobset=self.jobset,
            fabric=self.fabric,
            dra_driver=self.dra_driver,
        )
        self.register_outputs({"namespaces": [team for team in self.teams]})
