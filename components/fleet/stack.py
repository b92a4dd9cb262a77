"""The fleet stack's program (`trainplane:fleet`): read the manager's and every worker's platform outputs
(StackReferences, like a job stack reads its platform), then

- on each WORKER (a provider from the worker's kubeconfig output): a ServiceAccount `multikueue-<fleet>` in
  Kueue's namespace, a ClusterRole and binding with what MultiKueue reads there (cluster-wide), and per fleet team a RoleBinding
  in the team's namespace to what it writes (model.WORKER_READ_RULES, WORKER_WRITE_RULES), and a
  `kubernetes.io/service-account-token` Secret `multikueue-<fleet>-<tokens.rotation>`;
- on the MANAGER: the team namespaces, a plain ResourceFlavor and, per topology of the workers, a Topology
  and a topology-aware flavor (tas.py), per team a ClusterQueue with the workers' summed quota per flavor
  and the MultiKueue AdmissionCheck, and a LocalQueue of the workers' name; the AdmissionCheck, the
  MultiKueueConfig (workers in dispatch order), and per worker a MultiKueueCluster and the Secret with its
  token kubeconfig (model.token_kubeconfig).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components.fleet import model, refusal, tas
from components.fleet.providers import ambient_context_of, cluster_provider
from components.job_stack import read_platform
from components.outputs import PlatformOutputs
from components.spec import ConfigError
from components.spec.fleet import FleetSpec


@dataclass(frozen=True)
class FleetPlatforms:
    manager: PlatformOutputs
    workers: list[model.Worker]
    # worker name (or model.MANAGER) -> the ambient kubeconfig context its platform uses, where it does
    ambient: dict[str, str] = field(default_factory=dict)


def check_fleet_platforms(spec: FleetSpec, platforms: FleetPlatforms) -> list[str]:
    """The rules a fleet has against its platforms' outputs: every team exists on every worker (MultiKueue
    creates a job's copy in the same namespace and LocalQueue there) and its workers agree on its cost
    center unless the fleet sets one, every worker tells the manager where its API server is (a kubeconfig
    document or cluster.apiServer), each worker refuses the jobs of the others' flavors (refusal.py), and the
    manager has no team of its own (its ClusterQueue names would collide with the fleet's)."""
    problems = []
    for i, team in enumerate(spec.teams):
        for w in platforms.workers:
            if w.platform.team(team.name) is None:
                known = ", ".join(t.name for t in w.platform.teams) or "none"
                problems.append(
                    f"fleet.teams[{i}]: team {team.name!r} is not a team of worker {w.name!r} "
                    f"({w.stack}; its teams: {known}); MultiKueue creates the job in that team's namespace "
                    "and LocalQueue there"
                )
        found = model.worker_cost_centers(team.name, platforms.workers)
        if team.cost_center is None and len(set(found.values())) > 1:
            each = ", ".join(f"{w}: {c}" for w, c in found.items())
            problems.append(
                f"fleet.teams[{i}]: team {team.name!r} has different cost centers on the workers ({each}); "
                "set the fleet team's costCenter for its namespace on the manager"
            )
    for i, w in enumerate(platforms.workers):
        if w.name in platforms.ambient and not w.platform.api_server:
            problems.append(
                f"fleet.workers[{i}]: worker {w.name!r} ({w.stack}) exports no kubeconfig document (it uses the "
                f"ambient kubeconfig) and no API server; set cluster.apiServer (its API server's https URL) "
                f"on {w.stack}, or its trainplane:kubeconfig secret"
            )
    # Each worker must refuse the jobs of the others' flavors, or it wins them and their pods stay Pending.
    problems += refusal.unrefused(platforms.workers)
    if platforms.manager.teams:
        names = ", ".join(t.name for t in platforms.manager.teams)
        problems.append(
            f"fleet.manager.platformStack: {spec.manager.platform_stack!r} has teams ({names}); a fleet "
            "manager sets queueing.fleetManager and has none"
        )
    return problems


def _grant(role: k8s.rbac.v1.ClusterRole, sa_name: str) -> dict[str, Any]:
    """A binding's roleRef (the ClusterRole) and subjects (the manager's ServiceAccount on the worker)."""
    return {
        "role_ref": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role.metadata["name"],
        },
        "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": model.WORKER_NAMESPACE}],
    }


def _kubeconfig_doc(worker: str, api_server: str | None, args: list[Any]) -> str:
    """The manager's kubeconfig for `worker`: its server, with the CA and token of its token Secret."""
    server = model.worker_server(None if args[0] is None else str(args[0]), api_server)
    if server is None:
        # check_fleet_platforms refuses a worker on the ambient kubeconfig without cluster.apiServer; this is
        # an exported kubeconfig document that names no server.
        raise ConfigError(
            [f"fleet: worker {worker!r}: its kubeconfig names no server; set cluster.apiServer"]
        )
    return model.kubeconfig_from_token_secret(worker, server, args[1])


class Fleet(pulumi.ComponentResource):
    """The MultiKueue wiring of one fleet, on its manager and its workers."""

    def __init__(
        self,
        spec: FleetSpec,
        platforms: FleetPlatforms,
        kubeconfigs: dict[str, pulumi.Output[Any]],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("trainplane:fleet:Fleet", spec.name, None, opts)
        self.ordered = model.dispatch_order(spec, platforms.workers, platforms.manager.cloud)
        self.quotas = {t.name: model.fleet_team_quota(platforms.workers, t.name) for t in spec.teams}
        # Per team, its quota per manager flavor: the plain one, then one per topology of the workers.
        self.flavor_quotas = {
            t.name: [
                (tas.flavor_name(spec, lv), q)
                for lv, q in tas.fleet_quota_by_levels(platforms.workers, t.name).items()
            ]
            for t in spec.teams
        }
        self.ambient = platforms.ambient
        tokens = {w.name: self._worker(spec, w, kubeconfigs[w.name]) for w in platforms.workers}
        self._manager(spec, platforms.workers, kubeconfigs, tokens)
        self.register_outputs({})

    def _team_writes(
        self, spec: FleetSpec, w: model.Worker, name: str, sa_name: str, opts: pulumi.ResourceOptions
    ) -> None:
        """What the manager writes on a worker, bound in each fleet team's namespace there only."""
        writer = k8s.rbac.v1.ClusterRole(
            f"{name}-write-role",
            metadata={"name": f"{sa_name}-write"},
            rules=model.WORKER_WRITE_RULES,
            opts=opts,
        )
        for team in spec.teams:
            on_worker = w.platform.team(team.name)
            if on_worker is None:
                continue  # check_fleet_platforms refuses the fleet
            k8s.rbac.v1.RoleBinding(
                f"{name}-write-{team.name}",
                metadata={"name": f"{sa_name}-write", "namespace": on_worker.namespace},
                **_grant(writer, sa_name),
                opts=opts,
            )

    def _worker(self, spec: FleetSpec, w: model.Worker, kubeconfig: pulumi.Output[Any]) -> k8s.core.v1.Secret:
        name = f"{spec.name}-{w.name}"
        provider = cluster_provider(f"{name}-cluster", kubeconfig, self.ambient.get(w.name))
        opts = pulumi.ResourceOptions(parent=self, providers=[provider])
        sa_name = model.service_account(spec)
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-sa", metadata={"name": sa_name, "namespace": model.WORKER_NAMESPACE}, opts=opts
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role", metadata={"name": sa_name}, rules=model.WORKER_READ_RULES, opts=opts
        )
        self._team_writes(spec, w, name, sa_name, opts)
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata={"name": sa_name},
            **_grant(role, sa_name),
            opts=opts,
        )
        # A rotation renames the Secret (metadata.name): the engine replaces it, creating the new Secret (a
        # new token) before deleting the old one, which revokes the old token; the URN stays the same.
        return k8s.core.v1.Secret(
            f"{name}-token",
            metadata={
                "name": model.token_secret(spec),
                "namespace": model.WORKER_NAMESPACE,
                "annotations": {"kubernetes.io/service-account.name": sa_name},
            },
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions(parent=self, providers=[provider], depends_on=[sa]),
        )

    def _manager(
        self,
        spec: FleetSpec,
        workers: Sequence[model.Worker],
        kubeconfigs: dict[str, pulumi.Output[Any]],
        tokens: dict[str, k8s.core.v1.Secret],
    ) -> None:
        provider = cluster_provider(
            f"{spec.name}-manager-cluster", kubeconfigs[model.MANAGER], self.ambient.get(model.MANAGER)
        )
        opts = pulumi.ResourceOptions(parent=self, providers=[provider])

        def kueue(
            res: str, kind: str, name: str, obj_spec: dict[str, Any], **kw: Any
        ) -> k8s.apiextensions.CustomResource:
            return k8s.apiextensions.CustomResource(
                f"{spec.name}-{res}",
                api_version=model.KUEUE_API,
                kind=kind,
                metadata={"name": name},
                spec=obj_spec,
                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(**kw)),
            )

        clusters = []
        for w in workers:
            secret_name = model.kubeconfig_secret(spec, w.name)
            doc: pulumi.Output[str] = pulumi.Output.all(kubeconfigs[w.name], tokens[w.name].data).apply(
                functools.partial(_kubeconfig_doc, w.name, w.platform.api_server)
            )
            secret = k8s.core.v1.Secret(
                f"{spec.name}-{w.name}-kubeconfig",
                metadata={"name": secret_name, "namespace": model.MANAGER_NAMESPACE},
                string_data={model.KUBECONFIG_KEY: pulumi.Output.secret(cast(Any, doc))},
                opts=opts,
            )
            clusters.append(
                kueue(
                    f"cluster-{w.name}",
                    "MultiKueueCluster",
                    w.name,
                    model.multikueue_cluster_spec(spec, w.name),
                    depends_on=[secret],
                )
            )
        config = kueue(
            "config",
            "MultiKueueConfig",
            spec.name,
            model.multikueue_config_spec(self.ordered),
            depends_on=clusters,
        )
        check = kueue(
            "check",
            "AdmissionCheck",
            model.admission_check(spec),
            model.admission_check_spec(spec),
            depends_on=[config],
        )
        flavor = kueue("flavor", "ResourceFlavor", spec.name, model.flavor_spec())
        tas_flavors = []
        for lv in tas.fleet_levels(workers):
            topo = tas.flavor_spec(lv)["topologyName"]
            topology = kueue(topo, "Topology", topo, tas.topology_spec(lv))
            tas_flavors.append(
                kueue(
                    f"flavor-{topo}",
                    "ResourceFlavor",
                    tas.flavor_name(spec, lv),
                    tas.flavor_spec(lv),
                    depends_on=[topology],
                )
            )
        for team in spec.teams:
            ns = k8s.core.v1.Namespace(
                f"{spec.name}-ns-{team.name}",
                metadata={
                    "name": model.namespace_name(team.name),
                    "labels": model.team_namespace_labels(team, workers),
                },
                opts=opts,
            )
            cq = kueue(
                f"cq-{team.name}",
                "ClusterQueue",
                team.name,
                model.cluster_queue_spec(spec, team.name, self.flavor_quotas[team.name]),
                depends_on=[flavor, *tas_flavors, check],
            )
            k8s.apiextensions.CustomResource(
                f"{spec.name}-lq-{team.name}",
                api_version=model.KUEUE_API,
                kind="LocalQueue",
                metadata={"name": model.local_queue_name(team.name), "namespace": ns.metadata["name"]},
                spec={"clusterQueue": cq.metadata["name"]},
                opts=opts,
            )


def read_platforms(spec: FleetSpec) -> tuple[FleetPlatforms, dict[str, pulumi.Output[Any]]]:
    """The manager's and workers' outputs (parsed synchronously, as a job stack reads its platform) and their
    kubeconfig outputs (secrets), keyed by worker name and model.MANAGER."""
    ref = pulumi.StackReference("manager", stack_name=spec.manager.platform_stack)
    manager = _read(ref, spec.manager.platform_stack, "fleet.manager.platformStack")
    kubeconfigs: dict[str, pulumi.Output[Any]] = {model.MANAGER: ref.require_output("kubeconfig")}
    ambient = {}
    if (ctx := ambient_context_of(ref)) is not None:
        ambient[model.MANAGER] = ctx
    workers = []
    for i, w in enumerate(spec.workers):
        wref = pulumi.StackReference(f"worker-{w.name}", stack_name=w.platform_stack)
        out = _read(wref, w.platform_stack, f"fleet.workers[{i}].platformStack")
        workers.append(model.Worker(w.name, w.platform_stack, out, i))
        kubeconfigs[w.name] = wref.require_output("kubeconfig")
        if (ctx := ambient_context_of(wref)) is not None:
            ambient[w.name] = ctx
    return FleetPlatforms(manager, workers, ambient), kubeconfigs


def _read(ref: pulumi.StackReference, stack: str, where: str) -> PlatformOutputs:
    try:
        return read_platform(ref, stack)
    except ConfigError as e:
        raise ConfigError([f"{where}: {p.split(': ', 1)[-1]}" for p in e.problems]) from None


def deploy_fleet(spec: FleetSpec, opts: pulumi.ResourceOptions | None = None) -> tuple[Fleet, dict[str, Any]]:
    """Register the fleet; ConfigError if its platforms cannot make one. Returns it and its stack exports."""
    platforms, kubeconfigs = read_platforms(spec)
    problems = check_fleet_platforms(spec, platforms)
    if problems:
        raise ConfigError(problems)
    fleet = Fleet(spec, platforms, kubeconfigs, opts)
    exports = {
        "fleetName": spec.name,
        "managerStack": spec.manager.platform_stack,
        "workers": [
            {"name": w.name, "stack": w.stack, "cloud": w.cloud, "order": i}
            for i, w in enumerate(fleet.ordered)
        ],
        "teams": [
            {
                "name": t.name,
                "namespace": model.namespace_name(t.name),
                "localQueue": model.local_queue_name(t.name),
                "gpuQuota": fleet.quotas[t.name].gpus,
            }
            for t in spec.teams
        ],
        "dispatcher": spec.dispatch.dispatcher,
        # Job stacks on the fleet create their jobs on the manager.
        "kubeconfig": pulumi.Output.secret(kubeconfigs[model.MANAGER]),
    }
    return fleet, exports
