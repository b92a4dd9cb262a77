"""A training job's day on a cluster, for `trainplane status`: the JobSet `research/gpt-small` (2 nodes x 8
GPUs) that Kueue admitted, preempted and re-admitted, and that restarted three times: a GPU node
quarantined (its pods evicted, the pods gone), a hang (rank 0 exited 124, its peer 75; the pods still
listed) and a spot preemption (both exited 143 after a checkpoint). Plain API JSON, as the API server
serves it, and `StatusCluster`, the routes of the fake API server (tests/helpers/fake_k8s.py) that serve
it together with Prometheus' query_range of the job's step series.

Step series: 10 steps a minute while training, sampled every minute; checkpoints every 50 steps.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from components.incluster.job_pod import CONTAINER
from components.incluster.names import JOB_LABEL
from contract.recovery import (
    CONTROLLER_NAME,
    EVENT_EVICTED,
    EVENT_QUARANTINED,
    QUARANTINE_CONDITION,
)
from infra.status.api import JobState
from tests.helpers.fake_k8s import FakeApiServer, Request

NAMESPACE, JOB = "research", "gpt-small"
WORKLOAD = "jobset-gpt-small-5d8f2"
DAY = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
BAD_NODE, NODES = "gpu-node-a", ("gpu-node-b", "gpu-node-c", "gpu-node-d")


def at(minutes: float) -> str:
    return (DAY + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def unix(minutes: float) -> float:
    return (DAY + timedelta(minutes=minutes)).timestamp()


def jobset(restarts: int = 3, counted: int = 1) -> dict[str, Any]:
    container = {"name": CONTAINER, "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": JOB, "namespace": NAMESPACE, "uid": "js-uid", "creationTimestamp": at(0)},
        "spec": {
            "failurePolicy": {"maxRestarts": 20},
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {"spec": {"containers": [container]}},
                        }
                    },
                }
            ],
        },
        "status": {
            "restarts": restarts,
            "restartsCountTowardsMax": counted,
            "conditions": [
                {
                    "type": "RestartingJobSet",
                    "status": "False",
                    "reason": "JobsReady",
                    "message": "all jobs are ready",
                    "lastTransitionTime": at(184),
                }
            ],
        },
    }


def _cond(kind: str, status: str, minutes: float, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": at(minutes),
        "reason": reason,
        "message": message,
    }


def workload() -> dict[str, Any]:
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": JOB, "uid": "js-uid"}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": WORKLOAD, "namespace": NAMESPACE, "ownerReferences": [owner]},
        "status": {
            "conditions": [
                _cond(
                    "QuotaReserved", "True", 35, "QuotaReserved", "Quota reserved in ClusterQueue research"
                ),
                _cond("Admitted", "True", 35, "Admitted", "The workload is admitted"),
                _cond("PodsReady", "True", 36, "PodsReady", "All pods reached readiness"),
                _cond(
                    "Evicted", "False", 35, "QuotaReserved", "Previously: Preempted to accommodate a workload"
                ),
                _cond("Requeued", "True", 31, "BackoffFinished", "The workload backoff was finished"),
            ]
        },
    }


def _event(
    kind: str, name: str, reason: str, minutes: float, message: str = "", count: int = 1, **kw
) -> dict:
    first = kw.pop("first", minutes)
    return {
        "metadata": {
            "name": f"{name}.{reason.lower()}.{int(minutes)}",
            "namespace": kw.pop("namespace", NAMESPACE),
        },
        "involvedObject": {"kind": kind, "name": name, "namespace": NAMESPACE},
        "reason": reason,
        "message": message,
        "type": kw.pop("type", "Normal"),
        "count": count,
        "firstTimestamp": at(first),
        "lastTimestamp": at(minutes),
    }


def events() -> list[dict[str, Any]]:
    first = "(first failed job: gpt-small-workers-0)"
    return [
        _event(
            "Workload",
            WORKLOAD,
            "QuotaReserved",
            0.1,
            "Quota reserved in ClusterQueue research, wait time 5s",
        ),
        _event("Workload", WORKLOAD, "Admitted", 0.1, "Admitted by ClusterQueue research"),
        _event(
            "Workload", WORKLOAD, "EvictedDueToPreempted", 30, "Preempted to accommodate a workload (UID: x)"
        ),
        _event(
            "Workload", WORKLOAD, "QuotaReserved", 35, "Quota reserved in ClusterQueue research, wait time 4m"
        ),
        _event("Workload", WORKLOAD, "Admitted", 35, "Admitted by ClusterQueue research"),
        # Restart 1: the GPU health controller quarantines gpu-node-a (XID 79) and evicts its GPU pods.
        _event("Node", BAD_NODE, EVENT_QUARANTINED, 59.5, "Xid79: GPU fell off the bus", namespace="default"),
        _event("Pod", f"{JOB}-workers-0-0-abcde", EVENT_EVICTED, 59.7, f"{BAD_NODE} quarantined (Xid79)"),
        _event("JobSet", JOB, "FailurePolicy_PreemptionRestartsUncounted", 60, f"applying ... {first}"),
        # Restarts 1 and 3 (uncounted) folded into one Event by the API server; restart 2 counted.
        _event(
            "JobSet",
            JOB,
            "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
            180,
            f"applying RestartJobSetAndIgnoreMaxRestarts failure policy action {first}",
            count=2,
            first=60,
            type="Warning",
        ),
        _event("JobSet", JOB, "FailurePolicy_OtherFailureRestartsCounted", 120, f"applying ... {first}"),
        _event("JobSet", JOB, "RestartJobSetFailurePolicyAction", 120, f"applying RestartJobSet ... {first}"),
        _event("JobSet", JOB, "FailurePolicy_PreemptionRestartsUncounted", 180, f"applying ... {first}"),
        # Not this job's: another job's pod, and a node none of its pods ran on.
        _event("Pod", "other-job-workers-0-0-zzzzz", EVENT_EVICTED, 119, "gpu-node-z quarantined"),
    ]


def _pod(index: int, attempt: int, node: str, exit_code: int | None, finished: float | None = None) -> dict:
    state = (
        {"terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": at(finished or 0)}}
        if exit_code is not None
        else {"running": {"startedAt": at(184)}}
    )
    return {
        "metadata": {
            "name": f"{JOB}-workers-0-{index}-a{attempt}x{index}",
            "namespace": NAMESPACE,
            "labels": {JOB_LABEL: JOB, "jobset.sigs.k8s.io/restart-attempt": str(attempt)},
        },
        "spec": {"nodeName": node, "containers": [{"name": CONTAINER, "image": "trainer:1"}]},
        "status": {
            "phase": "Failed" if exit_code else "Running",
            "containerStatuses": [
                {
                    "name": CONTAINER,
                    "image": "trainer:1",
                    "imageID": "sha256:1",
                    "ready": exit_code is None,
                    "restartCount": 0,
                    "state": state,
                }
            ],
        },
    }


def pods() -> list[dict[str, Any]]:
    b, c, d = NODES
    return [
        _pod(0, 1, b, 124, 119.9),  # restart 2: rank 0's watchdog saw no step (hang) ...
        _pod(1, 1, c, 75, 119.9),  # ... and its peer lost it
        _pod(0, 2, b, 143, 179.9),  # restart 3: a spot preemption, both checkpointed first
        _pod(1, 2, c, 143, 179.9),
        _pod(0, 3, b, None),
        _pod(1, 3, d, None),
    ]


def nodes() -> dict[str, dict[str, Any]]:
    quarantined = {
        "metadata": {"name": BAD_NODE, "annotations": {"trainplane.dev/cordoned-by": CONTROLLER_NAME}},
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [_cond(QUARANTINE_CONDITION, "True", 59.5, "Xid79", "GPU fell off the bus")]
        },
    }
    healthy = [{"metadata": {"name": n}, "status": {"conditions": []}} for n in NODES]
    return {n["metadata"]["name"]: n for n in [quarantined, *healthy]}


# (from minute, to minute, step at the start) of each stretch of training; 10 steps a minute.
STRETCHES = (
    (2, 30, 0),  # admitted at 0, pods ready at 2; Kueue preempts at 30 (step 280; checkpoint 250)
    (36, 60, 250),  # re-admitted at 35; node fault at 60 (step 490; checkpoint 450)
    (65, 110, 450),  # restart 1 resumed at 65; rank 0 hangs from 110 (step 900) until the watchdog at 120
    (124, 180, 850),  # restart 2 resumed from 850, its last checkpoint; preempted at 180 (step 1410)
    (184, 240, 1410),  # restart 3 resumed from its preemption checkpoint: nothing redone
)


def step_series() -> list[tuple[float, float]]:
    samples: list[tuple[float, float]] = []
    for start, end, step in STRETCHES:
        samples += [(unix(m), float(step + 10 * (m - start))) for m in range(start, end + 1)]
    # The hang: the step stays where it stopped while the watchdog waits (the process still exports it).
    samples += [(unix(m), 900.0) for m in range(111, 120)]
    return sorted(samples)


def job_state() -> JobState:
    return JobState(NAMESPACE, JOB, "JobSet", jobset(), [workload()], pods(), nodes(), events())


class StatusCluster:
    """Routes of the fake API server: the job's objects (read-only) and Prometheus' query_range."""

    def __init__(self, state: JobState | None = None, steps: list[tuple[float, float]] | None = None):
        self.state = copy.deepcopy(state or job_state())
        self.steps = step_series() if steps is None else steps
        self.queries: list[str] = []
        self.forbidden: set[str] = set()  # paths answered 403 (a user whose Role does not cover them)
        self.server = FakeApiServer(self)
        self.url = self.server.url

    def get(self, req: Request) -> tuple[int, Any]:
        if req.path == "/api/v1/query_range":
            return self._query_range(req)
        if req.path in self.forbidden or any(
            p.endswith("*") and req.path.startswith(p[:-1]) for p in self.forbidden
        ):
            return 403, {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403}
        if req.path == "/api/v1/events":
            return 200, {"items": self._node_events(req)}
        s, ns = self.state, f"/namespaces/{self.state.namespace}"
        objects = {
            f"/api/v1/namespaces/{s.namespace}": {"metadata": {"name": s.namespace}},
            f"/apis/jobset.x-k8s.io/v1alpha2{ns}/jobsets/{s.name}": s.object if s.kind == "JobSet" else None,
            f"/apis/batch/v1{ns}/jobs/{s.name}": s.object if s.kind == "Job" else None,
            f"/apis/kueue.x-k8s.io/v1beta2{ns}/workloads": {"items": s.workloads},
            f"/api/v1{ns}/pods": {"items": self._selected(req, s.pods)},
            f"/api/v1{ns}/events": {
                "items": [e for e in s.events if e["metadata"]["namespace"] == s.namespace]
            },
            **{f"/api/v1/nodes/{n}": node for n, node in s.nodes.items()},
        }
        found = objects.get(req.path)
        if found is None:
            return 404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
        return 200, found

    @staticmethod
    def _selected(req: Request, items: list[dict]) -> list[dict]:
        key, _, value = (req.query.get("labelSelector") or ["="])[0].partition("=")
        return [p for p in items if p["metadata"].get("labels", {}).get(key) == value]

    def _node_events(self, req: Request) -> list[dict]:
        assert req.query.get("fieldSelector") == ["involvedObject.kind=Node"]
        return [e for e in self.state.events if e["involvedObject"]["kind"] == "Node"]

    def _query_range(self, req: Request) -> tuple[int, Any]:
        query = req.query["query"][0]
        self.queries.append(query)
        label = f'namespace="{self.state.namespace}",job="{self.state.name}"'
        result = []
        if query == f"max(trainplane_step{{{label}}})" and self.steps:
            result = [{"metric": {}, "values": [[t, str(v)] for t, v in self.steps]}]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}

    def close(self) -> None:
        self.server.close()
