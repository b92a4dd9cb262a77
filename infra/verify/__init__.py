"""`trainplane verify`: does the platform work as a whole, not only resource by resource?

Library API:

    >>> from infra.verify import verify_stack, verify_dump
    >>> report = verify_stack("aws-dev")            # doctest: +SKIP
    >>> report.ok, report.failed()                  # doctest: +SKIP
    (False, ['storage', 'network'])
    >>> report = verify_dump("/tmp/aws-dev.json")   # `trainplane plan aws-dev --dump /tmp/aws-dev.json`  # doctest: +SKIP

`verify(plan)` runs the named checks (storage, network, scheduling, identity, observability) on a
`infra.verify.model.Plan` and returns a typed `Report`; `infra.verify.live` checks a running cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from infra.verify.context import Context
from infra.verify.model import Plan, PlanError, from_run
from infra.verify.report import CHECKS, CheckResult, Finding, Report

__all__ = [
    "CHECKS",
    "CheckResult",
    "Finding",
    "Plan",
    "PlanError",
    "Report",
    "plan_from_stack",
    "verify",
    "verify_dump",
    "verify_stack",
]


def _runners() -> dict[str, Callable[[Context], CheckResult]]:
    from infra.verify.checks import (
        admission,
        create_rules,
        fabric,
        identity,
        network,
        observability,
        scheduling,
        storage,
    )

    return {
        "storage": storage.run,
        "network": network.run,
        "scheduling": scheduling.run,
        "identity": identity.run,
        "observability": observability.run,
        "fabric": fabric.run,
        "admission": admission.run,
        "cloud": create_rules.run,
    }


def verify(plan: Plan, checks: Sequence[str] | None = None) -> Report:
    """Run `checks` (default: all) on a plan."""
    ctx = Context(plan)
    runners = _runners()
    report = Report(
        stack=plan.stack,
        cloud=plan.cloud,
        kubernetes_version=plan.kubernetes_version,
        mode="offline",
        source=plan.source,
    )
    for name in checks or CHECKS:
        report.checks.append(runners[name](ctx))
    return report


def plan_from_stack(stack: str, refs: Mapping[str, Any] | None = None) -> Plan:
    """Plan a stack offline the way `trainplane plan` does: a job stack on its platform's plan (or on
    recorded platform outputs in `refs`). Bad stacks raise infra.cli.UsageError (exit 2)."""
    from components.spec import JobSpec, PlatformSpec
    from infra.cli import _load_stack, _run, _validated, no_object_error, platform_stack_file

    sf = _load_stack(stack)
    raw = sf.object("trainplane:platform")
    if raw is not None:
        _validated(sf, "trainplane:platform", PlatformSpec)
        return from_run(_run(sf), raw if isinstance(raw, dict) else None)
    job_raw = sf.object("trainplane:job")
    if job_raw is None:
        raise no_object_error(sf)
    job = _validated(sf, "trainplane:job", JobSpec)
    refs = dict(refs or {})
    short = job.platform_stack.split("/")[-1]
    if job.platform_stack in refs or short in refs:
        platform = refs_plan(short, refs.get(job.platform_stack, refs.get(short)))
    else:
        psf = platform_stack_file(sf, job)
        praw = psf.object("trainplane:platform")
        _validated(psf, "trainplane:platform", PlatformSpec)
        platform = from_run(_run(psf), praw if isinstance(praw, dict) else None)
    result = _run(sf, {job.platform_stack: dict(platform.outputs)})
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
