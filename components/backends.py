"""The cloud backends of GpuPlatform: one `CloudBackend` protocol and a registry of plug-ins by name.

A backend is everything trainplane knows about one place clusters come from (AWS, GCP, a cluster that
already exists): the stack keys only it understands and its rules for them, the machines its pools are
made of, and how it builds the cloud layer whose `ClusterBundle` (with its `CloudProfile`) the in-cluster
layer runs on. Nothing outside a backend's own package names its cloud.

The built-in backends are registered by module path and imported on first use, so an AWS stack never
loads the GCP backend's SDK (and a backend module itself imports its SDK only in `build`).

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pulumi

    from components.bundle import ClusterBundle
    from components.catalog import Cloud, MachineShape
    from components.spec import NodePoolSpec, PlatformSpec, Spec, StorageSpec
    from infra.verify.cloud import CloudReport
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject, PlanResource
    from infra.verify.report import CheckResult

    # verify `identity`: (ctx, res, team, its ServiceAccount) -> the object key patterns the team's cloud
    # identity may write (checkpoint URIs must fall inside them).
    TeamIdentityCheck = Callable[[Context, CheckResult, Mapping[str, Any], K8sObject], list[str]]


@dataclass(frozen=True, kw_only=True)
class BuildArgs:
    """What GpuPlatform hands a backend to build the cloud layer from."""

    spec: PlatformSpec
    # The kubeconfig of a cluster that already exists (a secret); backends that create clusters ignore it.
    kubeconfig: pulumi.Input[str] | None = None


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


class BackendDefaults:
    """What a plain cluster with no cloud features answers to the hooks every backend inherits: a
    backend overrides only what its cloud adds. Hooks import what they need inside their bodies, so that
    loading a backend never imports the verify package or a cloud SDK."""

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
    # name -> module path (imported lazily; the module's `BACKEND` is the backend) or the backend itself
    entries: dict[str, str | CloudBackend] = field(default_factory=dict)


_REGISTRY = _Registry(
    {
        "aws": "components.aws.backend",
        "gcp": "components.gcp.backend",
        "kubernetes": "components.kubernetes.backend",
    }
)


def register_backend(name: str, backend: str | CloudBackend) -> None:
    """Make `cloud: <name>` available: `backend` is a CloudBackend, or the path of a module whose
    `BACKEND` attribute is one (imported when a stack first asks for it). Re-registering replaces."""
    _REGISTRY.entries[name] = backend


def unregister_backend(name: str) -> None:
    """Remove a backend registered with `register_backend` (tests clean up with it)."""
    _REGISTRY.entries.pop(name, None)


def backend_names() -> tuple[str, ...]:
    """Every registered cloud name, in registration order (built-ins first)."""
    return tuple(_REGISTRY.entries)


def backend(name: str) -> CloudBackend:
    """The backend registered as `name`; KeyError when there is none."""
    entry = _REGISTRY.entries[name]
    if isinstance(entry, str):
        loaded = importlib.import_module(entry).BACKEND
        if loaded.name != name:
            raise ValueError(f"module {entry} provides backend {loaded.name!r}, registered as {name!r}")
        _REGISTRY.entries[name] = loaded
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
    verify facts in its `verify_facts.yaml`, and pools made of catalog machines. A subclass names its
    cloud, package, rules module and grace, says which key names a pool's machine, and builds."""

    name: Cloud  # also the catalog's name for the cloud
    package: str  # e.g. "components.aws": holds rules.py and verify_facts.yaml
    rules: ModuleType  # KEYS, TWINS, check, check_pool, check_storage
    keys: Mapping[type[Spec], frozenset[str]]
    twins: Mapping[str, str]
    preemption_grace_seconds: int

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        return self.rules.check(spec, root)

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        return self.rules.check_pool(spec, pool, path)

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        return self.rules.check_storage(spec, storage, path)

    def machine_type_of(self, pool: NodePoolSpec) -> str | None:
        """The machine the pool's config names (`instanceType`, `machineType`), if any."""
        raise NotImplementedError

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
