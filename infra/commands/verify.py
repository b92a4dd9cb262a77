"""`trainplane verify`: the checks of infra/verify on an offline plan, a plan dump or a running cluster
(`--kubeconfig`), and `--cloud`, the read-only cloud API checks."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console

from infra.commands import EXIT_FAILED, EXIT_OK
from infra.stacks import UsageError, load_stack, read_refs, validated

if TYPE_CHECKING:
    from infra.verify.report import Report


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    return _verify_cloud(args, console) if args.cloud else _verify_plan(args, console)


def _verify_plan(args: argparse.Namespace, console: Console) -> int:
    from infra.verify import PlanError, plan_from_stack, verify
    from infra.verify.dump import load_for_verify

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
        refs = read_refs(args.ref) if args.ref else None
        try:
            plan = plan_from_stack(args.stack, refs)
        except PlanError as e:  # outputs (recorded with --ref) that are not their stack's kind's
            raise UsageError([str(e)]) from None
        if args.kubeconfig or args.context:
            from infra.verify.fleet_live import verify_fleet_live
            from infra.verify.live import LiveError, verify_live

            # A fleet: the manager's kubeconfig; each worker is reached with its MultiKueue Secret's.
            run_live = verify_fleet_live if plan.kind == "fleet" else verify_live
            try:
                report = run_live(plan, kubeconfig=args.kubeconfig, context=args.context, checks=checks)
            except LiveError as e:
                raise UsageError([str(e)]) from None
        else:
            report = verify(plan, checks)
    _print(report, args.json, console)
    return EXIT_OK if report.ok else EXIT_FAILED


def _verify_cloud(args: argparse.Namespace, console: Console) -> int:
    """`verify STACK --cloud`: read-only cloud API checks of a platform stack (infra/verify/cloud.py),
    printed as offline and live reports are (the same table, the same JSON).

    When no check could run (GCP today, an existing cluster), nothing is verified: that is neither a pass
    (0: a script would go on as if the reservations were checked) nor a failed check (1: nothing failed),
    but the cloud not being asked, like missing credentials: exit 2 with one line saying so."""
    from components.spec import PlatformSpec
    from infra.verify.cloud import CloudError, verify_cloud

    if args.dump or args.kubeconfig or args.context or not args.stack:
        raise UsageError(["verify --cloud takes a platform STACK, no --dump and no live cluster"])
    sf = load_stack(args.stack)
    if sf.object("trainplane:platform") is None:
        raise UsageError([f"{sf.path}: verify --cloud checks platform stacks (trainplane:platform)"])
    spec = validated(sf, "trainplane:platform", PlatformSpec)
    try:
        report = verify_cloud(spec, sf.name)
    except CloudError as e:
        raise UsageError([str(e)]) from None
    _print(report, args.json, console)
    if not report.verified:
        raise UsageError([f"verify --cloud: no cloud check ran on {report.cloud}: nothing is verified"])
    return EXIT_OK if report.ok else EXIT_FAILED


def _print(report: Report, as_json: bool, console: Console) -> None:
    from infra.verify.output import print_report

    if as_json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        print_report(report, console)


def add_parsers(command: Callable[..., argparse.ArgumentParser]) -> None:
    """`verify` on the CLI's subparsers; its checks and their help come from infra/verify/registry.py."""
    from infra.verify.registry import CHECKS, help_text

    verify = command(
        "verify",
        help=f"check the platform as a whole: {', '.join(CHECKS)}",
        description=help_text(),
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
