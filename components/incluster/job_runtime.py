"""The runtime object of a training job, as a plain manifest (pulumi-free): a JobSet, or for elastic jobs an
Indexed batch/v1 Job.

Fixed-size jobs (`nodes.min == nodes.max`) run as a JobSet (jobset.x-k8s.io/v1alpha2, JobSet v0.12.0): one
replicated job of N pods, one per node. If any pod fails, the JobSet recreates all of them together, so no
pod is left hanging in a rendezvous with a dead peer and pod 0 (the torch store) comes back with the
others. Its failure policy encodes the trainer's exit contract (trainer/contract.py) in two layers:

1. The child Job's podFailurePolicy turns the exits that are not a plain failure into an immediate Job
   failure with reason `PodFailurePolicy` and a message Kubernetes formats per rule
   (pkg/controller/job/pod_failure_policy.go: "Pod <ns>/<pod> has condition DisruptionTarget matching
   FailJob rule at index 0", "Container trainer for pod <ns>/<pod> failed with exit code 143 matching
   FailJob rule at index 1"). Any other failure exceeds `backoffLimit: 0` (reason BackoffLimitExceeded).
2. The JobSet's failurePolicy rules match those reasons and messages (JobSet v0.12.0
   pkg/controllers/failure_policy.go: rules in order, the first rule matching a failed child Job wins,
   `onJobFailureMessagePatterns` are RE2 regular expressions searched in the Job's Failed condition
   message; no match: RestartJobSet): exit 2 -> FailJobSet; exit 143 or DisruptionTarget ->
   RestartJobSetAndIgnoreMaxRestarts; exit 75 (a peer node vanished, bounded by the launcher) ->
   RestartJobSetAndIgnoreMaxRestarts; anything else -> RestartJobSet, counted against maxRestarts.

Elastic jobs (`nodes.min < nodes.max`) keep the Indexed Job: JobSet cannot change a replicated job's size
and Kueue admits a JobSet whole or not at all (partial admission, `kueue.x-k8s.io/job-min-parallelism`, is
a batch/v1 Job feature in Kueue 0.19), so an elastic JobSet would always wait for its maximum. Under the Job
runtime torchrun's c10d rendezvous re-forms the group when the Job recreates a pod, and the same exit
contract is a podFailurePolicy of Ignore/FailJob rules with backoffLimit = maxRestarts.
"""

from __future__ import annotations

from typing import Any

from components.incluster.job_pod import (
    CONFIG_DIR,
    CONFIG_FILE,
    CONTAINER,
    MASTER_PORT,
    QUEUE_LABEL,
    RDZV_PORT,
    job_labels,
    job_pools,
    pod_template,
    workload_annotations,
)
from components.outputs import PlatformOutputs
from components.spec import JobSpec
from contract.idle import IDLE_EXEMPT_LABEL
from trainer import contract

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
# The JobSet's one replicated job; its child Job is `<job>-workers-0`, pod i's hostname
# `<job>-workers-0-<i>` (JobSet v0.12.0 pkg/controllers/jobset_controller.go: child Job name
# `<jobset>-<replicatedJob>-<jobIndex>`; Indexed Job pods with a subdomain get `<job name>-<index>`).
REPLICATED_JOB = "workers"
# Reasons of a child Job's Failed condition (Kubernetes batch/v1 JobReasonPodFailurePolicy,
# JobReasonBackoffLimitExceeded).
POD_FAILURE_POLICY = "PodFailurePolicy"
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"

# Names of the JobSet failure-policy rules (also what verify and the docs call them). JobSet's validating
# webhook (fails closed) accepts 1-128 characters matching `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, unique
# per JobSet: no dashes (jobset@v0.12.0:pkg/webhooks/jobset_webhook.go ruleNameFmt, validateFailurePolicy).
RULE_CONFIG = "ConfigErrorFailsJobSet"
RULE_PREEMPTED = "PreemptionRestartsUncounted"
RULE_OTHER = "OtherFailureRestartsCounted"
# Knock-on exits of a lost peer node (trainer/peerloss.py), same naming rule.
RULE_PEER_LOST = "PeerLossRestartsWithoutCounting"


def is_elastic(job: JobSpec) -> bool:
    return job.nodes.min < job.nodes.max


def master_host(job: JobSpec) -> str:
    """Pod 0's stable DNS name: the rendezvous (elastic) or master (fixed size) address."""
    if is_elastic(job):
        return f"{job.name}-0.{elastic_service(job)}"
    return f"{job.name}-{REPLICATED_JOB}-0-0.{job.name}"


def elastic_service(job: JobSpec) -> str:
    """The headless Service of an elastic job (a JobSet makes its own, named after the JobSet)."""
    return f"{job.name}-workers"


def launcher_args(job: JobSpec) -> list[str]:
    """torchrun options for the launcher: static ranks when the size is fixed, c10d when elastic."""
    nodes = job.nodes
    args = [f"--nproc-per-node={job.gpus_per_node}"]
    if not is_elastic(job):
        args += [
            f"--nnodes={nodes.max}",
            "--node-rank=$(NODE_RANK)",
            f"--master-addr={master_host(job)}",
            f"--master-port={MASTER_PORT}",
        ]
    else:
        # Pod 0 hosts the c10d store; the others find it by its stable DNS name.
        args += [
            f"--nnodes={nodes.min}:{nodes.max}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={master_host(job)}:{RDZV_PORT}",
            f"--rdzv-id={job.name}",
        ]
    # A failed worker restarts the group in place a few times before the pod gives up to the Job.
    args.append("--max-restarts=3")
    return [*args, "--", "--config", f"{CONFIG_DIR}/{CONFIG_FILE}"]


def _exit_codes(action: str, codes: tuple[int, ...]) -> dict[str, Any]:
    return {
        "action": action,
        "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": list(codes)},
    }


DISRUPTION = {"type": "DisruptionTarget", "status": "True"}


def pod_failure_policy() -> dict[str, Any]:
    """The elastic (batch/v1 Job) runtime's podFailurePolicy; first match wins, the rest counts."""
    return {
        "rules": [
            # Evicted, preempted or its node reclaimed: not the job's fault, never counted.
            {"action": "Ignore", "onPodConditions": [DISRUPTION]},
            # Preempted after a committed checkpoint: retry, not a failure.
            _exit_codes("Ignore", contract.RETRY_WITHOUT_COUNTING),
            # Configuration error: retrying cannot help.
            _exit_codes("FailJob", contract.FAIL_JOB_NOW),
            # Another node vanished (the launcher bounds these in a row without progress): not counted.
            _exit_codes("Ignore", contract.RETRY_PEER_LOST),
        ]
    }


def child_pod_failure_policy() -> dict[str, Any]:
    """A JobSet child Job's podFailurePolicy: every exit of the contract that is not a counted failure
    fails the Job at once with reason PodFailurePolicy, so the JobSet's rules can tell them apart."""
    return {
        "rules": [
            {"action": "FailJob", "onPodConditions": [DISRUPTION]},
            _exit_codes("FailJob", contract.RETRY_WITHOUT_COUNTING),
            _exit_codes("FailJob", contract.FAIL_JOB_NOW),
            _exit_codes("FailJob", contract.RETRY_PEER_LOST),
        ]
    }


def _exit_pattern(codes: tuple[int, ...]) -> str:
    # Kubernetes: "Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d".
    alternatives = "|".join(str(c) for c in codes)
    return f"^Container {CONTAINER} for pod \\S+ failed with exit code ({alternatives}) matching FailJob rule"


def jobset_failure_policy(max_restarts: int) -> dict[str, Any]:
    """The JobSet's failurePolicy: the trainer's exit contract on the child Job's failure reason/message."""
    return {
        "maxRestarts": max_restarts,
        # Delete every child Job's pods and start them all again (JobSet's default strategy, stated).
        "restartStrategy": "Recreate",
        "rules": [
            {
                "name": RULE_CONFIG,
                "action": "FailJobSet",
                "onJobFailureReasons": [POD_FAILURE_POLICY],
                "onJobFailureMessagePatterns": [_exit_pattern(contract.FAIL_JOB_NOW)],
            },
            {
                "name": RULE_PREEMPTED,
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": [POD_FAILURE_POLICY],
                "onJobFailureMessagePatterns": [
                    "^Pod \\S+ has condition DisruptionTarget matching FailJob rule",
                    _exit_pattern(contract.RETRY_WITHOUT_COUNTING),
                ],
            },
            # A survivor of a lost node (spot reclaim) that exits before the lost node's pod is marked
            # disrupted must not make the restart counted; the launcher exits 1 instead after
            # TRAINPLANE_MAX_PEER_LOSSES of these in a row without a new checkpoint (trainer/peerloss.py).
            {
                "name": RULE_PEER_LOST,
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": [POD_FAILURE_POLICY],
                "onJobFailureMessagePatterns": [_exit_pattern(contract.RETRY_PEER_LOST)],
            },
            # JobSet's default for a failure no rule matches, stated so the policy reads whole.
            {"name": RULE_OTHER, "action": "RestartJobSet"},
        ],
    }


def _metadata(job: JobSpec, platform: PlatformOutputs) -> dict[str, Any]:
    team = platform.team(job.team)
    assert team is not None, "check_job refuses unknown teams"
    labels = {**job_labels(job), QUEUE_LABEL: team.local_queue}
    if job.idle_exempt:  # on the JobSet/Job only: the GPU health controller reads it there (idle_reclaim.py)
        labels[IDLE_EXEMPT_LABEL] = "true"
    return {
        "name": job.name,
        "namespace": team.namespace,
        "labels": labels,
        "annotations": {
            **workload_annotations(job_pools(job, platform)),
            # The provider would otherwise wait for the job to finish: a training run, not a deploy.
            "pulumi.com/skipAwait": "true",
        },
    }


def training_jobset(
    job: JobSpec, platform: PlatformOutputs, *, command: list[str] | None = None
) -> dict[str, Any]:
    """The JobSet manifest of a fixed-size job on its platform (pure: no Pulumi, no cluster).

    `command` replaces the trainer container's entry point and arguments and keeps everything else (pool,
    fabric, placement, environment, failure policy): e.g. a NCCL preflight on the job's own nodes.
    """
    n = job.nodes.max
    pod = pod_template(job, platform, args=launcher_args(job), command=command)
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": _metadata(job, platform),
        "spec": {
            # Kueue admits the whole JobSet (all its GPUs) or none of it, then unsuspends it.
            "suspend": True,
            # Pod hostnames `<job>-workers-0-<i>.<job>` through a headless Service the JobSet creates
            # (named after the subdomain, publishing not-ready pods: rendezvous precedes readiness).
            "network": {"enableDNSHostnames": True, "subdomain": job.name, "publishNotReadyAddresses": True},
            "failurePolicy": jobset_failure_policy(job.max_restarts),
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": job_labels(job)},
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": n,
                            "parallelism": n,
                            # The first counted pod failure fails the child Job; the JobSet restarts all.
                            "backoffLimit": 0,
                            "podFailurePolicy": child_pod_failure_policy(),
                            "template": pod,
                        },
                    },
                }
            ],
        },
    }


# Kueue's partial-admission annotations of a batch/v1 Job (kueue v0.19.2
# pkg/controller/jobs/job/job_controller.go JobMinParallelismAnnotation,
# JobCompletionsEqualParallelismAnnotation).
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"


def elastic_job(
    job: JobSpec, platform: PlatformOutputs, *, command: list[str] | None = None
) -> dict[str, Any]:
    """The Indexed batch/v1 Job of an elastic job (see the module docstring)."""
    metadata = _metadata(job, platform)
    # Kueue may admit an elastic job with fewer pods than max when quota is short (partial admission).
    metadata["annotations"][MIN_PARALLELISM] = str(job.nodes.min)
    # Partial admission lowers only `parallelism` unless this is "true"; with `completions` left at the
    # maximum, the Job controller would start the missing indexes after the admitted pods finish, i.e. run
    # the training again (kueue v0.19.2 pkg/controller/jobs/job/job_controller.go RunWithPodSetsInfo,
    # syncCompletionWithParallelism). Its webhook requires an Indexed Job with completions == parallelism
    # (job_webhook.go validateSyncCompletionCreate), which this Job is. A JobSet is never partially
    # admitted (jobset_controller.go PodSets sets no MinCount), so its child Jobs do not carry it.
    metadata["annotations"][COMPLETIONS_EQUAL_PARALLELISM] = "true"
    pod = pod_template(
        job, platform, args=launcher_args(job), command=command, subdomain=elastic_service(job)
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "completionMode": "Indexed",
            "completions": job.nodes.max,
            "parallelism": job.nodes.max,
            # Kueue admits the whole job (all its GPUs) or none of it, then unsuspends it.
            "suspend": True,
            "backoffLimit": job.max_restarts,
            "podFailurePolicy": pod_failure_policy(),
            "template": pod,
        },
    }
