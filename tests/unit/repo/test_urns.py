"""Existing users have deployed these stacks: a change of a resource's name, type or parent type replaces
it. Each reference stack's URNs are checked in (tests/data/urns/<stack>.txt); a URN that disappears must be
carried by a `pulumi.Alias` on the resource that replaces it (the resource then answers to the recorded
URN, as the engine matches it), and a new resource must be added to the list on purpose.

Regenerate only after adding resources on purpose: `python tests/unit/repo/test_urns.py --update` (then review
the diff); never to make a rename pass, which must carry an alias instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

ROOT = Path(__file__).resolve().parents[3]  # run as a script too: tests.helpers is not importable yet
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from infra.mockcloud import RunResult  # noqa: E402
from tests.helpers.plans import FLEET_JOB_STACKS, FLEET_STACKS, JOB_STACKS, planned  # noqa: E402

URNS = ROOT / "tests" / "data" / "urns"
PLATFORM_STACKS = sorted(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml")
    for p in (ROOT / "stacks").glob("Pulumi.*.yaml")
    if "trainplane:platform" in p.read_text()
)
plan = planned


def urns(result: RunResult) -> list[str]:
    return sorted(r.engine_urn for r in result.resources)


def claims(result: RunResult) -> dict[str, set[str]]:
    """Each resource's URN -> every URN it answers to (its own and its aliases)."""
    return {r.engine_urn: {r.engine_urn, *r.alias_urns} for r in result.resources}


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, *JOB_STACKS, *FLEET_STACKS, *FLEET_JOB_STACKS])
def test_reference_stacks_keep_their_resource_names(stack):
    recorded = set((URNS / f"{stack}.txt").read_text().split())
    answers = claims(plan(stack))
    lost = sorted(u for u in recorded if not any(u in c for c in answers.values()))
    assert not lost, f"{len(lost)} URN(s) of {stack} would be replaced (add pulumi.Alias): {lost[:5]}"
    # Two resources claiming one deployed resource is an error in the engine (duplicate alias).
    double = sorted(u for u in recorded if sum(u in c for c in answers.values()) > 1)
    assert not double, f"URN(s) of {stack} claimed twice: {double[:5]}"
    new = sorted(u for u, c in answers.items() if not c & recorded)
    assert not new, f"{len(new)} new URN(s) in {stack}; add them to tests/data/urns on purpose: {new[:5]}"


def test_a_retyped_node_pool_answers_to_its_recorded_urn():
    recorded = set((URNS / "aws-dev.txt").read_text().split())
    (pool,) = [
        r for r in plan("aws-dev").resources if r.name == "ml-dev-h100" and r.type.endswith("NodePool")
    ]
    assert pool.type == "trainplane:aws:NodePool"
    assert pool.engine_urn not in recorded
    assert {a for a in pool.alias_urns if a in recorded} == {
        "urn:pulumi:aws-dev::trainplane::trainplane:index:GpuPlatform$trainplane:aws:AwsCloud"
        "$trainplane:aws:GpuNodePool::ml-dev-h100"
    }


if __name__ == "__main__" and "--update" in sys.argv:
    URNS.mkdir(parents=True, exist_ok=True)
    # Keeps every recorded URN a resource still answers to through an alias; adds resources that are new.
    for stack in [*PLATFORM_STACKS, *JOB_STACKS, *FLEET_STACKS, *FLEET_JOB_STACKS]:
        old = set((URNS / f"{stack}.txt").read_text().split()) if (URNS / f"{stack}.txt").exists() else set()
        keep = sorted(next(iter(sorted(c & old)), u) for u, c in claims(plan(stack)).items())
        (URNS / f"{stack}.txt").write_text("\n".join(keep) + "\n")
        print(stack, len(keep))


def test_a_regrouped_gcp_identity_answers_to_its_recorded_urn():
    """Team identities moved under trainplane:gcp:WorkloadIdentities (named like AWS's); deployed ones
    were children of the GCP cloud component and keep their URNs through Alias(parent=...)."""
    recorded = set((URNS / "gcp-dev.txt").read_text().split())
    by_name = {(r.type, r.name): r for r in plan("gcp-dev").resources}
    ident = by_name[("trainplane:gcp:WorkloadIdentity", "ml-dev-team-research")]
    account = by_name[("gcp:serviceaccount/account:Account", "ml-dev-team-research-sa")]
    assert ident.engine_urn.endswith(
        "$trainplane:gcp:WorkloadIdentities$trainplane:gcp:WorkloadIdentity::ml-dev-team-research"
    )
    old = "urn:pulumi:gcp-dev::trainplane::trainplane:index:GpuPlatform$trainplane:gcp:GcpCloud$trainplane:gcp:WorkloadIdentity"
    assert f"{old}::ml-dev-team-research" in set(ident.alias_urns) & recorded
    # Its children follow through the inherited alias.
    assert (
        f"{old}$gcp:serviceaccount/account:Account::ml-dev-team-research-sa"
        in set(account.alias_urns) & recorded
    )
