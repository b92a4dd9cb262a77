"""The idle candidates query (idle_rules.idle_candidates_query: the team alerts' expressions with their
`for` windows as subqueries, what the controller's firing alerts amount to) against a real Prometheus
(Debian's package) holding tests/helpers/idle_data.py's cluster, backfilled: at each instant it returns
exactly the idle, non-exempt jobs of teams with an idle policy, at the same minutes the promtool alert
tests fire (test_idle_rules.py), labelled namespace, job, team, action.

Backfilled data cannot produce ALERTS (the rule manager evaluates from startup on), so this checks the
expression over the history instead; ALERTS' shape is promtool's part."""

from __future__ import annotations

import shutil

import pytest

from components.incluster.idle_rules import idle_candidates_query
from components.spec.platform import TeamSpec
from tests.helpers import idle_data as D
from tests.helpers.cost_data import openmetrics
from tests.helpers.prometheus import backfilled, hour_start, instant

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="prometheus/promtool not on PATH (CI installs Debian's prometheus)",
)
TEAMS = [TeamSpec.model_validate(t) for t in D.TEAMS]


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("idle-prometheus")
    start = hour_start(3)
    with backfilled(tmp, openmetrics(start, D.series())) as url:
        yield url, start


def candidates(prom, minute: int, teams=TEAMS) -> set[tuple[str, str, str, str]]:
    url, start = prom
    rows = instant(url, idle_candidates_query(teams), start + 60 * minute)
    return {
        (r["metric"]["namespace"], r["metric"]["job"], r["metric"]["team"], r["metric"]["action"])
        for r in rows
    }


def firing(minute: int) -> set[tuple[str, str, str, str]]:
    return {(ns, job, ns, D.ACTION[ns]) for (ns, job), at in D.FIRES.items() if at <= minute}


@pytest.mark.parametrize("minute", [29, 30, 50, 51, 59, 60, 120])
def test_the_query_returns_exactly_the_jobs_the_alert_fires_for(prom, minute):
    assert candidates(prom, minute) == firing(minute)


def test_exempt_busy_and_policy_less_jobs_are_never_candidates(prom):
    assert {j for _, j, _, _ in candidates(prom, 120)} == {"idle-gpt", "blip", "ev"}


def test_without_an_idle_policy_nothing_is_a_candidate(prom):
    assert candidates(prom, 120, [t for t in TEAMS if t.idle is None]) == set()
