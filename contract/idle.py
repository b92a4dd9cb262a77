"""The names idle reclaim shares (issue 20, point 3): the recording rule and alert write them, the GPU health
controller's idle handler reads the alert and writes the Events and annotations, verify and `trainplane status`
read them. One place, so the writer and every reader agree. Standard library only (the contract package): the
controller image carries it.

The loop: a team sets `teams[].idle: {gpuUtilBelow, for, action}` -> the rule records each training job's mean
GPU utilisation over its pods' GPUs (dcgm-exporter's per-pod series, namespace/pod -> the job via
kube_pod_owner, as the cost rules map them) -> the alert fires after the team's window below its threshold,
labelled with the job, its namespace, the team and the action -> the controller skips exempt jobs (the label
below, or the team's own exemption labels), posts a Warning Event on the job, and with `requeue` deactivates the
job's Kueue Workload (spec.active=false): Kueue evicts it, the JobSet/Job is suspended, its pods get SIGTERM and
the trainer writes its checkpoint in the grace period (the spot-preemption path), then the controller sets the
Workload active again once the job's pods are gone and no other Workload waits for the GPUs it gave back (none
pending in its ClusterQueue or a cohort peer that may borrow them), so the job waits in its queue again (in its
creation-time order, not at the back: kueue v0.19.2 pkg/workload/workload.go GetQueueOrderTimestamp; hence the
hold; idle_reclaim.py).
"""

from __future__ import annotations

from typing import Final

# ---- Prometheus (components/incluster/idle_rules.py records and alerts; the controller queries) ----------------
# Mean GPU utilisation (0-100, DCGM_FI_DEV_GPU_UTIL) of each training job's GPUs, by namespace, team and job
# (`job`: the JobSet's name, or the Indexed Job's for elastic jobs, as the cost rules label it).
JOB_GPU_UTIL: Final = "trainplane:job_gpu_util:avg"
# Fires per job below its team's threshold for its team's window. Labels: namespace, team, job, action
# (alert | requeue), severity warning.
IDLE_ALERT: Final = "TrainplaneJobGpuIdle"

# Exported by the GPU health controller (prometheus_client, its metrics port, scraped by the controller's own
# PodMonitor with honorLabels so `namespace` and `job` survive): 1 for each exempt JobSet/Job in a team namespace
# with an idle policy. The alert is `... unless on (namespace, job)` this series, so exempt jobs never alert
# (kube-state-metrics would need a label allowlist, a subchart value, to expose the jobs' labels).
IDLE_EXEMPT_METRIC: Final = "trainplane_job_idle_exempt"

# ---- on the job (JobSet or batch/v1 Job) and its Workload -------------------------------------------------------
# "true" on a JobSet/Job exempts it (set by the job spec's `idleExempt: true`, or by hand).
IDLE_EXEMPT_LABEL: Final = "trainplane.dev/idle-exempt"
# RFC 3339 time the controller deactivated the Workload for idleness; present while the requeue is in progress, so
# the controller reactivates only what it deactivated, never a Workload an administrator deactivated.
IDLE_REQUEUED_AT_ANNOTATION: Final = "trainplane.dev/idle-requeued-at"
# RFC 3339 time the controller requeued the job while it was idle since its pods started (idle_startup.py): its
# start-up is longer than its team's window; kept on the Workload, so it is not requeued in start-up again.
IDLE_STARTUP_ANNOTATION: Final = "trainplane.dev/idle-requeued-in-startup"

# Event reasons (core/v1 Events on the JobSet/Job), source the controller (contract.recovery.CONTROLLER_NAME).
EVENT_IDLE: Final = "GpuIdle"  # Warning: the job's GPUs sat idle past the team's window (any action)
EVENT_IDLE_REQUEUED: Final = "GpuIdleRequeued"  # Warning: its Workload was deactivated to give the GPUs back
EVENT_IDLE_REACTIVATED: Final = (
    "GpuIdleReactivated"  # its pods are gone; the Workload waits in its queue again
)
EVENT_IDLE_EXEMPT: Final = "GpuIdleExempt"  # idle past the window but exempt: noted once, nothing done
# Normal: its pods are gone, but other Workloads wait for the quota it gave back (its ClusterQueue's or a cohort
# peer's pendingWorkloads): it is kept inactive until none is pending. Once per hold.
EVENT_IDLE_HELD: Final = "GpuIdleHeld"

# ---- the controller's permissions (the library grants them, verify requires them) ------------------------------
# What the controller needs for idle reclaim beyond recovery.CONTROLLER_PERMISSIONS (ClusterRole rules: apiGroup,
# resource, verbs): list the jobs and Workloads of the team namespaces each round (controllers/idle_round.py; no
# watch, they are listed, not indexed), and the queues while a Workload is held (controllers/idle_hold.py); patch
# only Workloads (spec.active and our annotation); pods and Events are in CONTROLLER_PERMISSIONS already. The
# library adds them to the controller's ClusterRole when a team has an idle policy
# (components/incluster/gpu_health_controller.py), and verify's `recovery` and `idle` checks require them.
IDLE_PERMISSIONS: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    ("jobset.x-k8s.io", "jobsets", ("get", "list")),
    ("batch", "jobs", ("get", "list")),
    ("kueue.x-k8s.io", "workloads", ("get", "list", "patch")),
    # The hold: each held Workload's LocalQueue (team namespaces) and the ClusterQueues (cluster-scoped).
    ("kueue.x-k8s.io", "localqueues", ("get", "list")),
    ("kueue.x-k8s.io", "clusterqueues", ("get", "list")),
)
