"""`trainplane plan JOB` for a job on a fleet (`job.fleetStack`): the fleet stack and its platforms planned
offline (or recorded with --ref: infra/stacks.py plan_fleet_job), the job run on their outputs, and
which workers it fits and why not (this module: the summary and its printing).

The job's own plan (its JobSet on the manager) comes out as any job's does; its cost is the first
fitting worker's, in dispatch order (where MultiKueue's Incremental dispatcher tries it first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console

from infra.plan import PlanSummary


@dataclass
class FleetJobSummary:
    plan: PlanSummary
    fleet: str
    # (worker, stack, fits, why not)
    workers: list[tuple[str, str, bool, list[str]]]

    def as_json(self) -> dict[str, Any]:
        return {
            **self.plan.as_json(),
            "fleetStack": self.fleet,
            "fleetWorkers": [
                {"name": n, "stack": s, "fits": f, "problems": p} for n, s, f, p in self.workers
            ],
        }


def print_fleet_job(summary: FleetJobSummary, console: Console) -> None:
    from infra.console import table
    from infra.plan_output import print_plan

    print_plan(summary.plan, console)
    t = table(f"Workers of fleet {summary.fleet} (dispatch order)", "worker", "stack", "fits", "why not")
    for name, stack, fits, problems in summary.workers:
        t.add_row(name, stack, "[green]yes[/]" if fits else "[red]no[/]", "\n".join(problems) or "-")
    console.print(t)
