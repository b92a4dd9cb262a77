"""Existing users have deployed these stacks: a change of a resource's name, type or parent type replaces
it. Each reference stack's URNs are checked in (tests/data/urns/<stack>.txt); a URN that disappears must be
carried by a `pulumi.Alias` on the resource that replaces it, and a new URN must be added to the list on
purpose.

Regenerate after an intended change: `python tests/unit/test_urns.py --update` (then review the diff).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from infra.mockcloud import RunResult, run_stack  # noqa: E402

URNS = ROOT / "tests" / "data" / "urns"
PLATFORM_STACKS = sorted(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml")
    for p in (ROOT / "stacks").glob("Pulumi.*.yaml")
    if "trainplane:platform" in p.read_text()
)
# Job stacks and the platform whose recorded outputs they are planned on.
JOB_STACKS = {"gpt-small-aws-dev": "aws-dev"}


@functools.cache
def plan(stack: str) -> RunResult:
    if stack in JOB_STACKS:
        platform = plan(JOB_STACKS[stack])
        return run_stack(stack, {JOB_STACKS[stack]: platform.outputs}, ROOT)
    return run_stack(stack, None, ROOT)


def urns(result: RunResult) -> list[str]:
    return sorted(r.engine_urn for r in result.resources)


def aliased(result: RunResult) -> set[str]:
    return {a for r in result.resources for a in r.alias_urns}


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, *JOB_STACKS])
def test_reference_stacks_keep_their_resource_names(stack):
    recorded = (URNS / f"{stack}.txt").read_text().split()
    result = plan(stack)
    now = set(urns(result))
    lost = [u for u in recorded if u not in now and u not in aliased(result)]
    assert not lost, f"{len(lost)} URN(s) of {stack} would be replaced (add pulumi.Alias): {lost[:5]}"
    new = sorted(now - set(recorded))
    assert not new, f"{len(new)} new URN(s) in {stack}; add them to tests/data/urns on purpose: {new[:5]}"


if __name__ == "__main__" and "--update" in sys.argv:
    URNS.mkdir(parents=True, exist_ok=True)
    for stack in [*PLATFORM_STACKS, *JOB_STACKS]:
        (URNS / f"{stack}.txt").write_text("\n".join(urns(plan(stack))) + "\n")
        print(stack, len(urns(plan(stack))))
