"""A small simulator of what the Kubernetes Job controller and the JobSet controller decide when pods of a
training job fail, evaluated on the manifests the job builder produces.

It follows the upstream code it names, closely enough for the exit contract and no further:
- Job controller (kubernetes pkg/controller/job/pod_failure_policy.go, 1.33): for a failed pod, the
  podFailurePolicy rules in order, the first match wins; `onExitCodes` matches a terminated container with
  a non-zero code (containerName when set), `onPodConditions` a condition of that type and status.
  FailJob fails the Job at once with reason PodFailurePolicy and the message formatted there; Ignore does
  not count the pod; anything else counts, and more counted failures than backoffLimit fail the Job with
  reason BackoffLimitExceeded.
- JobSet controller (jobset v0.12.0 pkg/controllers/failure_policy.go): the failurePolicy rules in order,
  the first rule that matches a failed child Job wins (reasons, RE2 message patterns searched in the Job's
  Failed condition message, targetReplicatedJobs); no rule matches: RestartJobSet. RestartJobSet fails the
  JobSet with ReachedMaxRestarts once `restartsCountTowardsMax >= maxRestarts`, else restarts all and
  counts; RestartJobSetAndIgnoreMaxRestarts restarts all without counting; FailJobSet fails it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PodOutcome:
    """A pod of the child Job: its trainer container's exit code (None: still running) and its pod
    conditions that are True (e.g. DisruptionTarget, set by Kubernetes on an eviction or preemption)."""

    name: str
    exit_code: int | None
    conditions: tuple[str, ...] = ()
    container: str = "trainer"


def _rule_matches(rule: Mapping[str, Any], pod: PodOutcome) -> bool:
    if "onExitCodes" in rule:
        req = rule["onExitCodes"]
        if pod.exit_code in (None, 0) or req.get("containerName", pod.container) != pod.container:
            return False
        inside = pod.exit_code in req["values"]
        return inside if req["operator"] == "In" else not inside
    patterns = rule.get("onPodConditions", [])
    return any(p["type"] in pod.conditions and p.get("status", "True") == "True" for p in patterns)


def _message(rule: Mapping[str, Any], index: int, pod: PodOutcome, namespace: str) -> str:
    if "onExitCodes" in rule:
        return (
            f"Container {pod.container} for pod {namespace}/{pod.name} failed with exit code "
            f"{pod.exit_code} matching FailJob rule at index {index}"
        )
    cond = next(p["type"] for p in rule["onPodConditions"] if p["type"] in pod.conditions)
    return f"Pod {namespace}/{pod.name} has condition {cond} matching FailJob rule at index {index}"


def job_failure(
    job_spec: Mapping[str, Any], pods: Sequence[PodOutcome], namespace: str = "team"
) -> tuple[str, str] | None:
    """(reason, message) of the child Job's Failed condition, or None while it has not failed. Pods are
    given in the order they failed."""
    rules = (job_spec.get("podFailurePolicy") or {}).get("rules", [])
    counted = 0
    for pod in pods:
        if pod.exit_code in (None, 0):
            continue
        action = "Count"
        for index, rule in enumerate(rules):
            if _rule_matches(rule, pod):
                action = rule["action"]
                if action == "FailJob":
                    return "PodFailurePolicy", _message(rule, index, pod, namespace)
                break
        if action == "Ignore":
            continue
        counted += 1
        if counted > job_spec.get("backoffLimit", 6):
            return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    return None


def jobset_rule(
    failure_policy: Mapping[str, Any], reason: str, message: str, replicated_job: str
) -> tuple[str, str]:
    """(rule name, action) the JobSet controller applies to a child Job that failed so."""
    for i, rule in enumerate(failure_policy.get("rules", [])):
        reasons = rule.get("onJobFailureReasons") or []
        patterns = rule.get("onJobFailureMessagePatterns") or []
        targets = rule.get("targetReplicatedJobs") or []
        if reasons and reason not in reasons:
            continue
        # Go regexp.MatchString: unanchored search, like re.search (the patterns use no RE2-only syntax).
        if patterns and not any(re.search(p, message) for p in patterns):
            continue
        if targets and replicated_job not in targets:
            continue
        return rule.get("name", f"failurePolicyRule{i}"), rule["action"]
    return "<default>", "RestartJobSet"


@dataclass
class JobSetState:
    """The JobSet status fields the failure policy moves."""

    max_restarts: int
    restarts: int = 0
    restarts_count_towards_max: int = 0
    failed_reason: str | None = None
    history: list[str] = field(default_factory=list)

    def apply(self, action: str) -> None:
        self.history.append(action)
        if action == "FailJobSet":
            self.failed_reason = "FailJobSetAction"
        elif action == "RestartJobSetAndIgnoreMaxRestarts":
            self.restarts += 1
        elif self.restarts_count_towards_max >= self.max_restarts:
            self.failed_reason = "ReachedMaxRestarts"
        else:
            self.restarts += 1
            self.restarts_count_towards_max += 1


def run_attempt(jobset: Mapping[str, Any], pods: Sequence[PodOutcome], state: JobSetState) -> str | None:
    """One attempt of the JobSet's only replicated job ending with `pods`: the action taken, if any."""
    (rj,) = jobset["spec"]["replicatedJobs"]
    failure = job_failure(rj["template"]["spec"], pods, jobset["metadata"]["namespace"])
    if failure is None:
        return None
    _, action = jobset_rule(jobset["spec"]["failurePolicy"], *failure, rj["name"])
    state.apply(action)
    return action
