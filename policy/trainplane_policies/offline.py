"""The pack run offline, without the Pulumi CLI: planned resources of trainplane's offline engine
(infra.mockcloud) handed to each policy as the engine hands them (pulumi-policy v1.21.0
sdk/python/lib/pulumi_policy/policy.py, _PolicyAnalyzerServicer.Analyze and AnalyzeStack), behind
unknown_checking_proxy, with options (`protect`), the provider (a default provider's props from the stack
config, as the engine configures it) and, for stack policies, property dependencies as resources.

Resource policies get a resource's inputs; stack policies its OUTPUTS (pulumi v3.259.0
pkg/resource/deploy/step_generator.go AnalyzeResources: `Properties: v.Outputs`, "AnalyzeStack is called on
the final outputs of each resource"), in two phases, both run: `preview`, a first deploy's preview, where
what the provider computes and the program left unset is unknown; `deployed`, every later preview, where
it holds what the cloud answered (the offline engine's computed outputs per type, components/<cloud>/mock.py:
a GKE cluster's databaseEncryption DECRYPTED, a node pool's nodeCount). The engine runs AnalyzeStack in a
preview too: deployment_executor.go calls AnalyzeResources whenever steps succeeded, DryRun or not, and a
create step's outputs in a preview are the provider's Create(Preview: true) answer (step.go CreateStep.Apply).
Records are plain dicts, so a test can plant a violation by editing a copy.

`python -m policy.trainplane_policies check STACK` (from a trainplane checkout) prints each violation.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from inspect import isawaitable
from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from . import POLICIES

Record = dict[str, Any]
PHASES = ("preview", "deployed")


@functools.cache
def _answers() -> dict[str, Any]:
    from infra.mockcloud import mock_answers

    return mock_answers()[0]


def _computed(rec: Record) -> dict[str, Any]:
    """What the provider computes for a resource from its (possibly edited) inputs, as the offline engine
    answers it (infra.mockcloud, components/<cloud>/mock.py)."""
    answer = _answers().get(rec["type"])
    found = answer(rec["name"], copy.deepcopy(rec["inputs"])) if answer is not None else {}
    return {"id": f"{rec['name']}-id", **found}


def outputs(rec: Record, phase: str) -> dict[str, Any]:
    """A record's outputs as the engine hands them to a stack policy: its inputs (an edited copy's, so a
    planted violation shows) and what the provider computes, unknown in a first deploy's `preview` where
    the program did not set it (pulumi marshals every unknown as a sentinel string; the engine's own is
    UnknownStringValue, sdk/go/common/resource/plugin/rpc.go)."""
    inputs, computed = copy.deepcopy(rec["inputs"]), _computed(rec)
    if phase == "preview":
        return {**{k: UNKNOWN_STRING_VALUE for k in computed if k not in inputs}, **inputs}
    return {**inputs, **computed}


def records_of(result: Any, config: Mapping[str, str]) -> list[Record]:
    """The custom resources of an offline plan (infra.mockcloud.RunResult) with the stack's config."""
    return [
        {
            "type": r.type,
            "name": r.name,
            "urn": r.urn,
            "inputs": copy.deepcopy(dict(r.inputs)),
            "protect": r.protect,
            "provider": r.provider,
            "parent": r.parent,
            "deps": list(r.deps),
            "property_deps": {k: list(v) for k, v in r.property_deps.items()},
            "custom": r.custom,
            "config": dict(config),
        }
        for r in result.resources
        if r.custom and not r.type.startswith("pulumi:providers:")
    ]


def find(recs: list[Record], type_: str, contains: str = "") -> Record:
    """The first record of `type_` whose name contains `contains`."""
    return next(r for r in recs if r["type"] == type_ and contains in r["name"])


def _options(rec: Record) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=bool(rec["protect"]),
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=rec["parent"],
    )


def _provider(rec: Record) -> PolicyProviderResource | None:
    """The resource's default provider, configured from the stack config (`aws:region`, `gcp:project`)."""
    package = rec["type"].split(":", 1)[0]
    props = {k.split(":", 1)[1]: v for k, v in rec["config"].items() if k.startswith(f"{package}:")}
    urn = f"urn:pulumi:stack::trainplane::pulumi:providers:{package}::default"
    return PolicyProviderResource(
        f"pulumi:providers:{package}", unknown_checking_proxy(props), urn, "default"
    )


def resource_args(rec: Record, config: Mapping[str, Any] | None = None) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        resource_type=rec["type"],
        props=unknown_checking_proxy(copy.deepcopy(rec["inputs"])),
        urn=rec["urn"],
        name=rec["name"],
        opts=_options(rec),
        provider=_provider(rec),
        config=config,
        stack_tags=rec.get("stack_tags") or {},
    )


def stack_args(
    recs: list[Record], config: Mapping[str, Any] | None = None, phase: str = "deployed"
) -> StackValidationArgs:
    """The stack as AnalyzeStack hands it: every resource's outputs in `phase` (see `outputs`)."""
    by_urn = {
        r["urn"]: PolicyResource(
            r["type"],
            unknown_checking_proxy(outputs(r, phase)),
            r["urn"],
            r["name"],
            _options(r),
            _provider(r),
            None,
            [],
            {},
        )
        for r in recs
    }
    for r in recs:
        res = by_urn[r["urn"]]
        res.parent = by_urn.get(r["parent"])
        res.dependencies = [by_urn[u] for u in r["deps"] if u in by_urn]
        res.property_dependencies = {
            k: [by_urn[u] for u in urns if u in by_urn] for k, urns in r["property_deps"].items()
        }
    return StackValidationArgs(list(by_urn.values()), config)


def _run(result: Any) -> None:
    if isawaitable(result):
        asyncio.new_event_loop().run_until_complete(result)


def violations(
    recs: list[Record],
    only: str | None = None,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    phases: tuple[str, ...] = PHASES,
) -> dict[str, list[str]]:
    """Policy name -> the messages it reports over `recs` (every policy, or the one named `only`); stack
    policies in each of `phases`, each message once. A stack policy that lets an unknown escape reports
    nothing in that phase: the engine then shows it as not run, advisory (policy.py AnalyzeStack)."""
    found: dict[str, list[str]] = {}
    for policy in POLICIES:
        if only is not None and policy.name != only:
            continue
        cfg = (config or {}).get(policy.name)

        def report(message: str, urn: str | None = None, name: str = policy.name) -> None:
            if message not in found.get(name, []):
                found.setdefault(name, []).append(message)

        if isinstance(policy, StackValidationPolicy):
            for phase in phases:
                try:
                    _run(policy.validate(stack_args(recs, cfg, phase), report))
                except UnknownValueError:
                    continue
        elif isinstance(policy, ResourceValidationPolicy):
            for rec in recs:
                _run(policy.validate(resource_args(rec, cfg), report))
    return found


@contextmanager
def stack_named(name: str) -> Iterator[None]:
    """PULUMI_STACK as the engine sets it for the analyzer process."""
    old = os.environ.get("PULUMI_STACK")
    os.environ["PULUMI_STACK"] = name
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PULUMI_STACK", None)
        else:
            os.environ["PULUMI_STACK"] = old
