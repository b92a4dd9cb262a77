"""Names the in-cluster components, the job builder and the tests agree on."""

from __future__ import annotations

from components.bundle import MONITORING_NAMESPACE

GPU_OPERATOR_NAMESPACE = "gpu-operator"
KUEUE_NAMESPACE = "kueue-system"
JOBSET_NAMESPACE = "jobset-system"
# The NVIDIA DRA driver (ComputeDomains), release and namespace as its install guide names them
# (kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1 docs/install.md: helm install dra-driver-nvidia-gpu ... --namespace dra-driver-nvidia-gpu).
DRA_DRIVER_NAMESPACE = "dra-driver-nvidia-gpu"

# Helm release names are fixed (not auto-suffixed) so in-cluster service names are predictable.
GPU_OPERATOR_RELEASE = "gpu-operator"
PROMETHEUS_RELEASE = "kube-prometheus-stack"
LOKI_RELEASE = "loki"
ALLOY_RELEASE = "alloy"
KUEUE_RELEASE = "kueue"
JOBSET_RELEASE = "jobset"
DRA_DRIVER_RELEASE = "dra-driver-nvidia-gpu"

# Trainer pods expose Prometheus metrics on this named port; the PodMonitor scrapes it and the team
# NetworkPolicy admits the monitoring namespace to it.
TRAINER_METRICS_PORT = 9090
TRAINER_METRICS_PORT_NAME = "metrics"
# trainplane's training jobs label their objects and pods with the job name (components/incluster/training_job.py).
JOB_LABEL = "trainplane.dev/job"
# The labels the PodMonitor and Alloy turn into the `job` and `node_rank` labels of metrics and logs.
# `job`: trainplane's own job label, on the pods of both runtimes (a JobSet's pods carry the child Job's
# name `<job>-workers-0` in batch.kubernetes.io/job-name, not the job's). `node_rank`: the completion index
# Kubernetes puts on every pod of an Indexed Job (also a JobSet's child Job; one child Job per training
# job, so the index is the node rank); label since Kubernetes 1.28 (PodIndexLabel).
JOB_NAME_LABEL = JOB_LABEL
RANK_LABEL = "batch.kubernetes.io/job-completion-index"

# Loki's in-cluster push and query endpoint (the chart's gateway service, single-binary mode).
LOKI_URL = f"http://{LOKI_RELEASE}-gateway.{MONITORING_NAMESPACE}.svc.cluster.local"

# Helm's default 5-minute wait is too short for the GPU operator's DaemonSets on fresh GPU nodes.
GPU_OPERATOR_TIMEOUT_S = 1800
RELEASE_TIMEOUT_S = 900
