"""`trainplane status JOB`: a training job's timeline from the cluster and Prometheus (infra/status/).

JOB is a job stack (`gpt-small-aws-dev` or a stack file: the job's name and its team's namespace come from
the stack, as the job stack deploys them), or NAMESPACE/NAME, or NAME with --namespace.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from infra.commands import EXIT_OK
from infra.stacks import UsageError, load_stack, validated

USAGE_HINT = "name a job stack, NAMESPACE/NAME, or NAME --namespace NS"


def resolve_job(job: str, namespace: str | None) -> tuple[str, str, str | None]:
    """(namespace, job name, kind when known: JobSet or Job) of the JOB argument."""
    from infra import stackfile

    path = Path(job)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return _from_stack(job, namespace)
    if job.count("/") == 1:
        ns, _, name = job.partition("/")
        if not ns or not name:
            raise UsageError([f"status {job!r}: {USAGE_HINT}"])
        if namespace and namespace != ns:
            raise UsageError([f"status {job!r}: --namespace {namespace} names another namespace than {ns}"])
        return ns, name, None
    if stackfile.resolve(job).is_file():
        return _from_stack(job, namespace)
    if namespace:
        return namespace, job, None
    try:
        stackfile.load(job)
    except stackfile.StackFileError as e:  # the stack loader's line (with its did-you-mean), and the rest
        raise UsageError([f"{e}; or give NAMESPACE/NAME, or NAME --namespace NS"]) from None
    raise UsageError([f"status {job!r}: {USAGE_HINT}"])


def _from_stack(job: str, namespace: str | None) -> tuple[str, str, str | None]:
    from components.bundle import team_namespace
    from components.incluster.job_runtime import is_elastic
    from components.spec import JobSpec

    sf = load_stack(job)
    if sf.object("trainplane:job") is None:
        raise UsageError([f"{sf.path}: not a job stack (no trainplane:job object in config): {USAGE_HINT}"])
    spec = validated(sf, "trainplane:job", JobSpec)
    # The job stack deploys into its team's namespace (components/incluster/job_runtime.py _metadata).
    return namespace or team_namespace(spec.team), spec.name, "Job" if is_elastic(spec) else "JobSet"


def cmd_status(args: argparse.Namespace, console: Console) -> int:
    from infra.status import Series, build
    from infra.status.reader import StatusError, read_job, read_series
    from infra.status.render import as_json, print_timeline

    namespace, name, kind = resolve_job(args.job, args.namespace)
    try:
        state = read_job(namespace, name, kind, kubeconfig=args.kubeconfig, context=args.context)
        series: Series | None = None
        note: str | None = "no --prometheus URL given"
        if args.prometheus:
            series = read_series(args.prometheus, state)
            note = None
            if not series.steps and not series.redone:
                series = None
                note = f"Prometheus at {args.prometheus} has no trainplane_step samples of {namespace}/{name}"
    except StatusError as e:
        raise UsageError([str(e)]) from None
    timeline = build(state, series, note)
    if args.json:
        print(json.dumps(as_json(timeline), indent=2))
    else:
        print_timeline(timeline, console)
    return EXIT_OK


def add_parsers(command: Callable[..., argparse.ArgumentParser]) -> None:
    """`status` on the CLI's subparsers."""
    status = command(
        "status",
        help="a training job's timeline: admissions, restarts with their cause, steps and GPU-hours lost",
        description=(
            "Reads the job's JobSet (or Job), Kueue Workload, pods, nodes and Events (read-only), and with "
            "--prometheus the trainer's step series. JOB: a job stack, NAMESPACE/NAME, or NAME --namespace NS."
        ),
    )
    status.add_argument("job", metavar="JOB", help="job stack name or file, or NAMESPACE/NAME")
    status.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig of the cluster (default: the usual one)"
    )
    status.add_argument("--context", metavar="NAME", help="kubeconfig context")
    status.add_argument("--namespace", metavar="NS", help="the job's namespace (default: from the stack)")
    status.add_argument(
        "--prometheus", metavar="URL", help="Prometheus base URL (e.g. a port-forward: http://localhost:9090)"
    )
    status.add_argument("--json", action="store_true", help="emit the timeline as JSON")
    status.set_defaults(func=cmd_status)
