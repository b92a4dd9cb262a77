"""The tiers of the suite hold (tests/helpers/tiers.py): what a test did must fit its marker."""

from __future__ import annotations

import pytest

from tests.helpers import tiers


def test_a_test_that_did_nothing_heavy_fits_any_tier():
    with tiers.scratch():
        assert tiers.misplaced([]) is None
        assert tiers.misplaced(["plans"]) is None


def test_a_plan_needs_the_plans_or_integration_marker():
    with tiers.scratch():
        tiers.note(tiers.PLANS)
        assert "pytestmark = pytest.mark.plans" in (tiers.misplaced(["parametrize"]) or "")
        assert tiers.misplaced(["plans"]) is None
        assert tiers.misplaced(["integration"]) is None


def test_a_process_needs_the_integration_marker_even_in_the_plans_tier():
    with tiers.scratch():
        tiers.note(tiers.INTEGRATION)
        assert "@pytest.mark.integration" in (tiers.misplaced(["plans"]) or "")
        assert tiers.misplaced(["integration"]) is None


def test_each_test_starts_with_nothing_done():
    with tiers.scratch():
        tiers.note(tiers.PLANS)
        tiers.begin()
        assert tiers.misplaced([]) is None


def test_what_a_scratch_block_notes_is_forgotten_after_it():
    with tiers.scratch():
        tiers.note(tiers.INTEGRATION)
    assert tiers.misplaced([]) is None


def test_a_plan_or_a_process_while_collecting_is_refused():
    # a module that plans at import makes every xdist worker (and --fast) pay for it before any test runs
    with tiers.scratch(), tiers.collecting():
        for kind in (tiers.PLANS, tiers.INTEGRATION):
            with pytest.raises(tiers.CollectionWork, match=f"did {kind} work at import"):
                tiers.note(kind)
