"""The names the recovery loop shares (issue 19): the GPU health controller writes them on nodes, the trainer
and Prometheus export them, `trainplane status` and `verify` read them, the fault campaign asserts them.

One place, so the writer and every reader agree. Standard library only (the contract package): the library, the
trainer and the controllers import it.

The loop: a fault is detected (DCGM health and XIDs, the node-start diagnostic, the EKS node monitoring
agent's condition, a trainer's hang or NCCL exit, a straggling rank) -> the node is quarantined (the
NoSchedule taint, cordoned, the condition below True with the reason, an Event; only pods that request GPUs
are evicted) -> the job's pods are evicted with DisruptionTarget, so the JobSet restarts without counting
(components/incluster/job_runtime.py), Kueue re-admits it and the restarted pods never land on the node
(they tolerate neither taint, and no pod tolerates a cordon) -> the trainer resumes from its newest verified
checkpoint -> the node returns after a passing diagnostic, or is replaced, never silently.
"""

from __future__ import annotations

from typing import Final

# ---- on the node (the GPU health controller writes; verify, status and the campaign read) ------------
# The taint keys, on the cluster-autoscaler's status/startup prefixes (controllers/gpu_health_agent.py:
# UNHEALTHY_TAINT and PENDING_TAINT are these): the quarantine, and the node-start diagnostic still pending.
QUARANTINE_TAINT: Final = "status-taint.cluster-autoscaler.kubernetes.io/gpu-unhealthy"
DIAGNOSTIC_TAINT: Final = "startup-taint.cluster-autoscaler.kubernetes.io/gpu-diagnostic"
# Both, the controller's own: the GPU operator's DaemonSets and the diagnostic tolerate them, jobs never.
HEALTH_TAINTS: Final = (QUARANTINE_TAINT, DIAGNOSTIC_TAINT)
# A node condition (type, status "True" while quarantined; reason CamelCase, e.g. Xid79, DiagFailed,
# Straggler; message: the evidence). Patched through nodes/status.
QUARANTINE_CONDITION: Final = "TrainplaneGpuQuarantined"
# On a node the controller cordoned: uncordon only what we cordoned, never an administrator's cordon.
CORDONED_BY_ANNOTATION: Final = "trainplane.dev/cordoned-by"
# RFC 3339 time the node was quarantined (for replaceAfterMinutes and `trainplane status`).
QUARANTINED_AT_ANNOTATION: Final = "trainplane.dev/quarantined-at"
CONTROLLER_NAME: Final = "trainplane-gpu-health"  # the Deployment, ServiceAccount and Event source
# The environment variable naming the GPU health controller's config file (gpu_health.controller_config).
CONFIG_ENV: Final = "GPU_HEALTH_CONFIG"
# The return-or-replace state of a quarantined node (controllers/node_return.py):
# RFC 3339 time the controller last deleted the node's diagnostic pod to rerun it (once its GPU pods are gone);
REDIAGNOSED_AT_ANNOTATION: Final = "trainplane.dev/rediagnosed-at"
# how many diagnostic runs it started in this quarantine (the first, then one per skipped run it retried);
REDIAGNOSE_ATTEMPTS_ANNOTATION: Final = "trainplane.dev/rediagnose-attempts"
# the replacement the node was handed to (repair | autoscaler | needed), so each is announced once;
REPLACEMENT_ANNOTATION: Final = "trainplane.dev/replacement"
# set (to CONTROLLER_NAME) where the controller added cluster-autoscaler's scale-down-disabled annotation to
# hold the node for its diagnostic; only such a hold is removed, never an administrator's.
HOLD_ANNOTATION: Final = "trainplane.dev/scale-down-held-by"
# RFC 3339 time the node last returned from quarantine (evidence from before it, e.g. old hang exits, is spent).
RETURNED_AT_ANNOTATION: Final = "trainplane.dev/returned-at"

# Event reasons (core/v1 Events on the Node, or on the Pod for evictions), type Normal unless noted.
EVENT_QUARANTINED: Final = "GpuQuarantined"  # Warning
EVENT_EVICTED: Final = "GpuPodEvicted"  # Warning, on the pod
EVENT_REDIAGNOSING: Final = "GpuRediagnosing"
EVENT_RETURNED: Final = "GpuReturned"
EVENT_REPLACING: Final = "GpuReplacing"  # Warning: handed to the pool's replacement
EVENT_REPLACE_NEEDED: Final = "GpuReplaceNeeded"  # Warning: no replacement here, a person must act
EVENT_STRAGGLER: Final = "GpuStragglerSuspect"  # Warning
EVENT_REASONS: Final = (
    EVENT_QUARANTINED,
    EVENT_EVICTED,
    EVENT_REDIAGNOSING,
    EVENT_RETURNED,
    EVENT_REPLACING,
    EVENT_REPLACE_NEEDED,
    EVENT_STRAGGLER,
)

# What the controller must be allowed to do (ClusterRole rules: apiGroup, resource, verbs). verify's
# `recovery` check requires at least these on the controller's ServiceAccount.
CONTROLLER_PERMISSIONS: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    ("", "nodes", ("get", "list", "watch", "patch")),
    ("", "nodes/status", ("patch",)),
    ("", "pods", ("get", "list", "watch")),
    ("", "pods/eviction", ("create",)),
    ("", "events", ("create",)),
)

# ---- the XID signal (the library writes the query into the controller's config as `xidQuery`; the
# controller reads its rows: gpu_health_agent.xids_by_node) -------------------------------------------
# The XIDs of each GPU that are recent, so that the signal clears (issue 30 (5)). DCGM_FI_DEV_XID_ERRORS is
# the LAST XID's number and keeps it until dcgm-exporter restarts (NVIDIA/dcgm-exporter#500, open), so it
# cannot tell a node that got a new XID from one repaired long ago: a node quarantined for it never came
# back. DCGM stores every XID event with its time (NVIDIA/DCGM#162, a maintainer's answer), and
# dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT counts the events of the last window per XID (label `xid`;
# NVIDIA/dcgm-exporter@4.5.3-4.8.2: internal/pkg/collector/xid_collector.go, expcollector.go GetValuesSince
# over --xid-count-window-size, 5 minutes by default in pkg/cmd/app.go), a repeat of the same XID
# included; the platform's metrics list collects it (dashboards/metrics.py). The `or` keeps the gauge
# where it CHANGED within XID_WINDOW (an exporter that lacks the count still reports a new, different
# XID). Rows: {node, gpu, xid} valued with the count, or {node, gpu} valued with the XID (xids_by_node);
# `node` is the label the DCGM ServiceMonitor adds (components/incluster/gpu_operator.py dcgm_relabelings).
XID_WINDOW: Final = "5m"
XID_QUERY: Final = (
    f'max by (node, gpu, xid) (max_over_time(DCGM_EXP_XID_ERRORS_COUNT{{xid!=""}}[{XID_WINDOW}]) > 0)'
    f" or max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS and changes(DCGM_FI_DEV_XID_ERRORS[{XID_WINDOW}]) > 0)"
)

# ---- the trainer's goodput series (trainer/metrics.py exports; recording rules and status read) -------
# Seconds spent in each phase of a job's processes, a counter per phase (reset by a restart; read with
# increase()).
PHASE_SECONDS: Final = "trainplane_phase_seconds_total"
PHASES: Final = ("startup", "data", "step", "checkpoint_save", "checkpoint_load", "redone")
# Steps computed again after a restart (past the resumed checkpoint, up to the highest step reached).
STEPS_REDONE: Final = "trainplane_steps_redone_total"

# ---- recording rules and alerts (components/incluster/alerts.py and its recording rules) ---------------
# Labels of both: namespace (the team's), job; the team-level rules drop job.
GOODPUT_RATIO: Final = "trainplane:goodput:ratio"
BADPUT_SECONDS: Final = "trainplane:badput_seconds"  # label `cause`
GOODPUT_TEAM_RATIO: Final = "trainplane:team_goodput:ratio"
STRAGGLER_RATIO: Final = "trainplane:rank_straggler:ratio"  # a rank's step time over its job's median
ALERT_STRAGGLER: Final = "TrainplaneStragglerNode"  # labels: namespace, job, rank, node
ALERT_QUARANTINED: Final = "TrainplaneGpuNodeQuarantined"
ALERT_REPLACE_NEEDED: Final = "TrainplaneGpuNodeNeedsReplacement"
