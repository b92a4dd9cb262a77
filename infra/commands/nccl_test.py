"""`trainplane nccl-test`: a job's NCCL preflight (infra/nccl_test.py), printed or run on a cluster."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

from infra.commands import EXIT_FAILED, EXIT_OK
from infra.console import make_console
from infra.stacks import UsageError, job_and_platform


def cmd_nccl_test(args: argparse.Namespace, console: Console) -> int:
    """The manifest alone goes to stdout (`> jobset.yaml` is YAML); what it is and why, to stderr."""
    import yaml

    from infra.nccl_test import PreflightError, PreflightFailed, build, connect, run_live
    from trainer.collectives import table as sweep_table

    job, platform = job_and_platform(args.stack, args.ref)
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
        # On a rack pool, its ComputeDomain (and RDMA NIC template) first: the JobSet's pods claim from them.
        docs = [d for d in (pf.compute_domain, pf.nic_claim_template) if d is not None] + [pf.manifest]
        print(yaml.safe_dump_all(docs, sort_keys=False), end="")
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


def add_parsers(command: Callable[..., argparse.ArgumentParser]) -> None:
    """`nccl-test` on the CLI's subparsers."""
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
