"""Run the real Pulumi program offline under the SDK's mock engine and record what it registers.

Used by `trainplane plan`/`render` and by the tests. Mocked clouds answer like the real APIs do: computed
outputs (endpoints, ARNs, DNS names) per resource type and realistic invoke results come from each
backend's package (components/<cloud>/mock.py, through CloudBackend.mock_answers).

Example:
    >>> from infra.mockcloud import run_stack
    >>> result = run_stack("aws-dev")  # doctest: +SKIP
    >>> [r.name for r in result.of_type("kubernetes:core/v1:Namespace")]  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import runpy
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings

from components.backends import MockAnswer
from infra import stackfile
from infra.resources import Resource, Resources, normal

__all__ = [
    "MockCloud",
    "RecordingMonitor",
    "Resource",
    "RunResult",
    "run_function",
    "run_program",
    "run_stack",
]

PROJECT = "trainplane"
T = TypeVar("T")
PROGRAM = Path(__file__).resolve().parent.parent / "__main__.py"


@dataclass
class RunResult(Resources):
    """What one run of the program registered and exported."""

    stack: str
    resources: list[Resource]
    outputs: dict[str, Any]
    secret_outputs: set[str] = field(default_factory=set)
    stack_references: list[str] = field(default_factory=list)
    invokes: list[str] = field(default_factory=list)


def mock_answers() -> tuple[dict[str, MockAnswer], dict[str, MockAnswer]]:
    """(computed outputs per resource type, answers per invoke token) of every registered backend, merged:
    each cloud brings its own (CloudBackend.mock_answers), keyed by its provider's tokens."""
    from components.backends import backends

    computed: dict[str, MockAnswer] = {}
    invokes: dict[str, MockAnswer] = {}
    for b in backends():
        answers = b.mock_answers()
        computed.update(answers.computed)
        invokes.update(answers.invokes)
    computed.setdefault("kubernetes:core/v1:Secret", _service_account_token)
    return computed, invokes


# What a cluster's token controller writes into a `kubernetes.io/service-account-token` Secret (base64
# `token`, `ca.crt`, `namespace`), and pulumi-kubernetes waits for (pulumi/pulumi-kubernetes#2048): a fleet
# builds the manager's kubeconfig for a worker from it (components/fleet).
OFFLINE_TOKEN = "offline-plan-token"
OFFLINE_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM="


def _service_account_token(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    if inputs.get("type") != "kubernetes.io/service-account-token":
        return {}
    import base64

    namespace = str((inputs.get("metadata") or {}).get("namespace") or "default")
    return {
        "data": {
            "token": base64.b64encode(OFFLINE_TOKEN.encode()).decode(),
            "ca.crt": OFFLINE_CA,
            "namespace": base64.b64encode(namespace.encode()).decode(),
        }
    }


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)


class MockCloud(pulumi_mocks.Mocks):
    """Answers resource registrations and invokes like the clouds would."""

    def __init__(self, stack_refs: Mapping[str, Mapping[str, Any]]):
        self.stack_refs = stack_refs
        self.reads: list[str] = []
        self.invokes: list[str] = []
        self.computed, self.answers = mock_answers()

    def new_resource(self, args: pulumi_mocks.MockResourceArgs):
        if args.typ == "pulumi:pulumi:StackReference":
            ref = str(args.inputs.get("name") or args.name)
            self.reads.append(ref)
            outputs = self.stack_refs.get(ref, self.stack_refs.get(ref.split("/")[-1]))
            if outputs is None:
                raise KeyError(f"no recorded outputs for stack reference {ref!r}")
            return [ref, {"name": ref, "outputs": dict(outputs), "secretOutputNames": []}]
        state = dict(args.inputs)
        computed = self.computed.get(args.typ)
        if computed is not None:
            state.update(computed(args.name, args.inputs))
        state.setdefault("id", f"{args.name}-id")
        return [state["id"], state]

    def call(self, args: pulumi_mocks.MockCallArgs):
        self.invokes.append(args.token)
        answer = self.answers.get(args.token)
        if answer is None:
            # An unmocked invoke silently returns {} in the SDK; fail loudly so tests notice.
            raise NotImplementedError(f"invoke {args.token} has no mock answer (CloudBackend.mock_answers)")
        return answer(args.token, dict(args.args))


def _urn(stack: str, project: str, parent_urn: str | None, type_: str, name: str) -> str:
    """A resource URN as the engine forms it: the parent's qualified type, then the resource's own."""
    qualified = type_
    if parent_urn and parent_urn.split("::")[2] != "pulumi:pulumi:Stack":
        qualified = f"{parent_urn.split('::')[2]}${type_}"
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def _inherited(child_type: str, child_name: str, parent_name: str, parent_alias: str) -> str:
    """The engine's inheritedChildAlias: the child under its parent's alias, its name's parent prefix
    replaced by the alias's name."""
    name = child_name
    if child_name.startswith(parent_name):
        name = parent_alias.split("::")[-1] + child_name[len(parent_name) :]
    stack, project = parent_alias.split("::")[0].removeprefix("urn:pulumi:"), parent_alias.split("::")[1]
    return _urn(stack, project, parent_alias, child_type, name)


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: MockCloud):
        super().__init__(mocks)
        self.records: list[Resource] = []
        self._aliases: dict[str, tuple[str, ...]] = {}
        self._engine_urns: dict[str, str] = {}

    def _alias_urns(self, request, urn: str) -> tuple[str, ...]:
        """Every old URN the engine would match to this registration, by the engine's rules
        (pulumi pkg/resource/deploy/step_generator.go: collapseAliasToUrn, inheritedChildAlias,
        generateAliases): the resource's own aliases, collapsed against its current parent, and each of
        them and its own URN re-parented under every alias of its parent (a child named after its parent
        takes the parent alias's name as its prefix). The engine uses the one alias of the parent that
        matched an old resource; every alias of the parent is a superset of that."""
        stack, project = urn.split("::")[0].removeprefix("urn:pulumi:"), urn.split("::")[1]
        parent = request.parent or None
        own = {u for alias in request.aliases for u in self._collapse(alias, request, stack, project)}
        out = set(own)
        if parent is not None:
            parent_name = parent.split("::")[-1]
            for parent_alias in self._aliases.get(parent, ()):
                out.add(_inherited(request.type, request.name, parent_name, parent_alias))
                for alias_urn in own:
                    child_type = alias_urn.split("::")[2].split("$")[-1]
                    out.add(_inherited(child_type, alias_urn.split("::")[-1], parent_name, parent_alias))
        return tuple(sorted(out))

    def _collapse(self, alias, request, stack: str, project: str) -> list[str]:
        """One alias as URNs (collapseAliasToUrn); an alias parent that was itself aliased answers to
        each of its aliases too."""
        if alias.urn:
            return [alias.urn]
        spec = alias.spec
        if spec.noParent:
            parents: list[str | None] = [None]
        elif spec.parentUrn:
            given = spec.parentUrn
            parents = [self._engine_urns.get(given, given), *self._aliases.get(given, ())]
        else:
            parents = [self._engine_urns.get(request.parent) if request.parent else None]
        return [
            _urn(
                spec.stack or stack,
                spec.project or project,
                None if p is not None and p.split("::")[2] == "pulumi:pulumi:Stack" else p,
                spec.type or request.type,
                spec.name or request.name,
            )
            for p in parents
        ]

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            stack, project = (
                response.urn.split("::")[0].removeprefix("urn:pulumi:"),
                response.urn.split("::")[1],
            )
            parent_urn = self._engine_urns.get(request.parent) if request.parent else None
            engine_urn = _urn(stack, project, parent_urn, request.type, request.name)
            self._engine_urns[response.urn] = engine_urn
            aliases = tuple(a for a in self._alias_urns(request, response.urn) if a != engine_urn)
            self._aliases[response.urn] = aliases
            deps = set(request.dependencies)
            for prop in request.propertyDependencies.values():
                deps.update(prop.urns)
            self.records.append(
                Resource(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent or None,
                    custom=bool(request.custom),
                    deps=tuple(sorted(deps)),
                    inputs=normal(_plain(rpc.deserialize_properties(request.object))),
                    provider=request.provider or None,
                    ignore_changes=tuple(request.ignoreChanges),
                    alias_urns=aliases,
                    engine_urn=engine_urn,
                )
            )
        return response


def run_program(
    config: Mapping[str, str],
    stack: str,
    stack_refs: Mapping[str, Mapping[str, Any]] | None = None,
    secret_keys: list[str] | None = None,
    program: Path = PROGRAM,
) -> RunResult:
    """Run `program` with `config` under mocks in a fresh event loop and return what it registered.

    Exceptions raised by the program propagate (pulumi.RunError for invalid config).
    """
    root_dir = str(program.resolve().parent.parent)
    if root_dir not in sys.path:
        sys.path.insert(0, root_dir)
    result, _ = run_function(
        lambda: runpy.run_path(str(program), run_name="__main__"), stack, config, stack_refs, secret_keys
    )
    return result


def run_function(
    build: Callable[[], T],
    stack: str = "test",
    config: Mapping[str, str] | None = None,
    stack_refs: Mapping[str, Mapping[str, Any]] | None = None,
    secret_keys: list[str] | None = None,
) -> tuple[RunResult, T]:
    """Run `build` (a Pulumi program as a function: it instantiates components) under mocks in a fresh
    event loop; return what it registered and what `build` returned (e.g. the component itself).

    Example, one component of the library under the mock engine:
        >>> result, ns = run_function(lambda: pulumi_kubernetes.core.v1.Namespace("ns"))  # doctest: +SKIP
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    settings.ROOT.set(None)
    mocks = MockCloud(stack_refs or {})
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(dict(config or {}), list(secret_keys or []))
    outputs: dict[str, Any] = {}
    secret: set[str] = set()
    returned: list[T] = []

    @pulumi.runtime.test
    def _run():
        returned.append(build())
        root = settings.get_root_resource()
        names = list(root.outputs)

        async def _collect():
            for name in names:
                out = pulumi.Output.from_input(root.outputs[name])
                outputs[name] = _plain(await out.future())
                if await out.is_secret():
                    secret.add(name)

        return pulumi.Output.from_input(asyncio.ensure_future(_collect()))

    try:
        _run()
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    result = RunResult(
        stack=stack,
        # In URN order: the engine records each registration as its inputs resolve, an order that varies
        # from run to run, and every report made from a plan (verify, render, dumps) must not.
        resources=sorted(monitor.records, key=lambda r: r.urn),
        outputs=outputs,
        secret_outputs=secret,
        stack_references=mocks.reads,
        invokes=mocks.invokes,
    )
    return result, returned[0]


def run_stack(
    stack: str | Path, stack_refs: Mapping[str, Mapping[str, Any]] | None = None, root: Path | None = None
) -> RunResult:
    """Plan a stack file (`aws-dev` or a path) under mocks."""
    sf = stackfile.load(stack, root)
    return run_program(sf.config, sf.name, stack_refs, sf.secret_keys)
