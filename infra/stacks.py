"""Loading, validating and running a stack offline: what `trainplane plan`, `render`, `verify` and
`nccl-test` and the verify library (`infra.verify.plan_from_stack`) share.

The library raises `UsageError` (bad input from the user: one line per problem, exit 2 in the CLI); the
CLI (infra/cli.py) imports this module, never the reverse.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any


class UsageError(Exception):
    """Bad input from the user: printed as lines, exit 2."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


def load_stack(stack: str) -> Any:
    from infra import stackfile

    try:
        return stackfile.load(stack)
    except stackfile.StackFileError as e:
        raise UsageError([str(e)]) from None


def no_object_error(sf: Any) -> UsageError:
    """A stack file with neither object; a mistyped `trainplane:` key gets a did-you-mean."""
    import difflib

    if sf.object("trainplane:fleet") is not None:
        # A command that takes a platform or job stack (verify, nccl-test, status) given a fleet stack.
        return UsageError(
            [f"{sf.path}: a fleet stack (trainplane:fleet); this command takes a platform or job stack"]
        )
    hint = ""
    kinds = ["trainplane:platform", "trainplane:job", "trainplane:fleet"]
    for key in sorted(k for k in sf.config if k.startswith("trainplane:") and k not in kinds):
        close = difflib.get_close_matches(key, kinds, n=1, cutoff=0.6)
        if close:
            hint = f"; {key!r} is not one: did you mean {close[0]!r}?"
            break
    return UsageError(
        [f"{sf.path}: no trainplane:platform (or trainplane:job, trainplane:fleet) object in config{hint}"]
    )


def platform_stack_file(sf: Any, job: Any) -> Any:
    """The stack file of the platform a job names (job.platformStack), or one line saying why not."""
    from infra import stackfile

    try:
        psf = stackfile.load(job.platform_stack)
    except stackfile.StackFileError as e:
        raise UsageError([f"{sf.path}: job.platformStack {job.platform_stack!r}: {e}"]) from None
    if psf.object("trainplane:platform") is None:
        held = "a job stack (trainplane:job)" if psf.object("trainplane:job") is not None else "no platform"
        raise UsageError(
            [
                f"{sf.path}: job.platformStack {job.platform_stack!r}: {psf.path} is {held}, not a platform "
                "stack; name the platform stack the job runs on"
            ]
        )
    return psf


def validated(sf: Any, key: str, model: Any) -> Any:
    from components.spec import ConfigError

    try:
        return model.load(sf.object(key))
    except ConfigError as e:
        raise UsageError(problem_lines(sf.path, e.problems)) from None


def problem_lines(path: object, problems: list[str]) -> list[str]:
    """The one format of a stack file's problems, platform or job, from validation or from the program:
    a header naming the file, then one line per problem naming its key."""
    return [f"{path}: {len(problems)} problem(s)", *problems]


def run_stack(sf: Any, stack_refs: dict[str, Any] | None = None) -> Any:
    """Run the program of a stack file under the offline engine (infra.mockcloud): its RunResult."""
    import pulumi

    from infra.mockcloud import run_program

    try:
        return run_program(sf.config, sf.name, stack_refs=stack_refs, secret_keys=sf.secret_keys)
    except pulumi.RunError as e:
        lines = str(e).splitlines()
        if lines and lines[0] == "invalid stack config:":  # infra/program.py's ConfigError
            raise UsageError(problem_lines(sf.path, lines[1:])) from None
        raise UsageError([f"{sf.path}: {line}" for line in lines]) from None


def read_refs(pairs: list[str]) -> dict[str, Any]:
    """`--ref NAME=FILE`: a platform stack's outputs as `pulumi stack output --json --show-secrets` prints them."""
    refs: dict[str, Any] = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise UsageError(
                [f"--ref {pair!r}: expected NAME=FILE, e.g. organization/trainplane/aws-dev=out.json"]
            )
        try:
            data = json.loads(open(path).read())
        except (OSError, json.JSONDecodeError) as e:
            raise UsageError([f"--ref {name}: cannot read {path}: {e}"]) from None
        refs[name] = data.get("outputs", data) if isinstance(data, dict) else data
    return refs


def plan_stack(stack: str, ref_pairs: list[str] | None = None, today: date | None = None) -> tuple[Any, Any]:
    """Validate and run a stack offline: (RunResult, its plan summary) for plan and render. `today`: the
    plan's day, for the age of its prices (components.clock.today() at the command line)."""
    from components.spec import JobSpec, PlatformSpec
    from infra.plan import summarize_job, summarize_platform

    sf = load_stack(stack)
    if sf.object("trainplane:platform") is not None:
        spec = validated(sf, "trainplane:platform", PlatformSpec)
        result = run_stack(sf)
        return result, summarize_platform(result, spec, today)
    if sf.object("trainplane:fleet") is not None:
        return plan_fleet(sf, read_refs(ref_pairs or []), today)
    if sf.object("trainplane:job") is None:
        raise no_object_error(sf)
    job = validated(sf, "trainplane:job", JobSpec)
    refs = read_refs(ref_pairs or [])
    if job.on_fleet:
        return plan_fleet_job(sf, job, refs, today)
    outputs, platform_spec = job_platform(job, refs, sf)
    result = run_stack(sf, {**refs, job.platform_stack: outputs})
    return result, summarize_job(result, job, str(outputs.get("cloud")), platform_spec, today, outputs)


def plan_fleet(sf: Any, refs: dict[str, Any], today: date | None = None) -> tuple[Any, Any]:
    """A fleet stack run offline on its manager's and workers' outputs (recorded with --ref, else planned
    from their stack files), and its summary (infra/plan_fleet.py); `today` prices as plan_stack's does."""
    from components.spec import PlatformSpec
    from components.spec.fleet import FleetSpec
    from infra.plan_fleet import summarize_fleet

    spec = validated(sf, "trainplane:fleet", FleetSpec)
    root = f"{sf.path}: fleet"
    platforms: dict[str, Any] = {}
    specs: dict[str, PlatformSpec | None] = {}
    named = [(spec.manager.platform_stack, f"{root}.manager.platformStack")] + [
        (w.platform_stack, f"{root}.workers[{i}].platformStack") for i, w in enumerate(spec.workers)
    ]
    for stack, where in named:
        platforms[stack], specs[stack] = _fleet_platform(stack, refs, where)
    manager = specs[spec.manager.platform_stack]
    if manager is not None and not manager.queueing.fleet_manager:
        raise UsageError(
            [
                f"{root}.manager.platformStack: {spec.manager.platform_stack!r} is not a fleet manager; set "
                "queueing.fleetManager: true in its platform (Kueue then runs MultiKueue)"
            ]
        )
    result = run_stack(sf, {**refs, **platforms})
    return result, summarize_fleet(result, spec, platforms, specs, today)


def _fleet_platform(stack: str, refs: dict[str, Any], where: str) -> tuple[dict[str, Any], Any]:
    """A platform's outputs: recorded (`--ref`, full or short name), else planned offline from its stack."""
    from components.spec import PlatformSpec

    for key in (stack, stack.split("/")[-1]):
        if key in refs:
            return refs[key], None
    try:
        psf = load_stack(stack)
    except UsageError as e:
        raise UsageError([f"{where}: {line}" for line in e.lines]) from None
    if psf.object("trainplane:platform") is None:
        raise UsageError([f"{where}: {psf.path} is not a platform stack (no trainplane:platform)"])
    spec = validated(psf, "trainplane:platform", PlatformSpec)
    return run_stack(psf).outputs, spec


def job_platform(job: Any, refs: dict[str, Any], sf: Any = None) -> tuple[dict[str, Any], Any]:
    """The outputs of the platform stack a job names: recorded ones (`--ref`, full or short name), else
    those of planning stacks/Pulumi.<platform>.yaml offline, exactly what the engine would hand over after
    deploying it (then with the platform's spec, else None)."""
    from components.spec import PlatformSpec

    short = job.platform_stack.split("/")[-1]
    for key in (job.platform_stack, short):
        if key in refs:
            return refs[key], None
    psf = platform_stack_file(sf, job) if sf is not None else load_stack(job.platform_stack)
    spec = validated(psf, "trainplane:platform", PlatformSpec)
    return run_stack(psf).outputs, spec


def job_and_platform(stack: str, ref_pairs: list[str]) -> tuple[Any, Any]:
    """A job stack's JobSpec and its platform's outputs (recorded with --ref, else planned offline)."""
    from components.spec import JobSpec, check_job
    from infra.nccl_test import platform_outputs

    sf = load_stack(stack)
    if sf.object("trainplane:job") is None:
        raise UsageError([f"{sf.path}: not a job stack (no trainplane:job object in config)"])
    job = validated(sf, "trainplane:job", JobSpec)
    if job.on_fleet:
        raise UsageError(
            [
                f"{sf.path}: job.fleetStack {job.fleet_stack!r}: a job on a fleet runs on whichever worker admits "
                "it; run this on a job stack that names the worker's platform (platformStack)"
            ]
        )
    outputs, _ = job_platform(job, read_refs(ref_pairs), sf)
    platform = platform_outputs(outputs)
    problems = check_job(job, platform)  # what the job stack itself would refuse
    if problems:
        raise UsageError(problem_lines(sf.path, problems))
    return job, platform


def fleet_job_outputs(
    sf: Any, job: Any, refs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the fleet stack's outputs, every platform's outputs by stack name, worker platform specs by stack):
    recorded (--ref), else planned offline."""
    from components.spec.fleet import FleetSpec

    short = job.fleet_stack.split("/")[-1]
    where = f"{sf.path}: job.fleetStack {job.fleet_stack!r}"
    recorded = refs.get(job.fleet_stack, refs.get(short))
    if recorded is not None:
        platforms = {
            w["stack"]: _fleet_platform(w["stack"], refs, where)[0] for w in recorded.get("workers") or []
        }
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
        platforms[stack], specs[stack] = _fleet_platform(stack, refs, f"{fsf.path}: fleet")
    return run_stack(fsf, {**refs, **platforms}).outputs, platforms, specs


def plan_fleet_job(sf: Any, job: Any, refs: dict[str, Any], today: date | None = None) -> tuple[Any, Any]:
    """A job on a fleet run offline on its fleet's and platforms' outputs; its FleetJobSummary
    (infra/plan_fleet_job.py) says per worker whether it fits and why not."""
    from components.job_fleet_stack import FleetOutputs, fleet_problems
    from components.outputs import PlatformOutputs
    from infra.plan import summarize_job
    from infra.plan_fleet_job import FleetJobSummary

    outputs, platforms, specs = fleet_job_outputs(sf, job, refs)
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
    summary = summarize_job(result, job, worker.cloud, specs.get(first.stack), today)
    return result, FleetJobSummary(
        summary, job.fleet_stack, [(f.name, f.stack, f.fits, f.problems) for f in fits]
    )
