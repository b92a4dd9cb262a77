"""The cost report: GPU-hours, dollars of the GPUs running pods held, and dollars of GPUs paid for and held
by no pod (idle), per team, job or pool over a window, from the cost rules' own expressions.

Dollars are summed unrounded and rounded to the cent once, half up, per cell and for the total (so a
column's cents may differ by one from the sum of its rounded cells)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from components.incluster.cost_rules import INTERVAL_S, UNASSIGNED, PoolPrice, cost_query
from infra.cost.prometheus import query

# What each --by groups on, in the cost series and in the idle series (idle has no job: its team is the
# reservation's owner or unassigned).
GROUPS = {"team": ("team",), "job": ("team", "job"), "pool": ("pool",)}
IDLE_GROUPS = {"team": ("team",), "job": ("team",), "pool": ("pool",)}
IDLE_JOB = "(idle)"
NO_JOB = "(no job)"


@dataclass
class Row:
    key: tuple[str, ...]
    gpu_hours: float = 0.0
    used: float = 0.0
    idle: float = 0.0

    @property
    def total(self) -> float:
        return self.used + self.idle


@dataclass
class Report:
    stack: str
    prometheus: str
    start: datetime
    end: datetime
    by: str
    prices: Sequence[PoolPrice]
    rows: list[Row] = field(default_factory=list)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(k.upper() for k in GROUPS[self.by])

    def totals(self) -> Row:
        return Row(
            ("TOTAL",),
            sum(r.gpu_hours for r in self.rows),
            sum(r.used for r in self.rows),
            sum(r.idle for r in self.rows),
        )


def cents(dollars: float) -> Decimal:
    return Decimal(repr(dollars)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def hours(value: float) -> Decimal:
    return Decimal(repr(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


# The longest window one query sums: a subquery holds every series of its inner expression at every step
# (1440 a day), and Prometheus refuses a query that holds more than --query.max-samples (50,000,000 by
# default) at once; a 31-day window in one query needs 31 x the samples of a day's. Sums over disjoint
# windows add up, so a long window is asked for a day at a time (the measured figures: docs/operations.md).
CHUNK_S = 86400


def chunks(end: datetime, seconds: int) -> list[tuple[datetime, int]]:
    """(end, length in seconds) of each query of a window of `seconds` ending at `end`, newest first: each
    at most CHUNK_S, whole minutes, together exactly the window's minutes."""
    out = []
    while seconds > 0:
        length = min(seconds, CHUNK_S)
        out.append((end, length))
        end, seconds = end - timedelta(seconds=length), seconds - length
    return out


def build(
    stack: str, url: str, prices: Sequence[PoolPrice], end: datetime, since: timedelta, by: str
) -> Report:
    seconds = int(since.total_seconds())
    report = Report(stack, url, end - since, end, by, prices)
    rows: dict[tuple[str, ...], Row] = {}

    def row(labels: dict[str, str], keys: Sequence[str], idle: bool = False) -> Row:
        if by == "job" and idle:
            key: tuple[str, ...] = (labels.get("team") or UNASSIGNED, IDLE_JOB)
        else:
            key = tuple(labels.get(k) or (NO_JOB if k == "job" else UNASSIGNED) for k in keys)
        return rows.setdefault(key, Row(key))

    for at, length in chunks(end, seconds):
        for labels, value in query(url, cost_query(prices, "gpu_hours", length, GROUPS[by]), at):
            row(labels, GROUPS[by]).gpu_hours += value
        for labels, value in query(url, cost_query(prices, "cost", length, GROUPS[by]), at):
            row(labels, GROUPS[by]).used += value
        for labels, value in query(url, cost_query(prices, "idle", length, IDLE_GROUPS[by]), at):
            row(labels, IDLE_GROUPS[by], idle=True).idle += value
    report.rows = [rows[k] for k in sorted(rows)]
    return report


HEADERS = ("GPU-HOURS", "USED $", "IDLE $", "TOTAL $")


def cells(r: Row) -> list[str]:
    return [str(hours(r.gpu_hours)), str(cents(r.used)), str(cents(r.idle)), str(cents(r.total))]


def to_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [c.lower() for c in report.columns] + ["gpu_hours", "used_dollars", "idle_dollars", "total_dollars"]
    )
    for r in report.rows:
        writer.writerow([*r.key, *cells(r)])
    return out.getvalue()


def title(report: Report) -> str:
    fmt = "%Y-%m-%d %H:%M UTC"
    return (
        f"GPU cost of {report.stack}, {report.start.strftime(fmt)} to {report.end.strftime(fmt)}, by "
        f"{report.by} (Prometheus {report.prometheus}; {INTERVAL_S}s resolution)"
    )


def price_lines(prices: Sequence[PoolPrice]) -> list[str]:
    lines = []
    for p in sorted(prices, key=lambda p: p.pool):
        line = f"{p.pool}: {p.capacity}, ${p.gpu_hourly:.4f} per GPU-hour"
        if p.committed_gpus:
            # A Capacity Block is paid for only between its dates (cost_rules.committed_scalar).
            when = ""
            if p.window:
                start, end = (datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M") for t in p.window)
                when = f" from {start} to {end} UTC"
            line += (
                f"; {p.committed_gpus} GPUs paid{when} whether used or not, idle charged to "
                f"{p.owner or UNASSIGNED}"
            )
        lines.append(line)
    return lines
