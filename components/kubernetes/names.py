"""Names the in-cluster components, the job builder and the tests agree on."""

from __future__ import annotations

from components.bundle import MONITORING_NAMESPACE

GPU_OPERATOR_NAMESPACE = "gpu-operator"
KUEUE_NAMESPACE = "kueue-system"

# Helm release names are fixed (not auto-suffixed) so in-cluster service names are predictable.
GPU_OPERATOR_RELEASE = "gpu-operator"
PROMETHEUS_RELEASE = "kube-prometheus-stack"
LOKI_RELEASE = "loki"
ALLOY_RELEASE = "alloy"
KUEUE_RELEASE = "kueue"

# Trainer pods expose Prometheus metrics on this named port; the PodMonitor scrapes it and the team
# NetworkPolicy admits the monitoring namespace to it.
TRAINER_METRICS_PORT = 9090
TRAINER_METRICS_PORT_NAME = "metrics"
# trainplane's training jobs label their objects and pods with the job name (components/kubernetes/training_job.py).
JOB_LABEL = "trainplane.dev/job"
# Kubernetes labels every pod of a batch/v1 Job (Indexed completion mode) carries; the PodMonitor and
# Alloy turn them into the `job` and `rank` labels of metrics and logs.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
RANK_LABEL = "batch.kubernetes.io/job-completion-index"

# Loki's in-cluster push and query endpoint (the chart's gateway service, single-binary mode).
LOKI_URL = f"http://{LOKI_RELEASE}-gateway.{MONITORING_NAMESPACE}.svc.cluster.local"

# Helm's default 5-minute wait is too short for the GPU operator's DaemonSets on fresh GPU nodes.
GPU_OPERATOR_TIMEOUT_S = 1800
RELEASE_TIMEOUT_S = 900
