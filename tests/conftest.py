"""Shared fixtures: run the real program (infra/__main__.py) under the mock engine.

`plan_stack("aws-dev")` plans a file in stacks/; `plan_platform({...})` plans a platform object given
inline (mutated copies of the reference stacks, property-based inputs). Each call gets a fresh event
loop and a fresh root stack, so tests do not leak resources into each other.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra import stackfile
from infra.mockcloud import RunResult, run_program, run_stack

ROOT = Path(__file__).resolve().parent.parent
STACKS = ROOT / "stacks"


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


@pytest.fixture
def plan_stack() -> Callable[..., RunResult]:
    def _plan(stack: str, stack_refs: dict[str, Any] | None = None) -> RunResult:
        return run_stack(stack, stack_refs, ROOT)

    return _plan


@pytest.fixture
def plan_platform() -> Callable[..., RunResult]:
    def _plan(
        platform: dict[str, Any], stack: str = "test", extra: dict[str, str] | None = None
    ) -> RunResult:
        return run_program(config_for(platform, extra), stack)

    return _plan
