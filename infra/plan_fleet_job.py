"""`trainplane plan JOB` for a job on a fleet (`job.fleetStack`): the fleet stack and its platforms planned
offline (or recorded with --ref), the job run on their outputs, and which workers it fits and why not.

The job's own plan (its JobSet on the manager) comes out as any job's does; its cost is the first
fitting worker's, in dispatch order (where MultiKueue's Incremental dispatcher tries it first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console

from components.outputs import PlatformOutputs
from infra.plan import PlanSummary
from infra.stacks import UsageError, load_stack, problem_lines, run_stack


@dataclass
class FleetJobSummary:
    plan: PlanSummary
    fleet: str
    # (worker, stack, fits, why not)
    workers: list[tuple[str, str, bool, list[str]]]

    def as_json(self) -> dict[str, Any]:
        return {
            **self.plan.as_json(),
            "fleet": self.fleet,
            "workers": [{"name": n, "stack": s, "fits": f, "problems": p} for n, s, f, p in self.workers],
        }


def fleet_outputs(
    sf: Any, job: Any, refs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the fleet stack's outputs, every platform's outputs by stack name, worker platform specs by stack):
    recorded (--ref), else planned offline."""
    from components.spec.fleet import FleetSpec
    from infra.stacks import _fleet_platform as _platform
    from infra.stacks import validated

    short = job.fleet_stack.split("/")[-1]
    where = f"{sf.path}: job.fleetStack {job.fleet_stack!r}"
    recorded = refs.get(job.fleet_stack, refs.get(short))
    if recorded is not None:
        platforms = {w["stack"]: _platform(w["stack"], refs, where)[0] for w in recorded.get("workers") or []}
        return recorded, platforms, {}
    try:
        fsf = load_stack(job.fleet_stack)
    except UsageError as e:
        raise UsageError([f"{where}: {line}" for line in e.lines]) from None
    if fsf.object("trainplane:fleet") is None:
        raise UsageError(
            [
                f"{where}: {fsf.path} is not a fleet stack (no trainplane:fleet); name the fleet the job runs on"
            ]
        )
    spec = validated(fsf, "trainplane:fleet", FleetSpec)
    platforms, specs = {}, {}
    for stack in [spec.manager.platform_stack, *(w.platform_stack for w in spec.workers)]:
        platforms[stack], specs[stack] = _platform(stack, refs, f"{fsf.path}: fleet")
    return run_stack(fsf, {**refs, **platforms}).outputs, platforms, specs


def plan_fleet_job(sf: Any, job: Any, refs: dict[str, Any]) -> tuple[Any, FleetJobSummary]:
    from components.job_fleet_stack import FleetOutputs, fleet_problems
    from infra.plan import summarize_job

    outputs, platforms, specs = fleet_outputs(sf, job, refs)
    fleet = FleetOutputs.model_validate(outputs)
    workers = [
        (w.name, w.stack, PlatformOutputs.model_validate(platforms[w.stack])) for w in fleet.dispatch_order()
    ]
    fits, problems = fleet_problems(job, fleet, workers)
    if problems:  # what the job stack itself would refuse, before running it
        raise UsageError(problem_lines(sf.path, problems))
    result = run_stack(sf, {**refs, job.fleet_stack: outputs, **platforms})
    first = next(f for f in fits if f.fits)
    worker = dict(zip([w[0] for w in workers], workers, strict=True))[first.name][2]
    summary = summarize_job(result, job, worker.cloud, specs.get(first.stack))
    return result, FleetJobSummary(
        summary, job.fleet_stack, [(f.name, f.stack, f.fits, f.problems) for f in fits]
    )


def print_fleet_job(summary: FleetJobSummary, console: Console) -> None:
    from infra.console import table
    from infra.plan_output import print_plan

    print_plan(summary.plan, console)
    t = table(f"Workers of fleet {summary.fleet} (dispatch order)", "worker", "stack", "fits", "why not")
    for name, stack, fits, problems in summary.workers:
        t.add_row(name, stack, "[green]yes[/]" if fits else "[red]no[/]", "\n".join(problems) or "-")
    console.print(t)


def fleet_job_plan(sf: Any, job: Any, refs: dict[str, Any]) -> Any:
    """A fleet job's plan for verify: the job run on its fleet, checked against the platform plan of the
    first worker it fits (dispatch order; every fitting worker gives the same pod: components/job_fleet.py)."""
    from components.spec import PlatformSpec
    from infra.stacks import validated
    from infra.verify import refs_plan
    from infra.verify.model import from_run

    result, summary = plan_fleet_job(sf, job, refs)
    _, stack, _, _ = next(w for w in summary.workers if w[2])
    short = stack.split("/")[-1]
    if stack in refs or short in refs:
        platform = refs_plan(short, refs.get(stack, refs.get(short)))
    else:
        psf = load_stack(stack)
        validated(psf, "trainplane:platform", PlatformSpec)
        raw = psf.object("trainplane:platform")
        platform = from_run(run_stack(psf), raw if isinstance(raw, dict) else None)
    raw_job = sf.object("trainplane:job")
    return from_run(result, raw_job if isinstance(raw_job, dict) else None, platform)
