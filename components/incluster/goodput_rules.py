"""Recording rules for goodput and stragglers, and the alerts of the recovery loop (issue 19).

Goodput as the field defines it: productive step time over the wall time of the job's allocation (Google's
ml-goodput-measurement: "the share of a training workload's wall-clock time spent on preserved, productive
work", badput "attributed to its cause": start-up, data loading, checkpoint save and restore, wasted
progress from disruptions; NVIDIA's resiliency extension NVRx and its GoodputMeasurement: "the fraction of
elapsed time during which a training job is making useful progress (not stalled, restarting, or doing
overhead work)").

What the rules read (trainer/goodput.py): every pod's exporting process (local rank 0 of each node)
counts its own wall time by phase in trainplane_phase_seconds_total{phase}; the phases add up to the time
since the OS started the process. A counter per process, so a restart resets it (a new pod, a new series):
the rules read it with increase() per series and add the series of one node rank, then average the node
ranks (each node's process lives through the same timeline; adding them would count a job's time once per
node).

Allocation wall time, by window W (the hour before each evaluation), from the trainer's own series:
- a process's start is `time() - (sum of its phase counters)` at any sample (they add up to its age);
- the job's allocation in W runs from the earliest process start seen in W (clipped to W's start) to the
  last time any of its processes was seen (a finished job stops accruing);
- the seconds of that span no process of the job accounted for are badput cause `down` (the pods were
  rescheduled, waited for a node or its provisioning, or were pulled): counted once the job's next
  attempt reports, as the gap then lies between two processes' times. Subquery resolution 1m: the span is
  exact to a minute.
Team goodput weights each job by its GPUs (trainplane_world_size: one process per GPU): productive
GPU-seconds over allocated GPU-seconds of the namespace.
"""

from __future__ import annotations

from typing import Any

from components.spec import GpuHealthSpec
from contract.recovery import (
    ALERT_QUARANTINED,
    ALERT_REPLACE_NEEDED,
    ALERT_STRAGGLER,
    BADPUT_SECONDS,
    GOODPUT_RATIO,
    GOODPUT_TEAM_RATIO,
    PHASE_SECONDS,
    PHASES,
    QUARANTINE_CONDITION,
    STRAGGLER_RATIO,
)

WINDOW = "1h"
WINDOW_S = 3600
RESOLUTION = "1m"  # subquery step of the allocation span
# Intermediate series (this module's own; `trainplane status` and dashboards may read them too).
JOB_PHASE_SECONDS = "trainplane:job_phase_seconds:increase1h"  # namespace, job, phase
JOB_ALLOCATION_SECONDS = "trainplane:job_allocation_seconds:1h"  # namespace, job
JOB_GPUS = "trainplane:job_gpus:max1h"  # namespace, job
# A rank's compute time is a gauge of its last step: averaged over this window before comparing ranks, so
# one slow step (a checkpoint, a GC pause) does not make a straggler.
STRAGGLER_SMOOTHING = "5m"
# After replaceAfterMinutes the controller hands the node to its pool's replacement; the node should be
# gone this much later. Still there: nobody replaced it.
REPLACE_GRACE_MINUTES = 15

_BY_JOB = "namespace, job"


def _record(name: str, expr: str) -> dict[str, Any]:
    return {"record": name, "expr": expr}


def _process_age() -> str:
    """Per process (pod): seconds since the OS started it, at the evaluation time."""
    return f"sum by (namespace, job, pod) ({PHASE_SECONDS})"


def goodput_rules() -> list[dict[str, Any]]:
    phases_ = (
        f"avg by (namespace, job, phase) (sum by (namespace, job, node_rank, phase) "
        f"(increase({PHASE_SECONDS}[{WINDOW}])))"
    )
    first_start = f"min by ({_BY_JOB}) (min_over_time((time() - {_process_age()})[{WINDOW}:{RESOLUTION}]))"
    last_seen = f"max by ({_BY_JOB}) (max_over_time((time() + 0 * {_process_age()})[{WINDOW}:{RESOLUTION}]))"
    allocation = f"clamp_min({last_seen} - clamp_min({first_start}, time() - {WINDOW_S}), 0)"
    spent = f"sum by ({_BY_JOB}) ({JOB_PHASE_SECONDS})"
    badput_phases = "|".join(p for p in PHASES if p != "step")
    productive = f'sum by ({_BY_JOB}) ({JOB_PHASE_SECONDS}{{phase="step"}})'
    return [
        _record(JOB_PHASE_SECONDS, phases_),
        _record(JOB_ALLOCATION_SECONDS, allocation),
        _record(JOB_GPUS, f"max by ({_BY_JOB}) (max_over_time(trainplane_world_size[{WINDOW}]))"),
        # Badput by cause: each phase but `step`, and `down` (the allocation no process accounted for).
        # (one rule: promtool's lint refuses two rules recording the same name and labels)
        _record(
            BADPUT_SECONDS,
            f'sum without (phase) (label_replace({JOB_PHASE_SECONDS}{{phase=~"{badput_phases}"}}, '
            '"cause", "$1", "phase", "(.+)")) '
            f'or label_replace(clamp_min({JOB_ALLOCATION_SECONDS} - {spent}, 0), "cause", "down", "", "")',
        ),
        _record(
            GOODPUT_RATIO,
            f"clamp_max({productive} / ({JOB_ALLOCATION_SECONDS} > 0), 1)",
        ),
        _record(
            GOODPUT_TEAM_RATIO,
            f"clamp_max(sum by (namespace) ({productive} * {JOB_GPUS}) / "
            f"(sum by (namespace) ({JOB_ALLOCATION_SECONDS} * {JOB_GPUS}) > 0), 1)",
        ),
    ]


def straggler_rules() -> list[dict[str, Any]]:
    """A rank's own compute time over its job's median (every node's exporter publishes its own ranks,
    trainer/reporting.py, so the series carry the rank's node)."""
    smoothed = f"avg_over_time(trainplane_rank_step_seconds[{STRAGGLER_SMOOTHING}])"
    rank = f"max by (namespace, job, rank, node) ({smoothed})"
    median = f"quantile by ({_BY_JOB}) (0.5, max by (namespace, job, rank) ({smoothed}))"
    return [_record(STRAGGLER_RATIO, f"{rank} / on ({_BY_JOB}) group_left () ({median} > 0)")]


def _alert(alert: str, expr: str, minutes: int, severity: str, summary: str) -> dict[str, Any]:
    return {
        "alert": alert,
        "expr": expr,
        "for": f"{minutes}m",
        "labels": {"severity": severity, "platform": "trainplane"},
        "annotations": {"summary": summary},
    }


def recovery_alerts(gpu_health: GpuHealthSpec) -> list[dict[str, Any]]:
    strag, quar = gpu_health.stragglers, gpu_health.quarantine
    # kube-state-metrics exports every node condition, custom ones included, as
    # kube_node_status_condition{condition, status="true"|"false"|"unknown"} (kubernetes/kube-state-metrics
    # v2.10.0..v2.20.0 internal/store/node.go createNodeStatusConditionFamilyGenerator, utils.go
    # addConditionMetrics lower-cases the status); no allowlist applies to it.
    quarantined = f'max by (node) (kube_node_status_condition{{condition="{QUARANTINE_CONDITION}", status="true"}}) == 1'
    return [
        # The GPU health controller reads this alert (firing, by node) to quarantine the node where the
        # job's team opted in (teams[].stragglers: quarantine).
        _alert(
            ALERT_STRAGGLER,
            f"{STRAGGLER_RATIO} > {strag.factor}",
            strag.for_minutes,
            "warning",
            "Rank {{ $labels.rank }} of {{ $labels.namespace }}/{{ $labels.job }} on node {{ $labels.node }} "
            f"computes each step {{{{ $value }}}}x as long as the job's median (over {strag.factor}x for "
            f"{strag.for_minutes} minutes): the node is a suspect",
        ),
        _alert(
            ALERT_QUARANTINED,
            quarantined,
            0,
            "warning",
            "GPU node {{ $labels.node }} is quarantined by trainplane-gpu-health (node condition "
            f"{QUARANTINE_CONDITION}: its reason says why); its GPU pods were evicted",
        ),
        _alert(
            ALERT_REPLACE_NEEDED,
            quarantined,
            quar.replace_after_minutes + REPLACE_GRACE_MINUTES,
            "critical",
            "GPU node {{ $labels.node }} has been quarantined for over "
            f"{quar.replace_after_minutes + REPLACE_GRACE_MINUTES} minutes and was neither returned nor "
            "replaced: replace it",
        ),
    ]


# Every series these rules record (dashboards/metrics.py allows queries to read them).
RECORDED = (
    JOB_PHASE_SECONDS,
    JOB_ALLOCATION_SECONDS,
    JOB_GPUS,
    BADPUT_SECONDS,
    GOODPUT_RATIO,
    GOODPUT_TEAM_RATIO,
    STRAGGLER_RATIO,
)


def recovery_groups(gpu_health: GpuHealthSpec) -> list[dict[str, Any]]:
    return [
        {"name": "trainplane.goodput", "rules": goodput_rules() + straggler_rules()},
        {"name": "trainplane.recovery", "rules": recovery_alerts(gpu_health)},
    ]
