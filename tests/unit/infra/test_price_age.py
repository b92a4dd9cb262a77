"""Facts carry dates (issue 31): the plan prints how old the catalog prices it used are and warns past
6 months, on a day that tests pin (TRAINPLANE_TODAY or a parameter), never the clock deep inside."""

from __future__ import annotations

import json
from datetime import date

import pytest

from components import clock
from components.catalog import catalog
from components.spec import PlatformSpec
from infra.plan import estimate_cost
from tests.helpers.cli import cli
from tests.helpers.plans import platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def test_today_is_the_env_var_when_set_and_a_clear_error_when_malformed():
    assert clock.today({"TRAINPLANE_TODAY": "2027-03-01"}) == date(2027, 3, 1)
    assert clock.today({}) == date.today()
    with pytest.raises(ValueError, match="TRAINPLANE_TODAY: '2027-13-01' is not a date"):
        clock.today({"TRAINPLANE_TODAY": "2027-13-01"})


@pytest.mark.parametrize(
    ("as_of", "on", "months"),
    [
        ("2025-06", date(2025, 12, 1), 6),
        ("2025-06", date(2025, 12, 2), 6),
        ("2025-06", date(2026, 11, 28), 17),
        ("2026-06-15", date(2026, 12, 14), 5),
        ("2026-06-15", date(2026, 12, 15), 6),
        ("2026-12-01", date(2026, 11, 28), 0),
    ],
)
def test_months_old(as_of, on, months):
    assert clock.months_old(as_of, on) == months


def _stale_day(as_of: str) -> date:
    """A day by which prices of `as_of` are past the maximum age (about 7 months later)."""
    return date.fromordinal(clock.as_of_date(as_of).toordinal() + 31 * (clock.PRICE_MAX_AGE_MONTHS + 1))


def test_the_cost_says_how_old_its_prices_are_and_warns_past_six_months():
    spec = PlatformSpec.load(platform_object("aws-dev"))
    basis = catalog().pricing["aws"].as_of
    fresh = estimate_cost(spec, clock.as_of_date(basis))
    assert (fresh.prices_as_of, fresh.price_age_months, fresh.warnings) == (basis, 0, [])
    late = _stale_day(basis)
    old = estimate_cost(spec, late)
    (warning,) = old.warnings
    assert old.price_age_months == clock.months_old(basis, late) > clock.PRICE_MAX_AGE_MONTHS
    assert warning.startswith(
        f"prices are {old.price_age_months} months old (as of {basis}, today {late.isoformat()}"
    )
    assert "p5.48xlarge" in warning and "platform.pricing.overrides" in warning
    # No day given (library callers): the date is known, its age is not computed.
    assert estimate_cost(spec).price_age_months is None


def test_prices_the_stack_overrides_do_not_age():
    obj = platform_object("aws-dev")
    obj["pricing"] = {
        "overrides": {"p5.48xlarge": {"onDemandHourly": 50.0}, "m6i.xlarge": {"onDemandHourly": 0.2}}
    }
    cost = estimate_cost(PlatformSpec.load(obj), date(2030, 1, 1))
    assert (cost.prices_as_of, cost.warnings) == (None, [])


def test_the_catalog_prices_are_under_six_months_old_on_the_issue_day():
    """Issue 31: the prices the dev stacks use were refreshed (2025-06 was 17 months old on 2026-11-28)."""
    for platform in ("aws-dev", "gcp-dev"):
        cost = estimate_cost(PlatformSpec.load(platform_object(platform)), date(2026, 11, 28))
        assert cost.price_age_months is not None and cost.price_age_months <= clock.PRICE_MAX_AGE_MONTHS
        # No price-age warning (gcp-dev's GKE 1.34 extended-support warning is the calendar's, not this).
        assert [w for w in cost.warnings if "months old" in w] == [], platform
    assert {c: catalog().pricing[c].as_of for c in ("aws", "gcp")} == {
        "aws": "2026-07-20",
        "gcp": "2026-08-20",
    }


def test_plan_prints_the_age_of_its_prices_and_the_warning():
    basis = catalog().pricing["aws"].as_of
    late = _stale_day(basis)
    ran = cli("plan", "aws-dev", env={"TRAINPLANE_TODAY": late.isoformat()}, cached=True)
    assert ran.returncode == 0, ran.stderr
    months = clock.months_old(basis, late)
    assert f"prices: catalog list prices as of {basis}, {months} months old" in ran.stdout
    assert f"warning: prices are {months} months old" in " ".join(ran.stdout.split())
    as_json = json.loads(
        cli("plan", "aws-dev", "--json", env={"TRAINPLANE_TODAY": late.isoformat()}, cached=True).stdout
    )
    assert (as_json["cost"]["pricesAsOf"], as_json["cost"]["priceAgeMonths"]) == (basis, months)
    assert len(as_json["cost"]["warnings"]) == 1


def test_a_malformed_today_is_a_usage_error():
    ran = cli("plan", "aws-dev", env={"TRAINPLANE_TODAY": "yesterday"})
    assert ran.returncode == 2
    assert "TRAINPLANE_TODAY: 'yesterday' is not a date (YYYY-MM-DD)" in ran.stderr
