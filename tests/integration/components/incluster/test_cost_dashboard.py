"""The cost dashboard agrees with `trainplane cost` to the cent (issue 20, "Done when"): every panel query of
components/incluster/dashboards/cost.json runs against one real Prometheus (Debian's package) holding the
synthetic cluster of tests/helpers/cost_data.py, and so does the CLI, for the same window.

The panels read the recording rules' series, which need history: the test backfills them with `promtool
tsdb create-blocks-from rules` from the stack's own PrometheusRule (the rates first, then the window rules
that read them), evaluated every minute on whole minutes as the rule group would. That is what a dashboard
sees on a cluster that ran the rules; expanding the recorded names into their expressions instead would test
the CLI's own query (cost_rules.cost_query) against itself.

Grafana sends `${__range}` as whole seconds plus "s" (grafana/grafana pkg/promlib/models/query.go
interpolateVariables: `strconv.FormatInt(rangeSRounded, 10)+"s"`) and an instant query at the range's end.
Which minutes a window holds: the CLI steps its subquery on whole minutes (cost_rules.cost_query), while a
rule group evaluates at its own offset into each minute (Prometheus staggers groups by a hash; promtool's
backfill keeps the offset, rules.Group.EvalTimestamp). A window ending `r` seconds into a minute holds the
same 60 minutes for both when `r` is past the group's offset, and otherwise the dashboard's lags the CLI's by
that last minute (a job that started or stopped in it is a minute apart). So the windows here end one second
after the group's evaluation, measured from the backfilled series: the same instant for both, the same
minutes, and the comparison is to the cent. (One second after, not at it: at an instant that falls on an
evaluation, Prometheus 2, this test's, also counts the sample at the range's start, closed there; Prometheus
3, the chart's, does not.)"""

from __future__ import annotations

import csv
import io
import json
import shutil
import urllib.parse
import urllib.request
from datetime import UTC, datetime

import pytest
import yaml

from components.incluster.cost_rules import COST_RATE, IDLE_RATE, PRICE, USED_GPUS
from infra.cli import main
from tests.helpers import cost_data as D
from tests.helpers.cost_stack import dollars_text, owned_platform
from tests.helpers.plans import ROOT, plan_object
from tests.helpers.prometheus import backfilled, hour_start, instant

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="prometheus/promtool not on PATH (CI installs Debian's prometheus)",
)
DASHBOARD = ROOT / "components/incluster/dashboards/cost.json"
RATES = {PRICE, USED_GPUS, COST_RATE, IDLE_RATE}


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cost-dashboard")
    (cr,) = [r for r in plan_object(owned_platform()).resources if r.type.endswith("PrometheusRule")]
    (group,) = [g for g in cr.inputs["spec"]["groups"] if g["name"] == "trainplane-cost"]
    first = {**group, "rules": [r for r in group["rules"] if r["record"] in RATES]}
    then = {**group, "rules": [r for r in group["rules"] if r["record"] not in RATES]}
    start = hour_start()
    # through the last data minute's evaluation, wherever in the minute it falls
    span = (start, start + 60 * D.MINUTES - 1)
    # A rule's series ends with its source: the rule manager writes staleness markers, backfilled blocks
    # have none, and the default 5m lookback would carry a stopped pod's last rate 5 more minutes on the
    # rate panel. Under a minute, each step sees its own minute's sample.
    with backfilled(tmp, D.openmetrics(start), [[first], [then]], span, lookback="59s") as url:
        stack = tmp / "Pulumi.cost-test.yaml"
        stack.write_text(yaml.safe_dump({"config": {"trainplane:platform": owned_platform()}}))
        (stamp,) = instant(url, f"timestamp({PRICE}{{pool='h100-od'}})", start + 60 * D.HOUR_END_MIN + 59)
        offset = int(float(stamp["value"][1])) % 60
        assert offset < 59, offset
        yield url, start, stack, offset


def hour_at(prom) -> int:
    """The hour panels' instant, seconds after minute 0: just after the rule group's evaluation of the
    hour's last minute (module docstring)."""
    return 60 * D.HOUR_END_MIN + prom[3] + 1


def day_at(prom) -> int:
    return 60 * (D.MINUTES - 1) + prom[3] + 1


def panels() -> dict[str, list[dict]]:
    return {p["title"]: p["targets"] for p in json.loads(DASHBOARD.read_text())["panels"]}


def grafana(expr: str, range_s: int) -> str:
    return expr.replace("${__range}", f"{range_s}s")


def panel_values(prom, title: str, at: int, keys: tuple[str, ...] = ()) -> dict[str, dict]:
    """Each target of the panel (by legend) evaluated at `at` (seconds after minute 0) over the hour:
    {legend: {key tuple: dollars}}."""
    url, start, *_ = prom
    out: dict[str, dict] = {}
    for t in panels()[title]:
        rows = instant(url, grafana(t["expr"], 3600), start + at)
        legend = "idle" if t.get("legendFormat", "").endswith("idle") else "used"
        out[legend] = {tuple(r["metric"].get(k, "") for k in keys): float(r["value"][1]) for r in rows}
    return out


def cli(capsys, prom, by: str, since: str = "1h", at: int | None = None) -> list[dict[str, str]]:
    url, start, stack, _ = prom
    until = datetime.fromtimestamp(start + (hour_at(prom) if at is None else at), UTC).isoformat()
    argv = ["cost", str(stack), "--prometheus", url, "--since", since, "--until", until, "--by", by, "--csv"]
    assert main(argv) == 0
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


def in_cents(values: dict) -> dict:
    return {k: dollars_text(v) for k, v in values.items() if dollars_text(v) != "0.00"}


def cli_cents(rows: list[dict[str, str]], keys: tuple[str, ...], column: str) -> dict:
    return {tuple(r[k] for k in keys): r[column] for r in rows if r[column] != "0.00"}


def test_every_panel_is_checked_here():
    assert set(panels()) == {
        "Spend over the range (used, idle)",
        "GPU prices per pool ($ per GPU-hour)",
        "Spend rate by team ($/h)",
        "Cost by team over the range",
        "Cost by pool over the range",
        "Cost by job over the range",
        "Daily cost by team (last 24 h at each point)",
    }


@pytest.mark.parametrize(
    ("title", "by"),
    [("Cost by team over the range", "team"), ("Cost by pool over the range", "pool")],
)
def test_cost_tables_agree_with_the_cli_to_the_cent(title, by, capsys, prom):
    got = panel_values(prom, title, hour_at(prom), (by,))
    rows = cli(capsys, prom, by)
    assert in_cents(got["used"]) == cli_cents(rows, (by,), "used_dollars")
    assert in_cents(got["idle"]) == cli_cents(rows, (by,), "idle_dollars")
    # ...and both are the hand-worked dollars
    assert in_cents(got["used"]) == {(k,): dollars_text(v) for k, v in D.HOUR[by].items()}


def test_job_table_agrees_with_the_cli_to_the_cent(capsys, prom):
    got = panel_values(prom, "Cost by job over the range", hour_at(prom), ("team", "job"))
    rows = [r for r in cli(capsys, prom, "job") if r["job"] != "(idle)"]
    assert in_cents(got["used"]) == cli_cents(rows, ("team", "job"), "used_dollars")
    assert in_cents(got["used"]) == {k: dollars_text(v) for k, v in D.HOUR["job"].items()}


def test_spend_over_the_range_is_the_clis_total(capsys, prom):
    got = panel_values(prom, "Spend over the range (used, idle)", hour_at(prom))
    rows = cli(capsys, prom, "team")
    for legend, column in (("used", "used_dollars"), ("idle", "idle_dollars")):
        (total,) = got[legend].values()
        # the CLI's rows are rounded each; their sum may differ from the whole's by rounding alone
        assert abs(total - sum(float(r[column]) for r in rows)) < 0.005 * len(rows), legend
    assert dollars_text(got["used"][()]) == dollars_text(sum(D.HOUR["team"].values()))


def test_prices_are_the_plans(prom):
    url, start, *_ = prom
    (target,) = panels()["GPU prices per pool ($ per GPU-hour)"]
    rows = instant(url, target["expr"], start + hour_at(prom))
    assert {r["metric"]["pool"]: round(float(r["value"][1]), 4) for r in rows} == {
        p: round(v, 4) for p, v in D.PRICE.items()
    }


def test_spend_rate_adds_up_to_the_clis_dollars(capsys, prom):
    """The rate panel's points (a range query stepped a minute, as each rule evaluation stands for a
    minute) add up to the hour's dollars by team."""
    url, start, *_ = prom
    rows = cli(capsys, prom, "team")
    for t in panels()["Spend rate by team ($/h)"]:
        query = urllib.parse.urlencode(
            {
                "query": t["expr"],
                # one point per rule evaluation of the hour (minutes 61..120)
                "start": start + hour_at(prom) - 59 * 60,
                "end": start + hour_at(prom),
                "step": "60",
            }
        )
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{query}", timeout=30) as r:
            result = json.load(r)["data"]["result"]
        dollars = {(s["metric"]["team"],): sum(float(v) for _, v in s["values"]) / 60 for s in result}
        column = "idle_dollars" if t["legendFormat"].endswith("idle") else "used_dollars"
        assert in_cents(dollars) == cli_cents(rows, ("team",), column), column


def test_daily_cost_by_team_agrees_with_the_cli_over_the_day(capsys, prom):
    url, start, *_ = prom
    rows = cli(capsys, prom, "team", since="1d", at=day_at(prom))
    for t in panels()["Daily cost by team (last 24 h at each point)"]:
        got = {
            (r["metric"]["team"],): float(r["value"][1])
            for r in instant(url, t["expr"], start + day_at(prom))
        }
        column = "idle_dollars" if t["legendFormat"].endswith("idle") else "used_dollars"
        assert in_cents(got) == cli_cents(rows, ("team",), column), column
