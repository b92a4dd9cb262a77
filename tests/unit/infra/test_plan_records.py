"""One record of a planned resource (infra/resources.py): the offline engine's RunResult, `trainplane plan`
and verify's Plan hold the same `Resource` objects, with the numbers the program gave. Before, the engine's
`Resource` and verify's `PlanResource` were two models of one thing, joined by a converter that also
undid the engine's float encoding (and `render` undid it once more)."""

from __future__ import annotations

import pytest

from infra.mockcloud import Resource
from infra.verify.dump import dumps, read_dump
from infra.verify.model import PlanResource, from_run
from tests.helpers.plans import planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def test_verify_reads_the_engines_own_records():
    result = planned("aws-dev")
    plan = from_run(result)
    assert PlanResource is Resource
    assert len(plan.resources) == len(result.resources)
    assert all(mine is theirs for mine, theirs in zip(plan.resources, result.resources, strict=True))
    # The lookups are the same too.
    assert plan.of_type(NODE_GROUP) == result.of_type(NODE_GROUP)


def test_the_engine_records_the_programs_whole_numbers():
    """The mock engine sends every number as a float; the record keeps the program's integers."""
    for ng in planned("aws-dev").of_type(NODE_GROUP):
        sizes = ng.inputs["scalingConfig"]
        assert {type(v) for v in sizes.values()} == {int}, (ng.name, sizes)


def test_a_dump_reads_back_into_the_same_records(tmp_path):
    plan = from_run(planned("aws-dev"))
    path = tmp_path / "plan.json"
    path.write_text(dumps(plan))
    back = read_dump(path)
    by_urn = plan.by_urn()
    for r in back.resources:
        assert isinstance(r, Resource)
        mine = by_urn[r.urn]
        assert (r.type, r.name, r.parent, r.custom, r.provider, r.inputs) == (
            mine.type,
            mine.name,
            mine.parent,
            mine.custom,
            mine.provider,
            mine.inputs,
        )


def test_the_engine_hands_resources_over_in_urn_order():
    """Registrations complete as their inputs resolve, an order that varies between runs (verify printed
    onprem-dev's notes in either order); the plan every report is made from is in one order."""
    urns = [r.urn for r in planned("onprem-dev").resources]
    assert urns == sorted(urns)
