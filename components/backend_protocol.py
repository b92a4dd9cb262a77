"""The `CloudBackend` protocol: every hook a cloud backend answers, grouped by who asks (the spec and
catalog, plan and cost, the offline engine), and the small types they pass.

A backend implements what its cloud adds and inherits the rest from `BackendDefaults`
(components/backend_defaults.py); the registry is components/backends.py. What `trainplane verify` asks a
cloud is not here: it takes verify's types, so it is verify's `CloudVerifier` (infra/verify/verifier.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pulumi

    from components.bundle import ClusterBundle
    from components.catalog import CatalogSection, MachineShape, PriceBasis
    from components.spec import NodePoolSpec, PlatformSpec, Spec, StorageSpec


# The entry-point group a distribution declares its backends in (pyproject.toml
# [project.entry-points."trainplane.backends"]).
ENTRY_POINT_GROUP = "trainplane.backends"
# A template prompt: the answer to a `trainplane:<key>` question, None when not answered.
Prompt = Callable[[str], "str | None"]


@dataclass(frozen=True)
class CapacityKinds:
    """The capacity kinds one cloud offers, and how its backend explains them to other clouds' stacks."""

    offered: tuple[str, ...]
    # An offered kind -> what it is on this cloud, told to a stack on a cloud that lacks it.
    about: Mapping[str, str] = field(default_factory=dict)
    # Another cloud's kind -> what to use here instead, told to stacks that ask for it on a cloud without it.
    instead: Mapping[str, str] = field(default_factory=dict)
    # An offered kind -> why its pools start from zero nodes (minNodes must be 0).
    from_zero: Mapping[str, str] = field(default_factory=dict)
    # An offered kind the cloud sells for some machine types only -> those types (absent: every type).
    only_for: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def for_machine(self, machine: str) -> tuple[str, ...]:
        """The offered kinds a pool of `machine` can have."""
        return tuple(k for k in self.offered if k not in self.only_for or machine in self.only_for[k])


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
    # The name of the cloud's section of the Kubernetes support calendar (components/k8s_support.py, which
    # composes `support_section()` of every backend), None: no calendar (an existing cluster): what
    # kubernetesVersion may be and what its control plane costs.
    support_calendar: str | None

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

    # catalog, spec keys, regions, quickstart (b1)
    def catalog_section(self) -> CatalogSection | None:
        """This cloud's machines for the GPU catalog (components.catalog); None: its pools' machines
        are not in the catalog (nodes that already exist)."""
        ...

    def support_section(self) -> Mapping[str, Any] | None:
        """This cloud's section of the Kubernetes support calendar (the one `support_calendar` names):
        `minors` (released, standardEnd, end), `standardHourly`, `extendedHourly`, with sources and dates;
        None: no calendar."""
        ...

    def support_file(self) -> str | None:
        """Where that section is kept (a path in the source tree), named in error lines."""
        ...

    def display_name(self) -> str:
        """The cloud's name in prose ("AWS"), for messages such as "not an AWS region"."""
        ...

    def regions(self) -> Sequence[str]:
        """The regions a platform on this cloud may name; empty: any (the cloud has no list)."""
        ...

    def machine_type_of(self, pool: NodePoolSpec) -> str | None:
        """The machine type `pool` names under this cloud's own key for it (`instanceType`...), if any: what
        price overrides are keyed by when the catalog does not know it."""
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
