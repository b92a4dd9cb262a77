"""One read-only model of a plan, whichever way it was made.

A plan is what a deploy would send: Kubernetes objects, Helm releases with their values, cloud resources,
and the stack's outputs. It comes from running the stack offline (`infra.mockcloud.RunResult`, as
`trainplane plan` does) or from a plan dump (`trainplane plan STACK --dump FILE`, read by
infra/verify/dump.py). Both become a `Plan`; the checks never see where it came from. The cloud and the
Kubernetes version are read from the plan itself (the cluster resource's inputs, else the stack's
config), never from flags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from components.backends import CloudBackend, backend, backend_names
from components.job_fleet_stack import FleetOutputs
from components.outputs import NodePoolInfo, PlatformOutputs, TeamOutput
from infra.resources import HELM_RELEASE, Resource, Resources, normal
from infra.verify.verifiers import cloud_verifier, verifier

# The engine's record of a resource is the plan's: one model (infra/resources.py), under verify's name.
PlanResource = Resource
M = TypeVar("M", bound=BaseModel)
STACK_REFERENCE = "pulumi:pulumi:StackReference"


class PlanError(Exception):
    """A plan that cannot be read (bad dump file, unknown format, a platform's outputs that are not
    PlatformOutputs): one line naming the file or the key."""


@dataclass(frozen=True)
class K8sObject:
    """A Kubernetes object the plan applies, with the resource that sends it."""

    resource: PlanResource
    body: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.body.get("metadata") or {}).get("name", self.resource.name))

    @property
    def namespace(self) -> str | None:
        return (self.body.get("metadata") or {}).get("namespace")

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.body.get("metadata") or {}).get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        return dict((self.body.get("metadata") or {}).get("annotations") or {})

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.body.get("spec") or {}

    @property
    def ref(self) -> str:
        """How a failure line names it: Kind namespace/name."""
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass(frozen=True)
class HelmRelease:
    resource: PlanResource
    name: str
    namespace: str
    chart: str
    version: str | None
    values: Mapping[str, Any]

    @property
    def ref(self) -> str:
        return f"helm release {self.namespace}/{self.name} ({self.chart} {self.version})"


@dataclass(frozen=True)
class Plan(Resources):
    """A platform's or a job's plan. A job plan carries its platform's plan in `platform`."""

    stack: str
    resources: tuple[PlanResource, ...]
    outputs: Mapping[str, Any]
    cloud: str
    kubernetes_version: str | None
    kind: str  # "platform" | "job" | "fleet"
    # The stack's own config object (trainplane:platform / trainplane:job), when the plan was made here.
    config: Mapping[str, Any] | None = None
    platform: Plan | None = None
    source: str = "offline plan"
    _objects: tuple[K8sObject, ...] = field(default=(), repr=False)
    # A fleet stack's plan: its manager's and workers' plans too (infra/verify/fleet_model.FleetPlan).
    fleet: Any = field(default=None, repr=False)
    # The outputs parsed into the stack's own typed contract, once, by `build`: a platform's
    # (components/outputs.py) and a fleet's (components/job_fleet_stack.py); None for the other kinds (a
    # job's outputs are its own) and for a plan that records no outputs. Checks read these; `outputs`
    # keeps the wire form, for what hands the outputs on (a job program's stack references, dumps).
    platform_outputs: PlatformOutputs | None = field(default=None, repr=False)
    fleet_outputs: FleetOutputs | None = field(default=None, repr=False)

    # ---- lookups (of_type, by_urn, named, children: Resources) -------------------------------------
    def objects(self, kind: str | None = None, namespace: str | None = None) -> list[K8sObject]:
        return [
            o
            for o in self._objects
            if (kind is None or o.kind == kind) and (namespace is None or o.namespace == namespace)
        ]

    def releases(self, chart: str | None = None) -> list[HelmRelease]:
        out = []
        for r in self.of_type(HELM_RELEASE):
            i = r.inputs
            chart_ref = str(i.get("chart", ""))
            name = chart_ref.rstrip("/").rsplit("/", 1)[-1]
            if chart is not None and name != chart:
                continue
            out.append(
                HelmRelease(
                    resource=r,
                    name=str(i.get("name") or r.name),
                    namespace=str(i.get("namespace") or "default"),
                    chart=name,
                    version=i.get("version"),
                    values=i.get("values") or {},
                )
            )
        return out

    def cluster_resource(self) -> PlanResource | None:
        return cloud_verifier(self).plan_cluster(self.resources)

    def replaced(self, edit: Callable[[PlanResource], Mapping[str, Any] | None]) -> Plan:
        """A copy whose resources' inputs `edit` may replace (return new inputs, or None to keep;
        return {"__drop__": True} to leave the resource out). For what-if checks and tests."""
        kept: list[PlanResource] = []
        for r in self.resources:
            new = edit(r)
            if new is None:
                kept.append(r)
            elif not new.get("__drop__"):
                kept.append(replace(r, inputs=normal(dict(new))))
        return build(
            self.stack, tuple(kept), self.outputs, self.config, self.platform, self.source, kind=self.kind
        )

    def with_platform(self, platform: Plan) -> Plan:
        return build(self.stack, self.resources, self.outputs, self.config, platform, self.source)

    def iter_objects(self) -> Iterator[K8sObject]:
        return iter(self._objects)

    @property
    def teams(self) -> list[TeamOutput]:
        """The platform's teams (none for a plan that is not a platform's)."""
        return list(self.platform_outputs.teams) if self.platform_outputs else []

    @property
    def node_pools(self) -> list[NodePoolInfo]:
        """The platform's node pools (none for a plan that is not a platform's)."""
        return list(self.platform_outputs.node_pools) if self.platform_outputs else []

    @property
    def minor(self) -> tuple[int, int] | None:
        if not self.kubernetes_version:
            return None
        parts = str(self.kubernetes_version).split(".")
        try:
            return int(parts[0]), int(parts[1])
        except (ValueError, IndexError):
            return None


def _resource(raw: Mapping[str, Any]) -> PlanResource:
    return PlanResource(
        urn=str(raw["urn"]),
        type=str(raw["type"]),
        name=str(raw["name"]),
        parent=raw.get("parent") or None,
        custom=bool(raw.get("custom", True)),
        deps=tuple(raw.get("deps") or ()),
        inputs=normal(dict(raw.get("inputs") or {})),
        provider=raw.get("provider") or None,
    )


def cloud_backend(plan: Plan) -> CloudBackend:
    """The backend of the cloud a plan runs on (a job's: its platform's): what the library knows of it
    (its support calendar); what verify asks the cloud is its verifier's (`cloud_verifier`)."""
    return backend(plan.cloud)


def on_existing_cluster(cloud: str) -> bool:
    """Whether a plan of `cloud` runs on a cluster that exists (no cloud layer of its own)."""
    return cloud in backend_names() and verifier(cloud).adopts_existing_clusters()


def _claimed(resources: tuple[PlanResource, ...]) -> tuple[str, PlanResource] | None:
    """The cloud whose cluster resource the plan creates, with that resource (each cloud's verifier knows
    the type of its own)."""
    for name in backend_names():
        cluster = verifier(name).plan_cluster(resources)
        if cluster is not None:
            return name, cluster
    return None


def _cloud(resources: tuple[PlanResource, ...], outputs: Mapping[str, Any], config: Mapping | None) -> str:
    names = backend_names()
    if outputs.get("cloud") in names:
        return str(outputs["cloud"])
    if config and config.get("cloud") in names:
        return str(config["cloud"])
    claimed = _claimed(resources)
    if claimed is not None:
        return claimed[0]
    # No cloud named and no cluster created: the plan runs on a cluster that exists.
    return next((n for n in names if verifier(n).adopts_existing_clusters()), "")


def _version(resources: tuple[PlanResource, ...], config: Mapping | None) -> str | None:
    claimed = _claimed(resources)
    version = verifier(claimed[0]).plan_kubernetes_version(claimed[1]) if claimed else None
    if version:
        return version
    cluster = (config or {}).get("cluster") or {}
    return str(cluster["kubernetesVersion"]) if cluster.get("kubernetesVersion") else None


def build(
    stack: str,
    raw_resources: list[Mapping[str, Any]] | tuple[PlanResource, ...],
    outputs: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    platform: Plan | None = None,
    source: str = "offline plan",
    *,
    kind: str | None = None,
) -> Plan:
    """The plan; `kind` where the caller knows what the stack is (a dump records it), else guessed: a job
    has a platform, or reads one and has no cluster or pools of its own; a fleet exports `fleetName`. PlanError
    when the outputs are not those of the stack's kind (a platform's that PlatformOutputs refuses, a fleet's
    that FleetOutputs does)."""
    resources = tuple(r if isinstance(r, PlanResource) else _resource(r) for r in raw_resources)
    outputs = normal(dict(outputs or {}))
    is_job = platform is not None or (
        any(r.type == STACK_REFERENCE for r in resources)
        and on_existing_cluster(_cloud(resources, outputs, config))
        and not outputs.get("nodePools")
    )
    if kind is None:
        # A fleet exports its name (what a job stack on it checks first: components/job_fleet_stack.py).
        kind = "job" if is_job else "fleet" if outputs.get("fleetName") is not None else "platform"
    if is_job and platform is not None:
        cloud, version = platform.cloud, platform.kubernetes_version
    else:
        cloud, version = _cloud(resources, outputs, config), _version(resources, config)
    objects = tuple(
        K8sObject(r, r.inputs) for r in resources if r.is_kubernetes_object and r.inputs.get("kind")
    )
    return Plan(
        stack=stack,
        resources=resources,
        outputs=outputs,
        cloud=cloud,
        kubernetes_version=version,
        kind=kind,
        config=config,
        platform=platform,
        source=source,
        _objects=objects,
        platform_outputs=typed_outputs(stack, kind, outputs, PlatformOutputs, "platform"),
        fleet_outputs=typed_outputs(stack, kind, outputs, FleetOutputs, "fleet"),
    )


def typed_outputs(stack: str, kind: str, outputs: Mapping[str, Any], model: type[M], of: str) -> M | None:
    """A `of` stack's outputs parsed into `model` (keys it does not know ignored, keys a stack deployed
    before them lacks defaulted); None for a stack of another kind or one with no outputs recorded.
    PlanError naming the first key it refuses."""
    if kind != of or not outputs:
        return None
    try:
        return model.model_validate(outputs)
    except ValidationError as e:
        from trainer.contract import format_validation_error

        first = format_validation_error(e, model, "outputs")[0]
        raise PlanError(f"stack {stack}: {first} (the {of} stack's outputs)") from None


def from_run(
    result: Any,
    config: Mapping[str, Any] | None = None,
    platform: Plan | None = None,
    *,
    kind: str | None = None,
) -> Plan:
    """A plan from `infra.mockcloud.RunResult` (what `trainplane plan` runs): its very records, which the
    engine already holds with the program's numbers (infra/resources.py); `kind` as for `build`."""
    return build(
        result.stack, tuple(result.resources), result.outputs, config, platform, "offline plan", kind=kind
    )


# How the engine records a secret value in a resource's inputs (pulumi/pulumi@v3.272.0
# sdk/python/lib/pulumi/runtime/rpc.py): {_special_sig_key (this): _special_secret_sig, "value": the value}.
SECRET_SIG = "4dabf18193072939515e22adb298388d"


def unsecret(value: Any) -> Any:
    if isinstance(value, dict) and SECRET_SIG in value:
        return value.get("value")
    return value
