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
    trainplane status gpt-small-aws-dev [--kubeconfig F] [--prometheus URL]   a job's restarts and losses
    trainplane gpus [--cloud aws] [--gpu H100] [--region R] [--json]   the GPU catalog: machines, prices
    trainplane --version               trainplane <version>

The commands live in infra/commands/ (one module each), stack loading in infra/stacks.py.
--debug goes anywhere on the line (before or after the command) and shows tracebacks of internal errors.
"""

from __future__ import annotations

import argparse
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

from infra.commands import EXIT_CODES, EXIT_CONFIG, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK
from infra.commands import cost as cost_command
from infra.commands import gpus as gpus_command
from infra.commands import nccl_test as nccl_command
from infra.commands import plan as plan_commands
from infra.commands import status as status_command
from infra.commands import verify as verify_command
from infra.console import make_console
from infra.stacks import UsageError

__all__ = [
    "EXIT_CODES",
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "UsageError",
    "build_parser",
    "main",
]


class _Version(argparse.Action):
    """`--version`: the version is looked up only when asked (argparse's own action formats it eagerly)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kw: Any) -> None:
        from infra.version import version

        try:
            found = version()
        except LookupError as e:
            parser.exit(EXIT_INTERNAL, f"trainplane: internal error: {e}\n")
        print(f"trainplane {found}")  # stdout, as argparse's version action prints
        parser.exit(EXIT_OK)


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="trainplane", description=(__doc__ or "").split("\n")[0], epilog=EXIT_CODES, formatter_class=fmt
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    parser.add_argument("--version", action=_Version, nargs=0, help="print `trainplane <version>` and exit")
    # --debug after the command too (`trainplane plan x --debug`): every subparser shares it. SUPPRESS
    # keeps a subparser's default from overwriting a --debug given before the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], epilog=EXIT_CODES, formatter_class=fmt, **kw)

    for module in (plan_commands, verify_command, nccl_command, status_command, cost_command, gpus_command):
        module.add_parsers(command)
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
