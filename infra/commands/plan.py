"""`trainplane plan` and `trainplane render`: a stack run offline, summarised, dumped or written as YAML."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from rich.console import Console

from infra.commands import EXIT_OK
from infra.stacks import UsageError, plan_stack, read_refs


def cmd_plan(args: argparse.Namespace, console: Console) -> int:
    if args.dump:
        return _dump_plan(args, console)
    from components.clock import today

    try:
        day = today()
    except ValueError as e:
        raise UsageError([str(e)]) from None
    _, summary = plan_stack(args.stack, args.ref, day)
    if args.json:
        print(json.dumps(summary.as_json(), indent=2, default=str))
        return EXIT_OK
    from infra.plan_fleet import FleetSummary, print_fleet
    from infra.plan_fleet_job import FleetJobSummary, print_fleet_job
    from infra.plan_output import print_plan

    if isinstance(summary, FleetSummary):
        print_fleet(summary, console)
    elif isinstance(summary, FleetJobSummary):
        print_fleet_job(summary, console)
    else:
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
    plan = plan_from_stack(args.stack, read_refs(args.ref) if args.ref else None)
    if plan.kind == "fleet":
        # A fleet's plan is several clusters' plans (infra/verify/fleet_model.py); the dump holds one.
        raise UsageError(
            [
                f"plan --dump: {plan.stack} is a fleet stack, which has no dump format; run `verify {plan.stack}`"
            ]
        )
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


def add_parsers(command: Callable[..., argparse.ArgumentParser]) -> None:
    """`plan` and `render` on the CLI's subparsers (`command(name, **kw)` adds one)."""
    plan: Any = command("plan", help="run the program offline under the mock engine and summarise it")
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
