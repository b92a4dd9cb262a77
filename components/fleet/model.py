"""What a fleet is made of, computed from its spec and its platforms' outputs (no Pulumi resources here):
the dispatch order of the workers, each team's summed quota, the object names and specs on the manager
and the workers, and the token kubeconfig the manager reads for each worker.

Kueue's MultiKueue (kubernetes-sigs/kueue@v0.19.2, site/content/en/docs/concepts/multikueue.md): a job
created on the manager in a LocalQueue whose ClusterQueue carries a MultiKueue AdmissionCheck is admitted
there against the manager's quota, then copied to worker clusters (the MultiKueueConfig's clusters) into the
same namespace and LocalQueue; the first worker that admits it runs it, and the others' copies are removed.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from components.bundle import owner_labels, team_local_queue, team_namespace
from components.incluster.kueue_objects import GPU, KUEUE_API, flavors
from components.incluster.names import KUEUE_NAMESPACE
from components.incluster.tenancy import NAMESPACE_LABEL, TEAM_LABEL, pod_security_labels, team_quota
from components.outputs import NodePoolInfo, PlatformOutputs
from components.spec import TeamSpec
from components.spec.fleet import FleetSpec, FleetTeam
from contract.quota import gpu_shares

# The AdmissionCheck controller of MultiKueue (kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go
# MultiKueueControllerName).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
# The manager reads each worker's kubeconfig from a Secret in its own (Kueue's) namespace, key `kubeconfig`
# (multikueuecluster.go getKubeConfigFromSecret: c.configNamespace; apis/kueue/v1beta2/multikueue_types.go
# MultiKueueConfigSecretKey).
KUBECONFIG_KEY = "kubeconfig"
# Where the workers' ServiceAccount and its token live: Kueue's namespace, as in Kueue's own setup script
# (site/static/examples/multikueue/create-multikueue-kubeconfig.sh NAMESPACE=kueue-system).
WORKER_NAMESPACE = KUEUE_NAMESPACE
# Where the manager's Kueue reads the workers' kubeconfig Secrets from: its own namespace.
MANAGER_NAMESPACE = KUEUE_NAMESPACE
# The key of the manager's kubeconfig among a fleet's kubeconfigs (worker names are DNS labels: no clash).
MANAGER = "(manager)"

# Dispatch ranks of a worker by its best GPU capacity (spec FleetDispatch.order "capacity"): capacity that
# is paid whether used or not first, then on-demand, then capacity that waits to be granted, then spot.
CAPACITY_RANK = {
    "reservation": 0,
    "capacity-block": 0,
    "on-demand": 1,
    "flex-start": 2,
    "queued": 2,
    "spot": 3,
}

# What the manager does on a worker (create-multikueue-kubeconfig.sh's ClusterRole at v0.19.2, split below), for the job
# kinds trainplane's Kueue manages (kueue_objects.KUEUE_FRAMEWORKS: batch/job and JobSet): create, watch and
# delete the copies and their Workloads, read the queues. The script's rules for other kinds (pods,
# StatefulSets, LeaderWorkerSets, Kubeflow, Ray, AppWrappers) are left out: no such job reaches a worker.
_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "update", "patch"]
# Reads are cluster-wide: the manager watches and lists its copies and their Workloads in every namespace
# (kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go: establishWatch and the
# garbage collector's List filter on MultiKueueOriginLabel only, no namespace), so reads bound per
# namespace would leave the MultiKueueCluster disconnected.
WORKER_READ_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"], "verbs": _READ},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets", "jobsets/status"], "verbs": _READ},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "workloads/status"], "verbs": _READ},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": _READ},
]
# Writes are bound per team namespace (a RoleBinding in each fleet team's namespace on the worker): the
# manager's token creates and removes jobs where the fleet's teams run, nowhere else on the worker.
WORKER_WRITE_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _WRITE},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": _WRITE},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": _WRITE},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch", "update"]},
]


@dataclass(frozen=True)
class Worker:
    name: str
    stack: str
    platform: PlatformOutputs
    index: int  # position in the fleet spec's `workers`

    @property
    def cloud(self) -> str:
        return self.platform.cloud


def capacity_rank(platform: PlatformOutputs) -> int:
    """The rank of a worker's best GPU capacity (CAPACITY_RANK); a worker without GPU pools goes last."""
    ranks = [CAPACITY_RANK.get(p.capacity, len(CAPACITY_RANK)) for p in platform.node_pools if p.gpu]
    return min(ranks, default=len(CAPACITY_RANK))


def dispatch_order(spec: FleetSpec, workers: Sequence[Worker], manager_cloud: str) -> list[Worker]:
    """The workers in the order the MultiKueueConfig lists them. Kueue 0.19's Incremental dispatcher takes
    that order as given (gate MultiKueueIncrementalDispatcherRespectConfigOrder, beta and on by default:
    kueue v0.19.2 pkg/features/kube_features.go; pkg/controller/workloaddispatcher/incrementaldispatcher.go
    getNextNominatedWorkers). `capacity`: best capacity rank first; ties keep the manager's cloud first
    (no cross-cloud egress for the job's data and images), then the list order."""
    if spec.dispatch.order == "list":
        return sorted(workers, key=lambda w: w.index)
    return sorted(workers, key=lambda w: (capacity_rank(w.platform), w.cloud != manager_cloud, w.index))


@dataclass(frozen=True)
class TeamQuota:
    """What a team may hold across the fleet: the sum of its nominal quotas on the workers."""

    gpus: int = 0
    cpu: int = 0
    memory_gib: int = 0
    extended: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: TeamQuota) -> TeamQuota:
        ext = dict(self.extended)
        for r, n in other.extended:
            ext[r] = ext.get(r, 0) + n
        return TeamQuota(
            self.gpus + other.gpus,
            self.cpu + other.cpu,
            self.memory_gib + other.memory_gib,
            tuple(sorted(ext.items())),
        )


def worker_team_quota(platform: PlatformOutputs, team: str) -> TeamQuota:
    """What a team can hold at once on one worker. GPUs: its nominal quota there, as that worker's own
    ClusterQueue gives it (kueue_objects.cluster_queue_spec: per GPU flavor its share of the flavor's GPUs,
    contract.quota.gpu_shares), capped by its namespace ResourceQuota (its gpuQuota: tenancy.team_quota), since
    shares summed over several flavors can pass it. Extended resources (fabric devices): their share on
    each flavor, capped at what those GPUs need. CPU and memory: the namespace ResourceQuota's (the worker's
    ClusterQueue repeats them on every flavor; the namespace holds them once). A worker without the team
    contributes nothing."""
    out = platform.team(team)
    if out is None:
        return TeamQuota()
    pools: list[NodePoolInfo] = list(platform.node_pools)
    everyone = [(t.name, t.gpu_quota) for t in platform.teams]
    shares = 0
    extended: dict[str, int] = {}
    per_gpu: dict[str, float] = {}
    for f in flavors(pools):
        share = gpu_shares(f.gpus, everyone)[team]
        shares += share
        for r in f.extended:
            extended[r] = extended.get(r, 0) + f.extended_quota(r, share)
            per_gpu[r] = max(per_gpu.get(r, 0.0), f.extended_per_gpu[r])
    gpus = min(shares, out.gpu_quota)
    capped = {r: min(n, math.ceil(gpus * per_gpu[r])) for r, n in extended.items()}
    q = team_quota(pools, TeamSpec(name=team, gpu_quota=out.gpu_quota))
    memory = int(q["requests.memory"].removesuffix("Gi"))
    return TeamQuota(gpus, math.ceil(float(q["requests.cpu"])), memory, tuple(sorted(capped.items())))


def fleet_team_quota(workers: Sequence[Worker], team: str) -> TeamQuota:
    """The team's quota on the manager: "the quota in the manager cluster should equal the total quota
    available in all worker clusters" (kueue v0.19.2 site/content/en/docs/concepts/multikueue.md, "Manager
    Cluster"): lower leaves workers idle, higher dispatches workloads no worker can admit."""
    total = TeamQuota()
    for w in workers:
        total = total + worker_team_quota(w.platform, team)
    return total


# ---- names ---------------------------------------------------------------------------------------------


def service_account(spec: FleetSpec) -> str:
    return f"multikueue-{spec.name}"


def token_secret(spec: FleetSpec) -> str:
    """The worker's ServiceAccount token Secret: a new name per `tokens.rotation`, so bumping it creates a
    new Secret (a new token) and deletes the old one, which revokes the old token (the token controller
    only honours tokens whose Secret exists: kubernetes.io/docs "Manually create a long-lived API token for
    a ServiceAccount")."""
    return f"multikueue-{spec.name}-{spec.tokens.rotation}"


def admission_check(spec: FleetSpec) -> str:
    return f"{spec.name}-multikueue"


def kubeconfig_secret(spec: FleetSpec, worker: str) -> str:
    return f"{spec.name}-{worker}-kubeconfig"


# ---- kubeconfig ----------------------------------------------------------------------------------------


def cluster_server(kubeconfig: str) -> str | None:
    """The API server URL of a kubeconfig document's current context (YAML or JSON), None if it is none."""
    try:
        doc = yaml.safe_load(kubeconfig)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict):
        return None
    clusters = {
        c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or [] if isinstance(c, dict)
    }
    contexts = {
        c.get("name"): c.get("context") or {} for c in doc.get("contexts") or [] if isinstance(c, dict)
    }
    current = contexts.get(doc.get("current-context")) or {}
    cluster = clusters.get(current.get("cluster")) or next(iter(clusters.values()), {})
    server = cluster.get("server")
    return str(server) if server else None


def worker_server(kubeconfig: str | None, api_server: str | None) -> str | None:
    """Where the manager reaches a worker's API server: its platform's cluster.apiServer (exported as
    `apiServer`: an existing cluster, as other clusters reach it) where set, else the server of the
    kubeconfig document it exports; None for a platform on the ambient kubeconfig without apiServer."""
    if api_server:
        return api_server
    if kubeconfig is None or ambient_context(kubeconfig) is not None:
        return None
    return cluster_server(kubeconfig)


def ambient_context(kubeconfig: str) -> str | None:
    """The context of a platform on the ambient kubeconfig (an existing cluster without
    trainplane:kubeconfig exports `(ambient kubeconfig, context NAME)`: components/kubernetes/cluster.py),
    None for a kubeconfig document. `current` is the ambient file's current context."""
    prefix, suffix = "(ambient kubeconfig, context ", ")"
    text = kubeconfig.strip()
    if text.startswith(prefix) and text.endswith(suffix):
        return text[len(prefix) : -len(suffix)]
    return None


def token_kubeconfig(name: str, server: str, ca_data: str, token: str) -> str:
    """A kubeconfig MultiKueue accepts: the server, the CA inline (certificate-authority-data, base64 as the
    token Secret's `ca.crt` holds it) and the ServiceAccount token inline. Kueue since v0.13.8/v0.14.3
    refuses a kubeconfig with an exec plugin, a tokenFile, a certificate-authority path or
    insecure-skip-tls-verify (kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go
    validateKubeconfig, validateRestConfig) - which is why the EKS and GKE kubeconfigs the platforms export
    (exec: aws eks get-token, gke-gcloud-auth-plugin) cannot be handed to it."""
    user = f"multikueue-{name}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def kubeconfig_from_token_secret(name: str, server: str, data: dict[str, str] | None) -> str:
    """The kubeconfig from a `kubernetes.io/service-account-token` Secret's data (base64: `token`, `ca.crt`)
    once the token controller filled it (pulumi-kubernetes waits for that: pulumi/pulumi-kubernetes#2048)."""
    data = data or {}
    token = base64.b64decode(data.get("token", "")).decode() if data.get("token") else ""
    return token_kubeconfig(name, server, data.get("ca.crt", ""), token)


# ---- manager objects -----------------------------------------------------------------------------------


def worker_cost_centers(team: str, workers: Sequence[Worker]) -> dict[str, str]:
    """Worker name -> the cost center it exports for the team (TeamOutput.costCenter), where it does."""
    found = {}
    for w in workers:
        out = w.platform.team(team)
        if out is not None and out.cost_center:
            found[w.name] = out.cost_center
    return found


def team_cost_center(team: FleetTeam, workers: Sequence[Worker]) -> str | None:
    """Who pays for the team's namespace on the manager: the fleet's `costCenter` for the team, else the
    one its workers export (check_fleet_platforms refuses workers that disagree); None: unset everywhere
    (the policy pack's trainplane-required-tags then reports the namespace)."""
    if team.cost_center:
        return team.cost_center
    return next(iter(sorted(set(worker_cost_centers(team.name, workers).values()))), None)


def team_namespace_labels(team: FleetTeam, workers: Sequence[Worker]) -> dict[str, str]:
    """A team namespace on the manager, labelled as the workers label theirs (tenancy.py): the team label
    Kueue's job webhooks select (kueue_objects.manager_config managedJobsNamespaceSelector), the Pod
    Security level the workers' pools need, and the owner and cost-center labels (bundle.owner_labels)."""
    pools = [p for w in workers for p in w.platform.node_pools]
    return {
        TEAM_LABEL: team.name,
        **pod_security_labels(pools),
        **owner_labels(team.name, team_cost_center(team, workers)),
    }


def flavor_spec() -> dict[str, Any]:
    """The manager's plain ResourceFlavor: no node labels, as nothing runs on the manager's nodes (its
    topology-aware flavors: components/fleet/tas.py)."""
    return {}


def cluster_queue_spec(spec: FleetSpec, team: str, quotas: Sequence[tuple[str, TeamQuota]]) -> dict[str, Any]:
    """A team's ClusterQueue on the manager: the fleet's quota for the team, per manager flavor (name,
    quota: the plain one, then one per topology of the workers, tas.fleet_quota_by_levels), checked by
    MultiKueue."""
    # Kueue admits a workload only if its ClusterQueue covers every resource its pods request, so the
    # workers' extended resources (fabric devices) are covered here too; every flavor lists them all.
    extended = sorted({r for _, q in quotas for r, _ in q.extended})

    def resources(q: TeamQuota) -> list[dict[str, Any]]:
        ext = dict(q.extended)
        return [
            {"name": "cpu", "nominalQuota": str(q.cpu)},
            {"name": "memory", "nominalQuota": f"{q.memory_gib}Gi"},
            {"name": GPU, "nominalQuota": str(q.gpus)},
            *({"name": r, "nominalQuota": str(ext.get(r, 0))} for r in extended),
        ]

    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: team}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", GPU, *extended],
                "flavors": [{"name": name, "resources": resources(q)} for name, q in quotas],
            }
        ],
        "admissionChecksStrategy": {"admissionChecks": [{"name": admission_check(spec)}]},
    }


def namespace_name(team: str) -> str:
    return team_namespace(team)


def local_queue_name(team: str) -> str:
    """The same LocalQueue name as the workers': MultiKueue creates the copy in the worker's namespace and
    LocalQueue of the same names (kueue v0.19.2 site/content/en/docs/concepts/multikueue.md)."""
    return team_local_queue(team)


def admission_check_spec(spec: FleetSpec) -> dict[str, Any]:
    return {
        "controllerName": MULTIKUEUE_CONTROLLER,
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": spec.name},
    }


def multikueue_config_spec(ordered: Sequence[Worker]) -> dict[str, Any]:
    return {"clusters": [w.name for w in ordered]}


def multikueue_cluster_spec(spec: FleetSpec, worker: str) -> dict[str, Any]:
    return {
        "clusterSource": {
            "kubeConfig": {"locationType": "Secret", "location": kubeconfig_secret(spec, worker)}
        }
    }


__all__ = ["KUEUE_API"]
