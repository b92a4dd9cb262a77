"""The `CloudVerifier` protocol: what `trainplane verify` asks a cloud about a plan, a platform and the
cloud's own API, beside the `CloudBackend` the library asks (components/backend_protocol.py).

The backend is the library's lowest layer and names no verify type; verify's questions take verify's own
types (Plan, Context, CheckResult...), so they live here, on verify's floor. A cloud's verifier lives in
infra/verify/clouds/<cloud>/ and inherits what it does not answer from `VerifierDefaults` (a plain
Kubernetes cluster: no add-ons, no cloud identity, no cloud API); the registry is
infra/verify/verifiers.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo, TeamOutput
    from components.spec import PlatformSpec
    from infra.verify.charts import ChartModel
    from infra.verify.checks.pool_nodes import PoolNodes
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject, Plan, PlanResource
    from infra.verify.report import CheckResult, Report

# A GPU pool of the platform outputs with the nodes the plan gives it (verify's scheduling check).
GpuPools = Sequence[tuple["NodePoolInfo", "PoolNodes"]]
# verify `identity`: (ctx, res, team, its ServiceAccount) -> the object key patterns the team's cloud
# identity may write (checkpoint URIs must fall inside them).
TeamIdentityCheck = Callable[["Context", "CheckResult", "TeamOutput", "K8sObject"], list[str]]

# The facts of a cloud with no verifier: nothing is known offline (the markers an existing cluster's
# facts use, infra/verify/clouds/kubernetes/facts.yaml), so each check reads the plan alone.
UNKNOWN_FACTS: Mapping[str, Any] = {
    "storageClasses": "unknown",
    "networkPolicy": "unknown",
    "identityEndpoints": [],
    "objectStore": None,
    "taints": [],
    "addonDaemonSets": {},
}


@runtime_checkable
class CloudVerifier(Protocol):
    """What verify asks one cloud (the `cloud:` of a platform stack, the name of its backend)."""

    # The backend's name: the `cloud:` value this verifier answers for.
    name: str

    def verify_facts(self) -> Mapping[str, Any]:
        """The facts `trainplane verify` needs about this cloud (its data file, each fact with a source)."""
        ...

    # cluster, pool nodes, add-ons, fabric (v1)
    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        """The resource of a plan that creates this cloud's cluster; None when the plan creates none."""
        ...

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        """The Kubernetes version this cloud's cluster resource asks for; None when it names none."""
        ...

    def adopts_existing_clusters(self) -> bool:
        """Whether a plan that names no cloud and creates no cluster runs on this cloud (a cluster that
        already exists, as a job stack's plan does)."""
        ...

    def pool_nodes(self, ctx: Context, pool: NodePoolInfo) -> PoolNodes | None:
        """The nodes the plan's cloud resources give a pool of the platform outputs (labels, taints,
        machines, devices, scale-from-zero template); None: verify reads the pool from the outputs."""
        ...

    def addon_objects(self, plan: Plan, out: ChartModel) -> None:
        """Add to `out` the DaemonSets (with their tolerations) and CSI drivers of this cloud's managed
        add-ons that the plan turns on."""
        ...

    def check_gpu_pools(self, ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
        """This cloud's own scheduling findings about the GPU pools' nodes (repair agents, autoscaler
        labels, spot notices...), added to `res`."""
        ...

    def check_fabric(
        self, ctx: Context, res: CheckResult, pool: NodePoolInfo, facts: Mapping[str, Any]
    ) -> None:
        """Cluster-side findings about a pool's GPU fabric (`facts`: the cloud's facts for its kind)."""
        ...

    # team reach, enforcement, storage path, cloud API rules (v2)
    def verify_network_enforcement(self, ctx: Context, res: CheckResult) -> None:
        """verify `network`: whether the cluster enforces NetworkPolicy (and its API can be reached at
        all), read from the plan; failures and notes go into `res`."""
        ...

    def verify_team_identity(self) -> TeamIdentityCheck | None:
        """verify `identity`: how one team's cloud identity is checked here (its ServiceAccount's
        annotation, the identity's trust and the data it reaches); None when the platform gives teams
        no cloud identity."""
        ...

    def verify_csi_controller_identity(self, ctx: Context, res: CheckResult, driver: str) -> None:
        """verify `storage`: the controller of an installed CSI driver has the cloud identity it needs to
        create volumes."""
        ...

    def verify_storage_path(
        self, ctx: Context, res: CheckResult, pod: TrainingPod, pv: K8sObject, driver: str | None
    ) -> None:
        """verify `storage`: the node-level path from the pod's pool to the file system behind `pv` (the
        node mounts it, not the pod) is open: security groups, firewall rules, export ranges."""
        ...

    def verify_create_rules(self, ctx: Context, res: CheckResult) -> None:
        """verify `cloud`: what the cloud checks when the plan's cloud resources are created."""
        ...

    def verify_rule_admits_tcp(self, rule: PlanResource, port: int) -> bool:
        """verify `cloud`, creation order: whether `rule` (an ingress rule resource of this cloud) admits
        TCP `port` (the `tcpPorts` selector of `createOrder` in the cloud's facts.yaml)."""
        ...

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> Report | None:
        """`verify STACK --cloud`: read-only checks against the cloud's own APIs with the user's
        credentials (`client`: an API client to use instead of the default one): a Report of mode
        "cloud" (infra.verify.cloud.cloud_report), one CheckResult per check; None: no cloud API."""
        ...


class VerifierDefaults:
    """What a verifier answers for a hook it does not implement: what a plain Kubernetes cluster with no
    cloud features answers. Every built-in verifier inherits it, and verify asks it for a cloud that has
    no verifier at all (saying so on the report: infra/verify/verifiers.py)."""

    name: str = ""

    def verify_facts(self) -> Mapping[str, Any]:
        return UNKNOWN_FACTS

    # cluster, pool nodes, add-ons, fabric (v1)
    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        return None

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        return None

    def adopts_existing_clusters(self) -> bool:
        return False

    def pool_nodes(self, ctx: Context, pool: NodePoolInfo) -> PoolNodes | None:
        return None

    def addon_objects(self, plan: Plan, out: ChartModel) -> None:
        return None

    def check_gpu_pools(self, ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
        return None

    def check_fabric(
        self, ctx: Context, res: CheckResult, pool: NodePoolInfo, facts: Mapping[str, Any]
    ) -> None:
        return None

    # team reach, enforcement, storage path, cloud API rules (v2)
    def verify_network_enforcement(self, ctx: Context, res: CheckResult) -> None:
        res.note(
            "existing cluster: whether it enforces NetworkPolicy is unknown offline; "
            "run verify with --kubeconfig to look for a policy agent (calico, cilium, ...)"
        )

    def verify_team_identity(self) -> TeamIdentityCheck | None:
        return None

    def verify_csi_controller_identity(self, ctx: Context, res: CheckResult, driver: str) -> None:
        return None

    def verify_storage_path(
        self, ctx: Context, res: CheckResult, pod: TrainingPod, pv: K8sObject, driver: str | None
    ) -> None:
        return None

    def verify_create_rules(self, ctx: Context, res: CheckResult) -> None:
        return None

    def verify_rule_admits_tcp(self, rule: PlanResource, port: int) -> bool:
        return False

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> Report | None:
        return None


class FolderVerifier(VerifierDefaults):
    """A cloud's verifier whose answers live beside it, in the package its subclass is defined in
    (infra/verify/clouds/<cloud>/ for the built-in ones: `folder_of`), one module per concern, each imported when verify first asks: facts.yaml; nodes.py (plan_cluster,
    kubernetes_version, pool_nodes, addon_objects, check_gpu_pools); network.py (enforcement); identity.py
    (check_team); cloud_api.py (verify_cloud_api). What differs per cloud (storage paths, create-time
    rules, the fabric) its subclass answers itself."""

    def part(self, module: str) -> Any:
        """The folder's module `module` (nodes, network, identity, cloud_api, ...)."""
        return importlib.import_module(f"{folder_of(self)}.{module}")

    def verify_facts(self) -> Mapping[str, Any]:
        return folder_facts(self)

    # cluster, pool nodes, add-ons (v1)
    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        found: PlanResource | None = self.part("nodes").plan_cluster(resources)
        return found

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        version: str | None = self.part("nodes").kubernetes_version(cluster)
        return version

    def pool_nodes(self, ctx: Context, pool: NodePoolInfo) -> PoolNodes | None:
        nodes: PoolNodes | None = self.part("nodes").pool_nodes(ctx, pool)
        return nodes

    def addon_objects(self, plan: Plan, out: ChartModel) -> None:
        self.part("nodes").addon_objects(plan, out)

    def check_gpu_pools(self, ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
        self.part("nodes").check_gpu_pools(ctx, res, gpu_pools)

    # team reach, enforcement, cloud API (v2)
    def verify_network_enforcement(self, ctx: Context, res: CheckResult) -> None:
        self.part("network").enforcement(ctx, res)

    def verify_team_identity(self) -> TeamIdentityCheck | None:
        check: TeamIdentityCheck = self.part("identity").check_team
        return check

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> Report | None:
        report: Report = self.part("cloud_api").verify_cloud_api(spec, client)
        return report


def folder_of(verifier: object) -> str:
    """The package a verifier's class is defined in (infra/verify/clouds/<cloud>/ for the built-in ones)."""
    return type(verifier).__module__.rpartition(".")[0]


def folder_facts(verifier: object) -> Mapping[str, Any]:
    """The facts.yaml beside a verifier's module, read once per process."""
    return _facts(folder_of(verifier))


@cache
def _facts(package: str) -> Mapping[str, Any]:
    from components.backends import load_data_file

    return load_data_file(package, "facts.yaml")
