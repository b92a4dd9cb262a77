"""`python -m policy.trainplane_policies check STACK [--config FILE]`, from a trainplane checkout: the pack
on a stack's offline plan (infra.stacks.plan_stack, the plan `trainplane plan` shows), without the Pulumi
CLI. Prints one line per violation, `policy: message`; exit 0 clean, 1 on a violation, 2 on bad input.
FILE is a --policy-pack-config file (policy name -> its config). The environment of the spot policy is
the stack's name, as `pulumi preview` would give it."""

from __future__ import annotations

import argparse
import json
import sys

from . import POLICIES
from .offline import records_of, stack_named, violations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policy.trainplane_policies")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="run every policy on a stack's offline plan")
    check.add_argument("stack", help="a stack of stacks/ (aws-dev) or a stack file")
    check.add_argument("--config", help="a --policy-pack-config JSON file")
    args = parser.parse_args(argv)

    from infra.stacks import UsageError, load_stack, plan_stack

    try:
        config = json.loads(open(args.config).read()) if args.config else {}
        sf = load_stack(args.stack)
        result, _ = plan_stack(args.stack)
    except UsageError as e:
        print("\n".join(e.lines), file=sys.stderr)
        return 2
    except (OSError, json.JSONDecodeError) as e:
        print(f"--config {args.config}: cannot read: {e}", file=sys.stderr)
        return 2
    if not isinstance(config, dict):
        print(f"--config {args.config}: not a JSON object of policy names", file=sys.stderr)
        return 2
    # A policy's config is its settings, or an enforcement level alone ("disabled" skips it), as in
    # pulumi's --policy-pack-config (pulumi-policy policy.py _normalize_config).
    levels = {k: v if isinstance(v, str) else v.get("enforcementLevel") for k, v in config.items()}
    settings = {k: v for k, v in config.items() if isinstance(v, dict)}
    with stack_named(sf.name):
        found = violations(records_of(result, sf.config), config=settings)
    found = {k: v for k, v in found.items() if levels.get(k, levels.get("all")) != "disabled"}
    for name, messages in found.items():
        for message in messages:
            print(f"{name}: {message}")
    print(f"{sf.name}: {sum(len(m) for m in found.values())} violation(s) of {len(POLICIES)} policies")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
