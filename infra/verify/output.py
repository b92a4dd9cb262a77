"""Printing a verify Report (offline, live or `--cloud`) for people: a summary table, then one line per
failure naming the objects, the notes, and why each skipped check was skipped (a `skip` in the table
alone reads like a check that ran and found nothing)."""

from __future__ import annotations

from rich.console import Console

from infra.console import heading, table
from infra.verify.report import Report

STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow"}


def print_report(report: Report, console: Console) -> None:
    where = f"{report.cloud} {report.kubernetes_version or ''}".strip()
    how = report.source if report.mode == "offline" else f"{report.mode}: {report.source}"
    heading(console, f"[bold]trainplane verify[/] {report.stack} ({where}, {how})")
    t = table(None, "check", "result", "failures", "examined", right=("failures", "examined"))
    for c in report.checks:
        t.add_row(c.name, f"[{STYLE[c.status]}]{c.status}[/]", str(len(c.findings)), str(len(c.examined)))
    console.print(t)
    for n in report.notes:
        console.print(f"note: {n}", markup=False, highlight=False, soft_wrap=True, style="dim")
    for c in report.checks:
        if c.skipped is not None:
            console.print(f"{c.name}: skipped: {c.skipped}", markup=False, highlight=False, soft_wrap=True)
        for f in c.findings:
            console.print(f.line(), markup=False, highlight=False, soft_wrap=True)
        for n in c.notes:
            console.print(f"{c.name}: note: {n}", markup=False, highlight=False, soft_wrap=True, style="dim")
    if report.failed():
        verdict = f"[bold red]failed: {', '.join(report.failed())}[/]"
    elif report.ok:
        verdict = "[green]all checks passed[/]"
    else:  # `--cloud` with every check skipped: nothing asked, not a pass (report.ok)
        verdict = "[yellow]nothing verified: every check was skipped[/]"
    console.print(verdict)
