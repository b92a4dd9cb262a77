"""`trainplane`: offline tools around the Pulumi program.

    trainplane plan aws-dev            tree, counts, GPUs, cost per hour, critical path
    trainplane plan aws-dev --json     the same as data
    trainplane plan gpt-small-aws-dev  a job stack, on the offline plan of its platform stack
    trainplane verify aws-dev          whole-platform checks on the offline plan (exit 1 on any failure)
    trainplane plan aws-dev --dump plan.json   the plan as a file (docs/verify.md, "Plan dumps")
    trainplane verify --dump plan.json a plan written by `plan --dump`
    trainplane verify aws-dev --kubeconfig ~/.kube/config   the same against a running cluster, read-only
    trainplane nccl-test gpt-small-aws-dev [--kubeconfig F]  NCCL preflight of a job (printed, or run)
    trainplane verify aws-h100-reserved --cloud   reservations and offerings against the cloud, read-only

--debug goes anywhere on the line (before or after the command) and shows tracebacks of internal errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from infra.console import make_console, table

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_CONFIG = EXIT_INPUT  # the name earlier versions used

# One table for every command, printed by `--help` (and in the README): scripts and CI branch on it.
EXIT_CODES = """exit codes (every command):
  0  ok: planned, rendered, every check passed, bandwidth at or above the floor
  1  a check failed: verify (offline, live or --cloud) found a problem, or nccl-test measured less than
     the floor or got no result from a preflight it ran
  2  the command could not do its job: invalid stack file or config, unknown stack or flag, a cluster or
     cloud that cannot be reached or read, no credentials, or verify --cloud with no check it can run on
     that cloud; one line per problem on stderr, no traceback
  3  internal error (a bug): one line on stderr; --debug shows the traceback"""


class UsageError(Exception):
    """Bad input from the user: printed as lines, exit 2."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


def _load_stack(stack: str):
    from infra import stackfile

    try:
        return stackfile.load(stack)
    except stackfile.StackFileError as e:
        raise UsageError([str(e)]) from None


def no_object_error(sf) -> UsageError:
    """A stack file with neither object; a mistyped `trainplane:` key gets a did-you-mean."""
    import difflib

    hint = ""
    for key in sorted(k for k in sf.config if k.startswith("trainplane:")):
        close = difflib.get_close_matches(key, ["trainplane:platform", "trainplane:job"], n=1, cutoff=0.6)
        if close:
            hint = f"; {key!r} is not one: did you mean {close[0]!r}?"
            break
    return UsageError([f"{sf.path}: no trainplane:platform (or trainplane:job) object in config{hint}"])


def platform_stack_file(sf, job):
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


def _validated(sf, key: str, model):
    from components.spec import ConfigError

    try:
        return model.load(sf.object(key))
    except ConfigError as e:
        raise UsageError(problem_lines(sf.path, e.problems)) from None


def problem_lines(path: object, problems: list[str]) -> list[str]:
    """The one format of a stack file's problems, platform or job, from validation or from the program:
    a header naming the file, then one line per problem naming its key."""
    return [f"{path}: {len(problems)} problem(s)", *problems]


def _run(sf, stack_refs: dict[str, Any] | None = None):
    import pulumi

    from infra.mockcloud import run_program

    try:
        return run_program(sf.config, sf.name, stack_refs=stack_refs, secret_keys=sf.secret_keys)
    except pulumi.RunError as e:
        lines = str(e).splitlines()
        if lines and lines[0] == "invalid stack config:":  # infra/program.py's ConfigError
            raise UsageError(problem_lines(sf.path, lines[1:])) from None
        raise UsageError([f"{sf.path}: {line}" for line in lines]) from None


def _read_refs(pairs: list[str]) -> dict[str, Any]:
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


def plan_stack(stack: str, ref_pairs: list[str] | None = None):
    """Validate and run a stack offline; returns (summary input) for plan and render."""
    from components.spec import JobSpec, PlatformSpec
    from infra.plan import summarize_job, summarize_platform

    sf = _load_stack(stack)
    if sf.object("trainplane:platform") is not None:
        spec = _validated(sf, "trainplane:platform", PlatformSpec)
        result = _run(sf)
        return result, summarize_platform(result, spec)
    if sf.object("trainplane:job") is None:
        raise no_object_error(sf)
    job = _validated(sf, "trainplane:job", JobSpec)
    refs = _read_refs(ref_pairs or [])
    outputs, platform_spec = _job_platform(job, refs, sf)
    result = _run(sf, {**refs, job.platform_stack: outputs})
    return result, summarize_job(result, job, str(outputs.get("cloud")), platform_spec)


def _job_platform(job, refs: dict[str, Any], sf=None):
    """The outputs of the platform stack a job names: recorded ones (`--ref`, full or short name), else
    those of planning stacks/Pulumi.<platform>.yaml offline, exactly what the engine would hand over after
    deploying it (then with the platform's spec, else None)."""
    from components.spec import PlatformSpec

    short = job.platform_stack.split("/")[-1]
    for key in (job.platform_stack, short):
        if key in refs:
            return refs[key], None
    psf = platform_stack_file(sf, job) if sf is not None else _load_stack(job.platform_stack)
    spec = _validated(psf, "trainplane:platform", PlatformSpec)
    return _run(psf).outputs, spec


def cmd_plan(args: argparse.Namespace, console: Console) -> int:
    if args.dump:
        return _dump_plan(args, console)
    _, summary = plan_stack(args.stack, args.ref)
    if args.json:
        print(json.dumps(summary.as_json(), indent=2, default=str))
        return EXIT_OK
    from infra.plan_output import print_plan

    print_plan(summary, console)
    return EXIT_OK


def _dump_plan(args: argparse.Namespace, console: Console) -> int:
    """`plan STACK --dump FILE`: the plan verify checks, in the dump format of infra/verify/dump.py."""
    from pathlib import Path

    from infra.verify import PlanError, plan_from_stack
    from infra.verify.dump import write_dump

    if args.json:
        raise UsageError(["plan --dump FILE writes the plan, --json prints its summary: use one of them"])
    folder = Path(args.dump).resolve().parent
    if not folder.is_dir():  # before minutes of planning, not after
        raise UsageError([f"plan --dump {args.dump}: no such directory {folder}"])
    plan = plan_from_stack(args.stack, _read_refs(args.ref) if args.ref else None)
    try:
        write_dump(plan, args.dump)
    except PlanError as e:
        raise UsageError([str(e)]) from None
    on = f" on platform {plan.platform.stack}" if plan.platform is not None else ""
    console.print(
        f"wrote the {plan.kind} plan of {plan.stack}{on} ({len(plan.resources)} resources) to {args.dump}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK


def cmd_render(args: argparse.Namespace, console: Console) -> int:
    from pathlib import Path

    from infra.render import render

    result, _ = plan_stack(args.stack, args.ref)
    files = render(result, Path(args.out))
    console.print(f"wrote {len(files)} files under {args.out}", markup=False, highlight=False)
    return EXIT_OK


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    return _verify_cloud(args, console) if args.cloud else _verify_plan(args, console)


def _verify_plan(args: argparse.Namespace, console: Console) -> int:
    from infra.verify import PlanError, plan_from_stack, verify
    from infra.verify.dump import load_for_verify
    from infra.verify.output import print_report

    checks = args.check or None
    if args.dump:
        if args.stack or args.kubeconfig or args.context:
            raise UsageError(["verify --dump FILE takes no stack and no live cluster"])
        try:
            plan = load_for_verify(args.dump, args.ref)
        except PlanError as e:
            raise UsageError([str(e)]) from None
        report = verify(plan, checks)
    elif not args.stack:
        raise UsageError(["verify needs a STACK (or --dump FILE)"])
    else:
        refs = _read_refs(args.ref) if args.ref else None
        plan = plan_from_stack(args.stack, refs)
        if args.kubeconfig or args.context:
            from infra.verify.live import LiveError, verify_live

            try:
                report = verify_live(plan, kubeconfig=args.kubeconfig, context=args.context, checks=checks)
            except LiveError as e:
                raise UsageError([str(e)]) from None
        else:
            report = verify(plan, checks)
    if args.json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        print_report(report, console)
    return EXIT_OK if report.ok else EXIT_FAILED


def _job_and_platform(stack: str, ref_pairs: list[str]):
    """A job stack's JobSpec and its platform's outputs (recorded with --ref, else planned offline)."""
    from components.spec import JobSpec, check_job
    from infra.nccl_test import platform_outputs

    sf = _load_stack(stack)
    if sf.object("trainplane:job") is None:
        raise UsageError([f"{sf.path}: not a job stack (no trainplane:job object in config)"])
    job = _validated(sf, "trainplane:job", JobSpec)
    outputs, _ = _job_platform(job, _read_refs(ref_pairs), sf)
    platform = platform_outputs(outputs)
    problems = check_job(job, platform)  # what the job stack itself would refuse
    if problems:
        raise UsageError(problem_lines(sf.path, problems))
    return job, platform


def cmd_nccl_test(args: argparse.Namespace, console: Console) -> int:
    """The manifest alone goes to stdout (`> jobset.yaml` is YAML); what it is and why, to stderr."""
    import yaml

    from infra.nccl_test import PreflightError, PreflightFailed, build, connect, run_live
    from trainer.collectives import table as sweep_table

    job, platform = _job_and_platform(args.stack, args.ref)
    try:
        pf = build(job, platform, nodes=args.nodes, collective=args.collective)
    except PreflightError as e:
        raise UsageError([str(e)]) from None
    live = bool(args.kubeconfig or args.context)
    try:
        api = connect(args.kubeconfig, args.context) if live else None
    except PreflightError as e:
        raise UsageError([str(e)]) from None
    err = make_console(stderr=True)
    floor = "no published floor for this pool" if pf.floor_gbps is None else f"{pf.floor_gbps} GB/s"
    err.print(
        f"NCCL preflight {pf.namespace}/{pf.name}: {pf.collective} on {pf.nodes} x {pf.gpus_per_node} GPUs "
        f"of pool {pf.pool}, fabric {pf.fabric or 'none'}, floor {floor}",
        markup=False,
        highlight=False,
    )
    if pf.floor_source:
        err.print(f"  floor source: {pf.floor_source}", markup=False, highlight=False)
    if not live:
        err.print("  (nothing sent: add --kubeconfig to run it)", markup=False, highlight=False)
        print(yaml.safe_dump(pf.manifest, sort_keys=False), end="")
        return EXIT_OK
    try:
        result = run_live(
            pf, kubeconfig=args.kubeconfig, context=args.context, timeout_s=args.timeout, api=api
        )
    except PreflightFailed as e:  # it ran and gave no bandwidth: the check failed
        err.print(str(e), markup=False, highlight=False, soft_wrap=True)
        return EXIT_FAILED
    except PreflightError as e:  # the cluster cannot be reached or read
        raise UsageError([str(e)]) from None
    print(sweep_table(result))
    return EXIT_OK if result.passed else EXIT_FAILED


def _verify_cloud(args: argparse.Namespace, console: Console) -> int:
    """`verify STACK --cloud`: read-only cloud API checks of a platform stack (infra/verify/cloud.py).

    When no check could run (GCP today, an existing cluster), nothing is verified: that is neither a pass
    (0: a script would go on as if the reservations were checked) nor a failed check (1: nothing failed),
    but the cloud not being asked, like missing credentials: exit 2 with one line saying so."""
    from components.spec import PlatformSpec
    from infra.verify.cloud import CloudError, verify_cloud

    if args.dump or args.kubeconfig or args.context or not args.stack:
        raise UsageError(["verify --cloud takes a platform STACK, no --dump and no live cluster"])
    sf = _load_stack(args.stack)
    if sf.object("trainplane:platform") is None:
        raise UsageError([f"{sf.path}: verify --cloud checks platform stacks (trainplane:platform)"])
    spec = _validated(sf, "trainplane:platform", PlatformSpec)
    try:
        report = verify_cloud(spec)
    except CloudError as e:
        raise UsageError([str(e)]) from None
    if args.json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        if report.findings:
            t = table(
                f"Cloud checks ({report.cloud}; {report.source})", "check", "subject", "result", "detail"
            )
            for f in report.findings:
                t.add_row(f.check, f.subject, "pass" if f.ok else "[red]FAIL[/]", f.message)
            console.print(t)
        for line in report.not_checked:
            console.print(f"  [yellow]not checked:[/] {line}", soft_wrap=True, highlight=False)
        if report.findings:
            console.print("cloud checks passed" if report.ok else "cloud checks failed")
    if not report.ran:
        raise UsageError([f"verify --cloud: no cloud check ran on {report.cloud}: nothing is verified"])
    return EXIT_OK if report.ok else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="trainplane", description=__doc__.split("\n")[0], epilog=EXIT_CODES, formatter_class=fmt
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    # --debug after the command too (`trainplane plan x --debug`): every subparser shares it. SUPPRESS
    # keeps a subparser's default from overwriting a --debug given before the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], epilog=EXIT_CODES, formatter_class=fmt, **kw)

    plan = command("plan", help="run the program offline under the mock engine and summarise it")
    plan.add_argument("stack", help="stack name (stacks/Pulumi.<name>.yaml) or a stack file path")
    plan.add_argument("--json", action="store_true", help="emit the summary as JSON")
    plan.add_argument(
        "--dump",
        metavar="FILE",
        help="write the plan (resources, outputs, config; a job's platform plan) for `verify --dump FILE`",
    )
    plan.add_argument(
        "--ref",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a job stack's platform outputs (JSON); default: plan stacks/Pulumi.<platform>.yaml offline",
    )
    plan.set_defaults(func=cmd_plan)
    render = command("render", help="write every Kubernetes object and Helm values of a stack as YAML")
    render.add_argument("stack", help="stack name (stacks/Pulumi.<name>.yaml) or a stack file path")
    render.add_argument("--out", required=True, help="directory to write into")
    render.add_argument("--ref", action="append", default=[], metavar="NAME=FILE", help="as for plan")
    render.set_defaults(func=cmd_render)
    from infra.verify.report import CHECKS

    verify = command(
        "verify", help="check the platform as a whole: storage, network, scheduling, identity, observability"
    )
    verify.add_argument("stack", nargs="?", help="stack name or file (omit with --dump)")
    verify.add_argument(
        "--dump", metavar="FILE", help="verify a plan written by `trainplane plan STACK --dump FILE`"
    )
    verify.add_argument(
        "--ref",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="with a stack: a job's platform outputs (as for plan); with --dump: the platform's dump",
    )
    verify.add_argument("--kubeconfig", metavar="FILE", help="check a running cluster (read-only)")
    verify.add_argument("--context", metavar="NAME", help="kubeconfig context of the running cluster")
    verify.add_argument(
        "--cloud",
        action="store_true",
        help="read-only cloud API checks with your credentials: reservations, instance type offerings (AWS)",
    )
    verify.add_argument("--check", action="append", choices=CHECKS, help="run only these checks (repeatable)")
    verify.add_argument("--json", action="store_true", help="emit the report as JSON")
    verify.set_defaults(func=cmd_verify)
    nccl = command(
        "nccl-test",
        help="NCCL preflight on a job's own pool, fabric and placement (bus bandwidth against a floor)",
        description="Prints the preflight JobSet's manifest (stdout; what it is on stderr), or runs it.",
    )
    nccl.add_argument("stack", help="job stack name (stacks/Pulumi.<name>.yaml) or a stack file path")
    nccl.add_argument("--nodes", type=int, help="nodes to span (default: the job's nodes.max)")
    nccl.add_argument(
        "--collective",
        choices=("all_gather", "all_reduce"),
        help="default: all_gather, or the collective the pool's fabric has a published floor for",
    )
    nccl.add_argument("--ref", action="append", default=[], metavar="NAME=FILE", help="as for plan")
    nccl.add_argument("--kubeconfig", metavar="FILE", help="run it on this cluster (else: print it)")
    nccl.add_argument("--context", metavar="NAME", help="kubeconfig context")
    nccl.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the result")
    nccl.set_defaults(func=cmd_nccl_test)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    parser = build_parser()
    args = parser.parse_args(argv)
    err = make_console(stderr=True)
    try:
        return int(args.func(args, make_console()))
    except UsageError as e:
        for line in e.lines:
            err.print(line, markup=False, highlight=False, soft_wrap=True)
        return EXIT_INPUT
    except Exception as e:  # an internal error: one line unless asked for more
        if args.debug:
            traceback.print_exc()
        hint = "" if args.debug else " (rerun with --debug)"
        err.print(
            f"trainplane: internal error: {type(e).__name__}: {e}{hint}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    # `python -m infra.cli`: run the imported module's main, so that the errors other modules raise
    # (infra.cli.UsageError) are the classes main catches, not copies defined in __main__.
    from infra.cli import main as _main

    sys.exit(_main())
