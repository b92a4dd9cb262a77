"""Plans for the tests: run the real program (infra/__main__.py) in-process under the mock engine.

- `planned("aws-dev")`: the plan of a reference stack, made once per test process and shared by every
  test that only reads it (job stacks are planned on their platform's planned outputs);
- `plan_object({...})` (and tests/conftest.py's `plan_platform` fixture): a platform object given inline
  (mutated copies of the reference stacks, property-based inputs), planned fresh each call;
- tests/conftest.py's `plan_stack("aws-dev")` fixture: a fresh plan of a stack file;
- `one(result, type_)`, `upstream(result, resource)`: lookups the tests share.

Each plan gets a fresh event loop and a fresh root stack, so tests do not leak resources into each other.
Under xdist the cached plans are also shared between the workers (`share_plans`, set by tests/conftest.py):
the first worker to need one plans it and writes it beside the others; the rest read that file.
"""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from infra import stackfile
from infra.mockcloud import Resource, RunResult, run_program
from tests.helpers import tiers
from tests.helpers.session import exclusive

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "stacks"
# Job stacks and the platform stack whose planned outputs they read.
JOB_STACKS = {
    "gpt-small-aws-dev": "aws-dev",
    "gpt-small-aws-h100-reserved": "aws-h100-reserved",
    "gpt-small-aws-gb200": "aws-gb200",
    "gpt-small-gcp-gb200": "gcp-gb200",
}
# Fleet stacks and the platform stacks (manager first, then workers) whose planned outputs they read.
FLEET_STACKS = {"fleet-research": ("aws-fleet-manager", "aws-h100-reserved", "gcp-h100-dws", "onprem-dev")}
# Job stacks on a fleet (job.fleetStack) and that fleet stack: they read its outputs and its platforms'.
FLEET_JOB_STACKS = {"gpt-small-fleet-research": "fleet-research"}


def stack_refs(stack: str) -> dict[str, Any] | None:
    """The planned outputs a job or fleet stack reads through its StackReferences (None for a platform)."""
    if stack in JOB_STACKS:
        return {JOB_STACKS[stack]: planned(JOB_STACKS[stack]).outputs}
    if stack in FLEET_STACKS:
        return {p: planned(p).outputs for p in FLEET_STACKS[stack]}
    if stack in FLEET_JOB_STACKS:
        fleet = FLEET_JOB_STACKS[stack]
        return {fleet: planned(fleet).outputs, **(stack_refs(fleet) or {})}
    return None


def stack_files() -> list[Path]:
    return sorted(STACKS.glob("Pulumi.*.yaml"))


def platform_object(stack: str) -> dict[str, Any]:
    """A deep copy of a reference stack's `trainplane:platform` object, to mutate in a test."""
    obj = stackfile.load(stack, ROOT).object("trainplane:platform")
    assert isinstance(obj, dict), f"{stack} is not a platform stack"
    return copy.deepcopy(obj)


def config_for(platform: dict[str, Any], extra: dict[str, str] | None = None) -> dict[str, str]:
    cloud = platform.get("cloud")
    config = {"trainplane:platform": json.dumps(platform)}
    if cloud == "aws" and platform.get("region"):
        config["aws:region"] = platform["region"]
    if cloud == "gcp":
        config["gcp:project"] = platform.get("project", "")
        config["gcp:region"] = platform.get("region", "")
    config.update(extra or {})
    return config


def planned(stack: str) -> RunResult:
    """The plan of a reference stack, once per test process: treat it as read-only."""
    tiers.note(tiers.PLANS)
    return _planned(stack)


@cache
def _planned(stack: str) -> RunResult:
    sf = stackfile.load(stack, ROOT)
    return cached_run_program(sf.config, sf.name, stack_refs(stack), sf.secret_keys)


_RUNS: dict[str, RunResult] = {}
# The session's folder the xdist workers share plans through (None: this process keeps its own).
_SHARED: Path | None = None


def share_plans(folder: Path | None) -> None:
    """Share the cached plans of this session through `folder` (tests/conftest.py, once per worker)."""
    global _SHARED
    _SHARED = folder


def _shared_run(key: str, run: Any) -> RunResult:
    """The plan `run()` makes, planned by the first worker that needs it and read by the others. A run that
    raises writes nothing, so every worker sees the error itself."""
    assert _SHARED is not None
    name = hashlib.sha256(key.encode()).hexdigest()[:24]
    path = _SHARED / f"{name}.pickle"
    with exclusive(_SHARED / f"{name}.lock"):
        if path.exists():
            result: RunResult = pickle.loads(path.read_bytes())
            return result
        result = run()
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(result))
        tmp.rename(path)
        return result


def cached_run_program(
    config: Mapping[str, str],
    stack: str,
    stack_refs: Mapping[str, Mapping[str, Any]] | None = None,
    secret_keys: list[str] | None = None,
    program: Path | None = None,
) -> RunResult:
    """infra.mockcloud.run_program, once per test process for the same inputs (read-only results): the
    reference stacks' plans that `planned` and the in-process CLI (tests/helpers/cli.py) share."""
    tiers.note(tiers.PLANS)
    # The exact inputs, key order included: a plan is shared only with a request of the very same inputs.
    key = json.dumps(
        [dict(config), stack, stack_refs, sorted(secret_keys or []), str(program)],
        default=repr,
    )
    if key not in _RUNS:
        extra = {"program": program} if program is not None else {}

        def run() -> RunResult:
            return run_program(config, stack, stack_refs, secret_keys, **extra)

        _RUNS[key] = _shared_run(key, run) if _SHARED is not None else run()
    return _RUNS[key]


def plan_object(
    platform: dict[str, Any], stack: str = "test", extra: dict[str, str] | None = None
) -> RunResult:
    """A fresh plan of a platform object given inline (the engine notes its tier: tests/conftest.py)."""
    return run_program(config_for(platform, extra), stack)


def one(result: RunResult, type_: str, name: str | None = None) -> Resource:
    """The one resource of `type_` (named `name`) in a plan."""
    found = [r for r in result.of_type(type_) if name is None or r.name == name]
    assert len(found) == 1, f"{len(found)} {type_} named {name!r}: {[r.name for r in result.of_type(type_)]}"
    return found[0]


def upstream(result: RunResult, res: Resource) -> set[str]:
    """URNs `res` waits for, directly or through other resources' dependencies (parents excluded)."""
    by_urn = result.by_urn()
    seen: set[str] = set()
    todo = list(res.deps)
    while todo:
        urn = todo.pop()
        if urn in seen:
            continue
        seen.add(urn)
        dep = by_urn.get(urn)
        if dep is not None:
            todo.extend(dep.deps)
            # Waiting for a component means waiting for its children.
            if not dep.custom:
                todo.extend(c.urn for c in result.children(dep))
    return seen
