"""The cloud backends of GpuPlatform: one `CloudBackend` protocol and a registry of plug-ins by name.

A backend is everything trainplane knows about one place clusters come from (AWS, GCP, a cluster that
already exists): the stack keys only it understands and its rules for them, the machines its pools are
made of, and how it builds the cloud layer whose `ClusterBundle` (with its `CloudProfile`) the in-cluster
layer runs on. Nothing outside a backend's own package names its cloud.

Backends are plug-ins: a distribution declares each of its backends as an entry point of the group
`trainplane.backends` (name = "module:BACKEND"; trainplane's own three are in its pyproject.toml), the
Python packaging mechanism for plug-ins ("Entry points specification", packaging.python.org). The registry
reads the names from the installed metadata and imports a backend's module on first use, so an AWS stack
never loads the GCP backend (and a backend module itself imports its SDK only in `build`). A new cloud is
a package and one entry point: no edit outside it.

Example: a backend of your own, registered from your program (or a test) before the stack is loaded:

    >>> from components.backends import backend, backend_names, register_backend
    >>> backend_names()[:3]
    ('aws', 'gcp', 'kubernetes')
    >>> backend("aws").name
    'aws'
    >>> register_backend("my-cloud", "my_package.backend")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pulumi

    from components.bundle import ClusterBundle
    from components.catalog import CatalogSection, MachineShape, PriceBasis
    from components.spec import NodePoolSpec, PlatformSpec, Spec, StorageSpec
    from components.spec.capacity import CapacityKinds
    from infra.verify.charts import ChartModel
    from infra.verify.checks.pool_nodes import PoolNodes
    from infra.verify.cloud import CloudReport
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject, Plan, PlanResource
    from infra.verify.report import CheckResult

    # verify `identity`: (ctx, res, team, its ServiceAccount) -> the object key patterns the team's cloud
    # identity may write (checkpoint URIs must fall inside them).
    TeamIdentityCheck = Callable[[Context, CheckResult, Mapping[str, Any], K8sObject], list[str]]

# The entry-point group a distribution declares its backends in (pyproject.toml
# [project.entry-points."trainplane.backends"]).
ENTRY_POINT_GROUP = "trainplane.backends"
# A template prompt: the answer to a `trainplane:<key>` question, None when not answered.
Prompt = Callable[[str], "str | None"]
# A GPU pool of the platform outputs with the nodes the plan gives it (verify's scheduling check).
GpuPools = Sequence[tuple[Mapping[str, Any], "PoolNodes"]]


@dataclass(frozen=True, kw_only=True)
class BuildArgs:
    """What GpuPlatform hands a backend to build the cloud layer from."""

    spec: PlatformSpec
    # The kubeconfig of a cluster that already exists (a secret); backends that create clusters ignore it.
    kubeconfig: pulumi.Input[str] | None = None


# What the offline engine calls with (resource name, inputs) or (invoke token, arguments).
MockAnswer = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class MockAnswers:
    """How a cloud answers the offline engine (infra/mockcloud): the outputs it computes per resource type
    (endpoints, ARNs, ids) and its answer per invoke token. Keyed by the provider's own tokens, so the
    engine merges every backend's answers into one table."""

    computed: Mapping[str, MockAnswer] = field(default_factory=dict)
    invokes: Mapping[str, MockAnswer] = field(default_factory=dict)


@runtime_checkable
class CloudBackend(Protocol):
    """One cloud behind GpuPlatform. Implementations live in their own package (components/aws, ...)."""

    # The `cloud:` value of a platform stack that selects this backend.
    name: str
    # The keys of the cloud-neutral spec models that only some clouds understand, which this one accepts
    # (model -> aliases). A key some backend lists and this one does not is refused on this cloud.
    keys: Mapping[type[Spec], frozenset[str]]
    # A key of another cloud -> the key that means the same here (offered as a hint when refused).
    twins: Mapping[str, str]
    # Seconds between SIGTERM and SIGKILL for training pods when a job names none: long enough for a
    # preemption checkpoint within the notice this cloud gives before it takes a node back.
    preemption_grace_seconds: int

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        """Problems of the platform-wide keys this cloud owns, one line each naming the key path."""
        ...

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        """Problems of one node pool on this cloud (machine types, GPU counts, zones...)."""
        ...

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        """Problems of one shared file system on this cloud (kinds, sizes, tiers...)."""
        ...

    def machine_of(self, pool: NodePoolSpec) -> MachineShape | None:
        """The catalog machine a pool's nodes are made of; None when unknown (existing clusters)."""
        ...

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        """Register the cloud layer (a component named `name`) and return the bundle it hands over."""
        ...

    def verify_facts(self) -> Mapping[str, Any]:
        """The facts `trainplane verify` needs about this cloud (its data file, each fact with a source)."""
        ...

    # catalog, spec keys, regions, quickstart (b1)
    def catalog_section(self) -> CatalogSection | None:
        """This cloud's machines for the GPU catalog (components.catalog); None: its pools' machines
        are not in the catalog (nodes that already exist)."""
        ...

    def display_name(self) -> str:
        """The cloud's name in prose ("AWS"), for messages such as "not an AWS region"."""
        ...

    def regions(self) -> Sequence[str]:
        """The regions a platform on this cloud may name; empty: any (the cloud has no list)."""
        ...

    def machine_type_problem(self, name: str, known: Sequence[str]) -> str | None:
        """Why `name`, which the catalog does not know (`known`: the names it does), is no machine type
        of this cloud, with a did-you-mean; None when it may be one."""
        ...

    def capacity_kinds(self) -> CapacityKinds:
        """The capacity kinds pools may have here, and how this cloud explains its kinds (and what it
        offers instead of other clouds' kinds) to stacks elsewhere."""
        ...

    def object_store_scheme(self) -> str | None:
        """The URI scheme of this cloud's object store ("s3" for s3://...); None: it has none."""
        ...

    def quickstart(self, get: Prompt, gpu_pool: dict[str, Any]) -> dict[str, Any]:
        """The keys of a first platform on this cloud from the template's prompts (`get`), given its
        cloud-neutral GPU pool (components/quickstart.py merges them into the platform object)."""
        ...

    # plan, cost and the offline engine (b2)
    def create_seconds(self) -> Mapping[str, float]:
        """Typical creation time in seconds per resource type of this cloud (`trainplane plan`'s critical
        path); a type not listed takes the plan's generic default."""
        ...

    def price_basis(self) -> PriceBasis | None:
        """Where this cloud's list prices come from; None: it sells no machines, nothing is priced."""
        ...

    def control_plane_hourly(self, spec: PlatformSpec) -> float:
        """The managed control plane's fee in USD per hour (0.0: none)."""
        ...

    def cost_assumptions(self, spec: PlatformSpec) -> list[str]:
        """How this cloud bills what the plan cannot price exactly: lines `trainplane plan` prints under the
        cost (after the generic ones)."""
        ...

    def mock_answers(self) -> MockAnswers:
        """What this cloud answers the offline engine (infra/mockcloud) for its resources and invokes."""
        ...

    # verify: cluster, pool nodes, add-ons, fabric (v1)
    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        """The resource of a plan that creates this cloud's cluster; None when the plan creates none."""
        ...

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        """The Kubernetes version this cloud's cluster resource asks for; None when it names none."""
        ...

    def adopts_existing_clusters(self) -> bool:
        """Whether a plan that names no cloud and creates no cluster runs on this backend (a cluster
        that already exists, as a job stack's plan does)."""
        ...

    def pool_nodes(self, ctx: Context, pool: Mapping[str, Any]) -> PoolNodes | None:
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
        self, ctx: Context, res: CheckResult, pool: Mapping[str, Any], facts: Mapping[str, Any]
    ) -> None:
        """Cluster-side findings about a pool's GPU fabric (`facts`: the cloud's facts for its kind)."""
        ...

    # verify: team reach, enforcement, storage path, cloud API rules (v2)
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
        TCP `port` (the `tcpPorts` selector of `createOrder` in verify_facts.yaml)."""
        ...

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> CloudReport:
        """`verify STACK --cloud`: read-only checks against the cloud's own APIs with the user's
        credentials (`client`: an API client to use instead of the default one)."""
        ...


# The nodes of a cluster that exists, labelled for trainplane by a platform engineer:
#   kubectl label nodes <gpu nodes> trainplane.dev/pool=gpu
EXISTING_GPU_SELECTOR = {"trainplane.dev/pool": "gpu"}


class BackendDefaults:
    """What a backend answers for a hook it does not implement: what a plain cluster with no cloud
    features answers. Every built-in backend inherits it."""

    name: str

    # catalog, spec keys, regions, quickstart (b1)
    def catalog_section(self) -> CatalogSection | None:
        return None

    def display_name(self) -> str:
        return self.name

    def regions(self) -> Sequence[str]:
        return ()

    def machine_type_problem(self, name: str, known: Sequence[str]) -> str | None:
        return None

    def capacity_kinds(self) -> CapacityKinds:
        from components.spec.capacity import CapacityKinds

        return CapacityKinds(offered=("on-demand",))

    def object_store_scheme(self) -> str | None:
        return None

    def quickstart(self, get: Prompt, gpu_pool: dict[str, Any]) -> dict[str, Any]:
        """Nodes that exist, selected by label; no object store for Loki's chunks."""
        cluster = {"context": context} if (context := get("context")) else {}
        pool = {**gpu_pool, "selector": dict(EXISTING_GPU_SELECTOR), "minNodes": gpu_pool["maxNodes"]}
        return {"cluster": cluster, "observability": {"loki": False}, "nodePools": [pool]}

    # plan, cost and the offline engine (b2)
    def create_seconds(self) -> Mapping[str, float]:
        return {}

    def price_basis(self) -> PriceBasis | None:
        return None

    def control_plane_hourly(self, spec: PlatformSpec) -> float:
        return 0.0

    def cost_assumptions(self, spec: PlatformSpec) -> list[str]:
        return []

    def mock_answers(self) -> MockAnswers:
        return MockAnswers()

    # verify: cluster, pool nodes, add-ons, fabric (v1)
    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        return None

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        return None

    def adopts_existing_clusters(self) -> bool:
        return False

    def pool_nodes(self, ctx: Context, pool: Mapping[str, Any]) -> PoolNodes | None:
        return None

    def addon_objects(self, plan: Plan, out: ChartModel) -> None:
        return None

    def check_gpu_pools(self, ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
        return None

    def check_fabric(
        self, ctx: Context, res: CheckResult, pool: Mapping[str, Any], facts: Mapping[str, Any]
    ) -> None:
        return None

    # verify: team reach, enforcement, storage path, cloud API rules (v2)
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

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> CloudReport:
        from infra.verify.cloud import CloudReport

        return CloudReport(spec.cloud, not_checked=["an existing cluster: no cloud API to ask"])


@dataclass
class _Registry:
    # name -> "module:attribute" (imported on first use) or the backend itself; None until first asked,
    # then the installed entry points, sorted by name, and what programs registered after them.
    entries: dict[str, str | CloudBackend] | None = None

    def loaded(self) -> dict[str, str | CloudBackend]:
        if self.entries is None:
            self.entries = dict(installed_backends())
        return self.entries


_REGISTRY = _Registry()


def installed_backends() -> dict[str, str]:
    """name -> "module:attribute" of every backend an installed distribution declares, sorted by name
    (so the order does not depend on the order of sys.path). Reads metadata only, imports nothing: the
    entry_points.txt of each dist-info directory on sys.path (python/cpython@v3.11
    Doc/library/importlib.metadata.rst, "Entry points": `entry_points(group=...)`, Python 3.10+)."""
    from importlib.metadata import entry_points

    found: dict[str, str] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        if found.setdefault(ep.name, ep.value) != ep.value:
            raise ValueError(
                f"cloud backend {ep.name!r} is declared twice ({found[ep.name]} and {ep.value}, "
                f"entry points {ENTRY_POINT_GROUP}); uninstall one of the two distributions"
            )
    return found


def register_backend(name: str, backend: str | CloudBackend) -> None:
    """Make `cloud: <name>` available: `backend` is a CloudBackend, or "module" / "module:attribute"
    naming one (attribute default `BACKEND`, imported when a stack first asks for it). Re-registering
    replaces, an installed backend too."""
    _REGISTRY.loaded()[name] = backend


def unregister_backend(name: str) -> None:
    """Remove a backend registered with `register_backend` (tests clean up with it)."""
    _REGISTRY.loaded().pop(name, None)


def backend_names() -> tuple[str, ...]:
    """Every registered cloud name: the installed ones by name, then those programs registered."""
    return tuple(_REGISTRY.loaded())


def backend(name: str) -> CloudBackend:
    """The backend registered as `name`; KeyError when there is none."""
    entries = _REGISTRY.loaded()
    entry = entries[name]
    if isinstance(entry, str):
        module, _, attribute = entry.partition(":")
        loaded = getattr(importlib.import_module(module), attribute or "BACKEND")
        if loaded.name != name:
            raise ValueError(f"{entry} provides backend {loaded.name!r}, registered as {name!r}")
        entries[name] = loaded
        return loaded
    return entry


def backends() -> tuple[CloudBackend, ...]:
    """Every registered backend (imports the light backend modules, never a cloud SDK)."""
    return tuple(backend(n) for n in backend_names())


def load_data_file(package: str, filename: str) -> dict[str, Any]:
    """A YAML data file shipped in a backend's package (its verify facts)."""
    from importlib import resources

    import yaml

    return yaml.safe_load(resources.files(package).joinpath(filename).read_text()) or {}


class CatalogBackend(BackendDefaults):
    """What the AWS and GCP backends share: their keys and rules in their package's `rules` module, their
    verify facts in its `verify_facts.yaml`, pools made of catalog machines, regions from a list. A
    subclass names its cloud, package, rules module, grace, the key that names a pool's machine, its
    object store and quickstart defaults, and builds."""

    name: str  # also the name of the cloud's sections in the shared data files below
    title: str  # the cloud's name in prose ("AWS")
    package: str  # e.g. "components.aws": holds rules.py and verify_facts.yaml
    rules: ModuleType  # KEYS, TWINS, CAPACITY, check, check_pool, check_storage
    keys: Mapping[type[Spec], frozenset[str]]
    twins: Mapping[str, str]
    preemption_grace_seconds: int
    # The pool key that names a machine, which also names each machine of the cloud's catalog section.
    machine_key: str
    object_store: str  # the scheme of its object store
    # Quickstart: the CPU pool that runs the operators, Prometheus and Kueue; the region when none is given.
    system_pool: Mapping[str, Any]
    default_region: str
    # The built-in clouds keep their data side by side, one section per cloud name, in these files of
    # the components package (data, reviewed together): machines and prices, and regions.
    CATALOG_FILE = "data/gpus.yaml"
    REGIONS_FILE = "data/regions.yaml"

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        return self.rules.check(spec, root)

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        return self.rules.check_pool(spec, pool, path)

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        return self.rules.check_storage(spec, storage, path)

    def machine_type_of(self, pool: NodePoolSpec) -> str | None:
        """The machine the pool's config names under `machine_key` (`instanceType`...), if any."""
        fields = type(pool).model_fields
        return next(getattr(pool, f) for f, info in fields.items() if (info.alias or f) == self.machine_key)

    def machine_of(self, pool: NodePoolSpec) -> MachineShape | None:
        """The pool's named machine, else the cheapest one carrying its GPUs."""
        from components.catalog import catalog

        named = self.machine_type_of(pool)
        if named:
            return catalog().machine(self.name, named)
        if pool.gpu and pool.gpus_per_node:
            shapes = catalog().shapes(self.name, pool.gpu, pool.gpus_per_node)
            return shapes[0] if shapes else None
        return None

    @cache  # noqa: B019 - one instance per backend for the life of the process
    def verify_facts(self) -> Mapping[str, Any]:
        return load_data_file(self.package, "verify_facts.yaml")

    # catalog, spec keys, regions, quickstart (b1)
    @cache  # noqa: B019
    def catalog_section(self) -> CatalogSection | None:
        from components.catalog import CatalogSection

        return CatalogSection.of_doc(
            load_data_file("components", self.CATALOG_FILE), self.name, self.machine_key
        )

    def display_name(self) -> str:
        return self.title

    @cache  # noqa: B019
    def regions(self) -> Sequence[str]:
        section = load_data_file("components", self.REGIONS_FILE).get(self.name) or {}
        return sorted(section.get("regions") or [])

    def capacity_kinds(self) -> CapacityKinds:
        return self.rules.CAPACITY

    def object_store_scheme(self) -> str | None:
        return self.object_store

    def quickstart(self, get: Prompt, gpu_pool: dict[str, Any]) -> dict[str, Any]:
        """A CPU system pool beside the GPU pool, which takes spot capacity unless told otherwise."""
        from components.quickstart import prompt_bool

        pool = {**gpu_pool, "capacity": "spot" if prompt_bool(get("spot"), True) else "on-demand"}
        return {"region": get("region") or self.default_region, "nodePools": [dict(self.system_pool), pool]}

    def price_basis(self) -> PriceBasis | None:
        """The catalog's list prices for this cloud (components/data/gpus.yaml `pricing`)."""
        from components.catalog import catalog

        return catalog().pricing.get(self.name)
