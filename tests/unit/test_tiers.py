"""The tiers of the suite hold (tests/helpers/tiers.py): what a test did must fit its marker."""

from __future__ import annotations

import pytest

from tests.helpers import tiers


@pytest.fixture(autouse=True)
def _nothing_left_noted():
    """What these tests note is theirs, not the test's own tier (tests/conftest.py reads it after the call)."""
    yield
    tiers.begin()


def test_a_test_that_did_nothing_heavy_fits_any_tier():
    tiers.begin()
    assert tiers.misplaced([]) is None
    assert tiers.misplaced(["plans"]) is None


def test_a_plan_needs_the_plans_or_integration_marker():
    tiers.begin()
    tiers.note(tiers.PLANS)
    assert "pytestmark = pytest.mark.plans" in (tiers.misplaced(["parametrize"]) or "")
    assert tiers.misplaced(["plans"]) is None
    assert tiers.misplaced(["integration"]) is None


def test_a_process_needs_the_integration_marker_even_in_the_plans_tier():
    tiers.begin()
    tiers.note(tiers.INTEGRATION)
    assert "@pytest.mark.integration" in (tiers.misplaced(["plans"]) or "")
    assert tiers.misplaced(["integration"]) is None


def test_each_test_starts_with_nothing_done():
    tiers.note(tiers.PLANS)
    tiers.begin()
    assert tiers.misplaced([]) is None
