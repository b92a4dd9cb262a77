"""The cost report as people read it: a title, one row per team, job or pool, a total, the prices."""

from __future__ import annotations

from rich.console import Console

from infra.console import heading, table
from infra.cost.report import HEADERS, Report, cells, price_lines, title


def print_report(report: Report, console: Console) -> None:
    heading(console, f"[bold]trainplane cost[/] {report.stack}")
    console.print(title(report), markup=False, highlight=False, soft_wrap=True)
    t = table(None, *report.columns, *HEADERS, right=HEADERS)
    for r in report.rows:
        t.add_row(*r.key, *cells(r))
    total = report.totals()
    pad = [""] * (len(report.columns) - 1)
    t.add_section()
    t.add_row("TOTAL", *pad, *cells(total))
    console.print(t, highlight=False)
    console.print("prices (the stack's, as `trainplane plan` shows them):", markup=False, highlight=False)
    for line in price_lines(report.prices):
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    console.print(
        "USED: GPUs running pods requested; IDLE: GPUs paid for that no pod held (reservations always, "
        "on-demand and spot nodes while up)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
