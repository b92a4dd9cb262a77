"""`trainplane cost STACK --prometheus URL`: what the GPUs cost by team, job or pool over a window, from
the platform's Prometheus and the stack's own prices (docs/operations.md)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console

from infra.commands import EXIT_OK
from infra.stacks import UsageError, load_stack, validated

UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
STEP = 60  # the cost rules' interval: windows and their end fall on whole minutes


def parse_since(text: str) -> timedelta:
    m = re.fullmatch(r"([1-9][0-9]{0,5})([mhdw])", text.strip())
    if not m:
        raise UsageError(
            [f"--since {text}: not a duration; give a whole number and m, h, d or w (30m, 12h, 7d, 4w)"]
        )
    return timedelta(seconds=int(m.group(1)) * UNITS[m.group(2)])


def parse_until(text: str | None) -> datetime:
    """The window's end: an ISO 8601 time with a zone (a month-end report: 2026-11-01T00:00:00Z), else
    now; rounded down to the minute, as the rules' samples fall."""
    at: datetime | None = datetime.now(UTC)
    if text is not None:
        try:
            at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            at = None
        if at is None or at.tzinfo is None:
            raise UsageError(
                [f"--until {text}: not an ISO 8601 time with a zone (e.g. 2026-11-01T00:00:00Z)"]
            )
    assert at is not None
    stamp = int(at.timestamp()) // STEP * STEP
    return datetime.fromtimestamp(stamp, UTC)


def cmd_cost(args: argparse.Namespace, console: Console) -> int:
    from components.pricing import gpu_pool_prices
    from components.spec import PlatformSpec
    from infra.cost.report import build, to_csv
    from infra.cost.table import print_report

    since = parse_since(args.since)
    until = parse_until(args.until)
    sf = load_stack(args.stack)
    if sf.object("trainplane:platform") is None:
        what = "a job stack" if sf.object("trainplane:job") is not None else "not a platform stack"
        raise UsageError([f"{sf.path}: {what}; cost reads a platform stack's pools and prices"])
    spec = validated(sf, "trainplane:platform", PlatformSpec)
    prices = gpu_pool_prices(spec)
    if not prices:
        raise UsageError(
            [f"{sf.path}: no GPU pool with a price (set platform.pricing.overrides): nothing to cost"]
        )
    teams = _teams(args.team, args.by, spec, sf.path)
    report = build(sf.name, args.prometheus, prices, until, since, args.by)
    if teams:
        # The team is the first key of a team or job row (report.GROUPS): a filter, not another query, so
        # the rows are the same dollars the whole report shows.
        report.rows = [r for r in report.rows if r.key[0] in teams]
    if not report.rows:
        whose = f" for team {', '.join(teams)}" if teams else ""
        raise UsageError(
            [
                f"no GPU cost data{whose} in Prometheus at {args.prometheus} from {report.start:%Y-%m-%d %H:%M} to "
                f"{report.end:%Y-%m-%d %H:%M} UTC: no running pod held a GPU of a pool of {sf.name} and no "
                "reserved capacity was seen (is kube-state-metrics scraped there?)"
            ]
        )
    if args.csv:
        print(to_csv(report), end="")
    else:
        print_report(report, console)
    return EXIT_OK


def _teams(names: list[str] | None, by: str, spec: Any, path: object) -> list[str]:
    """The teams of --team, each a team of the platform or `unassigned` (idle reservations without an owner)."""
    from components.incluster.cost_rules import UNASSIGNED

    if not names:
        return []
    if by == "pool":
        raise UsageError(["--team: pool rows have no team; use --by team or --by job with --team"])
    known = [t.name for t in spec.teams] + [UNASSIGNED]
    for name in names:
        if name not in known:
            raise UsageError([f"--team {name}: not a team of {path} (its teams: {', '.join(known)})"])
    return names


def add_parsers(command: Callable[..., argparse.ArgumentParser]) -> None:
    cost: Any = command("cost", help="GPU dollars and idle dollars by team, job or pool, from Prometheus")
    cost.add_argument("stack", help="platform stack name (stacks/Pulumi.<name>.yaml) or a stack file path")
    cost.add_argument(
        "--prometheus",
        required=True,
        metavar="URL",
        help="the platform's Prometheus, e.g. http://localhost:9090",
    )
    cost.add_argument("--since", default="7d", help="window length: 30m, 12h, 7d, 4w (default 7d)")
    cost.add_argument("--until", metavar="TIME", help="window end, ISO 8601 with a zone (default: now)")
    cost.add_argument("--by", choices=("team", "job", "pool"), default="team", help="rows per (default team)")
    cost.add_argument(
        "--team",
        action="append",
        metavar="NAME",
        help="only this team's rows (repeat for several; `unassigned`: idle reservations without an owner)",
    )
    cost.add_argument("--csv", action="store_true", help="CSV on stdout instead of a table")
    cost.set_defaults(func=cmd_cost)
