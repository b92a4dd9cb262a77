"""`trainplane cost` against a real Prometheus (Debian's package) holding the synthetic cluster of
tests/helpers/cost_data.py, backfilled with `promtool tsdb create-blocks-from openmetrics`: the report's
dollars are the hand-worked ones to the cent, the same the recording rules give on the same data
(test_cost_rules.py); and every bad input is one line and exit 2."""

from __future__ import annotations

import csv
import io
import itertools
import re
import shutil
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from components.pricing import gpu_pool_prices
from components.spec import PlatformSpec
from infra.cli import main
from tests.helpers import cost_data as D
from tests.helpers.cost_stack import dollars_text, owned_platform
from tests.helpers.prometheus import backfilled, hour_start

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="prometheus/promtool not on PATH (CI installs Debian's prometheus)",
)


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cost-prometheus")
    start = hour_start()
    with backfilled(tmp, D.openmetrics(start)) as url:
        stack = tmp / "Pulumi.cost-test.yaml"
        stack.write_text(yaml.safe_dump({"config": {"trainplane:platform": owned_platform()}}))
        yield url, start, stack


def cost_csv(capsys, prom, by: str) -> list[dict[str, str]]:
    url, start, stack = prom
    until = datetime.fromtimestamp(start + 60 * D.HOUR_END_MIN, UTC).isoformat()
    rc = main(
        ["cost", str(stack), "--prometheus", url, "--since", "1h", "--until", until, "--by", by, "--csv"]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    return list(csv.DictReader(io.StringIO(out)))


def test_by_team_to_the_cent(capsys, prom):
    rows = {r["team"]: r for r in cost_csv(capsys, prom, "team")}
    assert set(rows) == {"research", "eval", "unassigned"}
    for team, row in rows.items():
        assert row["used_dollars"] == dollars_text(D.HOUR["team"].get(team, 0.0)), team
        assert row["idle_dollars"] == dollars_text(D.HOUR_IDLE["team"].get(team, 0.0)), team
        assert row["gpu_hours"] == dollars_text(D.HOUR_GPU_HOURS.get(team, 0.0)), team
    # research: $70.77 of GPUs its pods held plus its idle reservation's $62.92.
    assert rows["research"]["total_dollars"] == "133.69"


def test_by_pool_to_the_cent(capsys, prom):
    rows = {r["pool"]: r for r in cost_csv(capsys, prom, "pool")}
    assert set(rows) == {"h100-od", "h100-spot", "h100-block", "h100-odcr"}
    for pool, row in rows.items():
        assert row["used_dollars"] == dollars_text(D.HOUR["pool"].get(pool, 0.0)), pool
        assert row["idle_dollars"] == dollars_text(D.HOUR_IDLE["pool"][pool]), pool
    assert rows["h100-block"]["total_dollars"] == "125.84"  # the whole block, used or not: 32 x $3.9325


def test_by_job_puts_idle_on_its_own_row(capsys, prom):
    rows = {(r["team"], r["job"]): r for r in cost_csv(capsys, prom, "job")}
    assert rows[("research", "gpt")]["used_dollars"] == dollars_text(D.HOUR["job"][("research", "gpt")])
    assert rows[("eval", "ev")]["used_dollars"] == dollars_text(D.HOUR["job"][("eval", "ev")])
    assert rows[("research", "(idle)")]["idle_dollars"] == dollars_text(D.IDLE_ODCR)
    assert rows[("unassigned", "(idle)")]["idle_dollars"] == dollars_text(D.IDLE_BLOCK + D.IDLE_SPOT)


def test_team_filter_keeps_that_teams_rows_to_the_cent(capsys, prom):
    url, start, stack = prom
    until = datetime.fromtimestamp(start + 60 * D.HOUR_END_MIN, UTC).isoformat()
    argv = ["cost", str(stack), "--prometheus", url, "--since", "1h", "--until", until, "--csv"]
    assert main([*argv, "--by", "job", "--team", "research"]) == 0
    rows = {(r["team"], r["job"]): r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert {team for team, _ in rows} == {"research"}
    assert rows[("research", "gpt")]["used_dollars"] == dollars_text(D.HOUR["job"][("research", "gpt")])
    assert rows[("research", "(idle)")]["idle_dollars"] == dollars_text(D.IDLE_ODCR)
    assert main([*argv, "--team", "eval", "--team", "unassigned"]) == 0
    teams = {r["team"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert teams == {"eval", "unassigned"}


def test_the_table_names_every_team_and_the_total(capsys, prom):
    url, start, stack = prom
    until = datetime.fromtimestamp(start + 60 * D.HOUR_END_MIN, UTC).isoformat()
    assert main(["cost", str(stack), "--prometheus", url, "--since", "1h", "--until", until]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    total = D.HOUR["team"]["research"] + D.HOUR["team"]["eval"] + D.IDLE_BLOCK + D.IDLE_SPOT + D.IDLE_ODCR
    assert "TOTAL" in out and dollars_text(total) in out
    assert (
        "h100-odcr: reservation, $3.9325 per GPU-hour; 16 GPUs paid whether used or not, idle charged to research"
        in out
    )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["cost", "no-such-stack", "--prometheus", "{url}"], "no such stack file"),
        (
            ["cost", "{stack}", "--prometheus", "http://127.0.0.1:1"],
            "cannot reach Prometheus at http://127.0.0.1:1",
        ),
        (["cost", "{stack}", "--prometheus", "{url}", "--since", "7x"], "--since 7x: not a duration"),
        (
            ["cost", "{stack}", "--prometheus", "{url}", "--until", "yesterday"],
            "--until yesterday: not an ISO 8601",
        ),
        (["cost", "{stack}", "--prometheus", "{url}", "--until", "2020-01-01T00:00:00Z"], "no GPU cost data"),
        (["cost", "gpt-small-aws-dev", "--prometheus", "{url}"], "a job stack"),
        (["cost", "{stack}", "--prometheus", "{url}", "--team", "nope"], "--team nope: not a team of"),
        (
            ["cost", "{stack}", "--prometheus", "{url}", "--by", "pool", "--team", "eval"],
            "pool rows have no team",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys, prom):
    url, _, stack = prom
    rc = main([a.format(url=url, stack=stack) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], err
    assert "Traceback" not in err


def test_a_month_is_asked_for_a_day_at_a_time(monkeypatch):
    """`--since 31d` in one subquery holds 31 x a day's samples, past Prometheus' default
    --query.max-samples on a real cluster (issue 30): every query covers at most a day, and together the
    queries cover the window's minutes exactly once."""
    from infra.cost import report

    asked: list[tuple[str, float]] = []
    monkeypatch.setattr(report, "query", lambda url, promql, at: asked.append((promql, at.timestamp())) or [])
    end = datetime(2027, 1, 1, tzinfo=UTC)
    prices = gpu_pool_prices(PlatformSpec.load(owned_platform()))
    report.build("s", "http://p", prices, end, timedelta(days=31), "team")
    covered = []
    for promql, at in asked:
        (span,) = set(re.findall(r"\[(\d+)s:60s\]", promql))
        assert int(span) + 1 <= 86400, span
        covered.append((at - int(span) - 1, at))
    assert len(asked) == 3 * 31
    minutes = sorted({(a, b) for a, b in covered})
    assert minutes[0][0] == end.timestamp() - 31 * 86400 and minutes[-1][1] == end.timestamp()
    assert all(x[1] == y[0] for x, y in itertools.pairwise(minutes))


def test_the_days_add_up_to_the_window_to_the_cent(capsys, prom, monkeypatch):
    """The same hour asked for in four 15-minute queries: the same cents as in one."""
    from infra.cost import report

    monkeypatch.setattr(report, "CHUNK_S", 900)
    rows = {r["team"]: r for r in cost_csv(capsys, prom, "team")}
    for team, row in rows.items():
        assert row["used_dollars"] == dollars_text(D.HOUR["team"].get(team, 0.0)), team
        assert row["idle_dollars"] == dollars_text(D.HOUR_IDLE["team"].get(team, 0.0)), team
        assert row["gpu_hours"] == dollars_text(D.HOUR_GPU_HOURS.get(team, 0.0)), team
