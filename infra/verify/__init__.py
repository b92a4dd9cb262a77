"""`trainplane verify`: does the platform work as a whole, not only resource by resource?

Library API:

    >>> from infra.verify import verify_stack, verify_dump
    >>> report = verify_stack("aws-dev")            # doctest: +SKIP
    >>> report.ok, report.failed()                  # doctest: +SKIP
    (False, ['storage', 'network'])
    >>> report = verify_dump("/tmp/aws-dev.json")   # `trainplane plan aws-dev --dump /tmp/aws-dev.json`  # doctest: +SKIP

`verify(plan)` runs the checks of `infra.verify.registry` (default: all) on a `infra.verify.model.Plan`
and returns a typed `Report`; `infra.verify.live` runs their live twins on a running cluster, through the
same `run_checks` over a cluster view (`infra.verify.view`: a plan, or what the API server serves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.verify import registry
from infra.verify.context import Context
from infra.verify.model import Plan, PlanError, from_run
from infra.verify.report import CHECKS, CheckResult, Finding, Report
from infra.verify.verifiers import missing_verifier_note

if TYPE_CHECKING:
    from infra.verify.view import ClusterView

__all__ = [
    "CHECKS",
    "CheckResult",
    "Finding",
    "Plan",
    "PlanError",
    "Report",
    "plan_from_stack",
    "run_checks",
    "verify",
    "verify_dump",
    "verify_stack",
]


def verify(plan: Plan, checks: Sequence[str] | None = None) -> Report:
    """Run `checks` (default: all, in registry order) on a plan."""
    from infra.verify.view import PlanView

    return run_checks(plan, PlanView(Context(plan)), checks)


def run_checks(plan: Plan, view: ClusterView, checks: Sequence[str] | None = None) -> Report:
    """The checks of the registry on one cluster view: each check's offline runner on a plan view, its
    live runner on a live cluster (a check without one is skipped there, saying so)."""
    ctx = view.ctx
    report = Report(plan.stack, plan.cloud, plan.kubernetes_version, view.mode, view.source)
    if note := missing_verifier_note(ctx.platform.cloud):
        report.notes.append(note)
    for name in checks or registry.default_checks(plan.kind):
        check = registry.check(name)
        if (check.scope == "fleet") != (plan.kind == "fleet"):
            what = "a fleet stack" if check.scope == "fleet" else "a platform or job stack"
            report.checks.append(CheckResult(name, skipped=f"verifies {what}, not this {plan.kind} stack"))
            continue
        if view.mode == "offline":
            report.checks.append(check.offline_runner()(ctx))
            continue
        live = check.live_runner()
        if live is None:
            report.checks.append(CheckResult(name, skipped="offline only: run verify without --kubeconfig"))
        else:
            report.checks.append(live(ctx, view))
    return report


def plan_from_stack(stack: str, refs: Mapping[str, Any] | None = None) -> Plan:
    """Plan a stack offline the way `trainplane plan` does: a job stack on its platform's plan (or on
    recorded platform outputs in `refs`). Bad stacks raise infra.stacks.UsageError (exit 2 in the CLI)."""
    from components.spec import JobSpec, PlatformSpec
    from infra.stacks import load_stack, no_object_error, platform_stack_file, run_stack, validated

    sf = load_stack(stack)
    if sf.object("trainplane:fleet") is not None:
        from infra.verify.fleet_model import fleet_from_stack

        return fleet_from_stack(sf, refs)
    raw = sf.object("trainplane:platform")
    if raw is not None:
        validated(sf, "trainplane:platform", PlatformSpec)
        return from_run(run_stack(sf), raw if isinstance(raw, dict) else None)
    job_raw = sf.object("trainplane:job")
    if job_raw is None:
        raise no_object_error(sf)
    job = validated(sf, "trainplane:job", JobSpec)
    refs = dict(refs or {})
    if job.on_fleet:
        from infra.verify.fleet_model import fleet_job_plan

        return fleet_job_plan(sf, job, refs)
    short = job.platform_stack.split("/")[-1]
    if job.platform_stack in refs or short in refs:
        platform = refs_plan(short, refs.get(job.platform_stack, refs.get(short)))
    else:
        psf = platform_stack_file(sf, job)
        praw = psf.object("trainplane:platform")
        validated(psf, "trainplane:platform", PlatformSpec)
        platform = from_run(run_stack(psf), praw if isinstance(praw, dict) else None)
    result = run_stack(sf, {job.platform_stack: dict(platform.outputs)})
    return from_run(result, job_raw if isinstance(job_raw, dict) else None, platform)


def refs_plan(stack: str, outputs_or_plan: Any) -> Plan:
    """A platform known only by its outputs (`--ref NAME=FILE` of outputs, not a dump)."""
    if isinstance(outputs_or_plan, Plan):
        return outputs_or_plan
    from infra.verify.model import build

    return build(stack, [], dict(outputs_or_plan or {}), source="recorded outputs")


def verify_stack(stack: str, checks: Sequence[str] | None = None) -> Report:
    return verify(plan_from_stack(stack), checks)


def verify_dump(
    path: str | Path, platform_dump: str | Path | None = None, checks: Sequence[str] | None = None
) -> Report:
    """Verify a plan dump (infra/verify/dump.py); a job's dump on its embedded platform, or on
    `platform_dump` where given."""
    from infra.verify.dump import load_dump as load

    return verify(load(path, platform_dump), checks)
