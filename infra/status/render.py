"""`trainplane status` output: tables for people (rich, deterministic, whole when piped: infra/console.py)
and `--json` (camelCase keys, as every command's: docs/cli.md)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from infra.console import table
from infra.status.timeline import Restart, Timeline

NO_VALUE = "-"


def _counted(r: Restart) -> str:
    return {True: "yes", False: "no", None: "?"}[r.counted]


def _steps(r: Restart) -> str:
    return NO_VALUE if r.loss.steps is None else str(r.loss.steps)


def _hours(r: Restart, gpus: int) -> str:
    hours = r.loss.gpu_hours(gpus)
    if hours is None:
        return NO_VALUE
    return f"{hours:.2f}" if r.loss.caught_up else f"{hours:.2f}+"  # still redoing at the last sample


def _minutes(r: Restart) -> str:
    return NO_VALUE if r.loss.seconds is None else f"{r.loss.seconds / 60:.1f}"


def print_timeline(tl: Timeline, console: Console) -> None:
    counted = "" if tl.counted is None else f", {tl.counted} counted"
    limit = "" if tl.max_restarts is None else f" of {tl.max_restarts}"
    head = (
        f"{tl.kind} {tl.namespace}/{tl.name}: {tl.state}; {tl.gpus} GPUs; "
        f"{tl.restarts} restart(s){counted}{limit}"
    )
    console.print(head, markup=False, highlight=False, soft_wrap=True)
    events = table("Timeline", "time", "object", "event", "detail")
    for e in tl.entries:
        events.add_row(e.time or "?", e.source, e.what, e.detail)
    console.print(events)
    if tl.restart_list:
        rows = table(
            "Restarts",
            "#",
            "time",
            "via",
            "cause",
            "counted",
            "evidence",
            "steps lost",
            "minutes lost",
            "GPU-hours lost",
            right=("steps lost", "minutes lost", "GPU-hours lost"),
        )
        for r in tl.restart_list:
            rows.add_row(
                NO_VALUE if r.number is None else str(r.number),
                r.time or "?",
                r.via,
                r.cause,
                _counted(r),
                r.evidence,
                _steps(r),
                _minutes(r),
                _hours(r, tl.gpus),
            )
        console.print(rows)
    else:
        console.print("no restarts", highlight=False)
    steps = NO_VALUE if tl.steps_lost is None else str(tl.steps_lost)
    hours = NO_VALUE if tl.gpu_hours_lost is None else f"{tl.gpu_hours_lost:.2f}"
    console.print(f"lost in total: {steps} steps, {hours} GPU-hours", markup=False, highlight=False)
    if tl.prometheus:
        console.print(
            f"Prometheus columns empty: {tl.prometheus}", markup=False, highlight=False, soft_wrap=True
        )
    notes = sorted({r.loss.note for r in tl.restart_list if r.loss.note and not tl.prometheus})
    for note in notes:
        console.print(f"  {NO_VALUE} where: {note}", markup=False, highlight=False, soft_wrap=True)


def as_json(tl: Timeline) -> dict[str, Any]:
    return {
        "namespace": tl.namespace,
        "name": tl.name,
        "kind": tl.kind,
        "state": tl.state,
        "gpus": tl.gpus,
        "restarts": tl.restarts,
        "restartsCounted": tl.counted,
        "maxRestarts": tl.max_restarts,
        "timeline": [
            {"time": e.time, "object": e.source, "event": e.what, "detail": e.detail} for e in tl.entries
        ],
        "restartList": [
            {
                "number": r.number,
                "time": r.time,
                "via": r.via,
                "cause": r.cause,
                "counted": r.counted,
                "evidence": r.evidence,
                "stepsLost": r.loss.steps,
                "highWaterStep": r.loss.high_water,
                "resumedStep": r.loss.resumed,
                "secondsLost": r.loss.seconds,
                "gpuHoursLost": r.loss.gpu_hours(tl.gpus),
                "caughtUp": r.loss.caught_up,
                "note": r.loss.note,
            }
            for r in tl.restart_list
        ],
        "stepsLost": tl.steps_lost,
        "gpuHoursLost": tl.gpu_hours_lost,
        "prometheus": tl.prometheus,
    }
