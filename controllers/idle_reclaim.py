"""Idle reclaim's decisions (issue 20 point 3), without I/O: given the firing idle alerts, a team namespace's
jobs (JobSets and top-level batch/v1 Jobs), their Kueue Workloads and pods, and the team's policy -> the Events
and Workload patches to send. idle_round.py lists the objects and sends what this returns; the GPU health
controller runs it every round. Standard library only: the library imports it too (controllers/__init__.py).

What Kueue does with it (kueue v0.19.2):
- the Workload of a job is created by the job's reconciler with a controller ownerReference to the job
  (pkg/controller/jobframework/reconciler.go ConstructWorkload: ctrl.SetControllerReference) and named
  `<kind>-<job>-<hash>` (workload_names.go GetWorkloadNameForOwnerWithGVK), so it is found by the owner's uid;
- `spec.active: false` evicts an admitted Workload with reason Deactivated (apis/kueue/v1beta2/workload_types.go
  WorkloadDeactivated; pkg/controller/core/workload_controller.go), the job reconciler then stops the job
  (reconciler.go "handle eviction": stopJob, StopReasonWorkloadEvicted; pkg/controller/jobs/jobset
  Suspend sets spec.suspend): the JobSet suspends its child Jobs (jobset v0.12.0 pkg/controllers/
  jobset_controller.go suspendJobs) and the Job controller terminates their running pods with SIGTERM and
  their grace period (Kubernetes blog "Introducing Suspended Jobs"; docs "Termination of Pods": SIGTERM,
  KILL after the grace period), so the trainer checkpoints (the preemption path;
  tests/integration/controllers/test_idle_reclaim.py);
- `spec.active: true` again sets Requeued=True reason Reactivated (workload_controller.go) and the Workload
  queues again. It is NOT queued behind what was waiting: its queue order is its creation time
  (pkg/workload/workload.go Ordering.GetQueueOrderTimestamp: only PodsReady-timeout and admission-check
  evictions take the eviction time), so reactivated at once it could take the GPUs straight back. Hence the
  hold (idle_hold.py): it stays inactive while Workloads are pending in its ClusterQueue or in a cohort peer
  that may borrow from it, and re-enters its queue once none is (nobody else wanted the GPUs).

Rules:
- an alert row (ALERTS{alertname=IDLE_ALERT, alertstate="firing"}) names namespace and job; only namespaces of
  teams with an idle policy count; a row for a job not found is ignored (it finished meanwhile);
- exempt (IDLE_EXEMPT_LABEL "true" or any of the team's exemptLabels): GpuIdleExempt once per episode, nothing
  else (the alert excludes exempt jobs through IDLE_EXEMPT_METRIC; this is the guard for a stale series);
- otherwise GpuIdle once per episode (an episode: the alert firing for that job without a gap seen by the
  controller); with `requeue`, also the Workload deactivated (spec.active=false, IDLE_REQUEUED_AT_ANNOTATION)
  and GpuIdleRequeued, unless the Workload is already inactive (an administrator's: left alone) or has no
  Workload (not queued by Kueue: said in the GpuIdle message);
- a job idle since its pods started (idle_startup.py) is requeued so once: its Workload keeps a mark, and later
  start-up idle episodes get GpuIdle only;
- a Workload we annotated, still inactive, whose job has no pod left that is not terminated -> held while
  Workloads are pending for its quota (above; GpuIdleHeld once per hold, Normal), else active again, the
  annotation removed, GpuIdleReactivated; a Workload someone else reactivated loses our annotation
  silently. A Workload without our annotation is never reactivated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contract.idle import (
    EVENT_IDLE,
    EVENT_IDLE_EXEMPT,
    EVENT_IDLE_HELD,
    EVENT_IDLE_REACTIVATED,
    EVENT_IDLE_REQUEUED,
    IDLE_ALERT,
    IDLE_EXEMPT_LABEL,
    IDLE_REQUEUED_AT_ANNOTATION,
    IDLE_STARTUP_ANNOTATION,
)
from controllers.idle_hold import Queues, waiting_for
from controllers.idle_startup import idle_since_start

IDLE_QUERY = f'ALERTS{{alertname="{IDLE_ALERT}",alertstate="firing"}}'
JOBSET_API = "jobset.x-k8s.io/v1alpha2"  # components/incluster/job_runtime.py JOBSET_API
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
# The label each kind's controller puts on its pods: jobset v0.12.0 api/jobset/v1alpha2 JobSetNameKey;
# kubernetes v1.33 pkg/apis/batch/types.go JobNameLabel (batch.kubernetes.io/job-name, since 1.27).
POD_JOB_LABEL = {"JobSet": "jobset.sigs.k8s.io/jobset-name", "Job": "batch.kubernetes.io/job-name"}
TERMINATED_PHASES = ("Succeeded", "Failed")
# Warning where something is wrong or was done to the job; Normal for the notes (contract/idle.py).
WARNING_EVENTS = (EVENT_IDLE, EVENT_IDLE_REQUEUED)


@dataclass(frozen=True)
class TeamPolicy:
    team: str
    namespace: str
    action: str  # alert | requeue
    exempt_labels: Mapping[str, str] = field(default_factory=dict)
    window_s: int = (
        0  # the alert's window (`forMinutes`), for start-up idleness (idle_startup.py); 0: unknown
    )

    @staticmethod
    def from_config(config: Mapping[str, Any]) -> dict[str, TeamPolicy]:
        """The controller config's `idle.teams` (gpu_health.controller_config) by namespace."""
        teams = (config.get("idle") or {}).get("teams") or []
        return {
            t["namespace"]: TeamPolicy(
                t["team"],
                t["namespace"],
                t["action"],
                dict(t.get("exemptLabels") or {}),
                int(t.get("forMinutes") or 0) * 60,
            )
            for t in teams
        }


@dataclass(frozen=True)
class Action:
    """An Event on `target` (reason set) or a JSON patch of the Workload `target` (patch set). Actions of one
    `group` (namespace/job) come patch first: when the patch fails, the caller drops the rest of the group and
    forgets the episode, so the next round decides again."""

    target: Mapping[str, Any]
    reason: str = ""
    message: str = ""
    patch: tuple[dict[str, Any], ...] = ()
    group: tuple[str, str] = ("", "")


def ref(obj: Mapping[str, Any]) -> dict[str, str]:
    """The object's reference for an Event's involvedObject (and the patch's path)."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }


def top_level(job: Mapping[str, Any]) -> bool:
    """A JobSet, or a batch/v1 Job no JobSet owns (a JobSet's child Jobs are part of their JobSet)."""
    owners = (job.get("metadata") or {}).get("ownerReferences") or []
    return job.get("kind") == "JobSet" or not any(o.get("kind") == "JobSet" for o in owners)


def is_exempt(job: Mapping[str, Any], policy: TeamPolicy) -> bool:
    labels = (job.get("metadata") or {}).get("labels") or {}
    if labels.get(IDLE_EXEMPT_LABEL) == "true":
        return True
    return any(labels.get(k) == v for k, v in policy.exempt_labels.items())


def exempt_jobs(
    jobs: Iterable[Mapping[str, Any]], policies: Mapping[str, TeamPolicy]
) -> list[tuple[str, str]]:
    """(namespace, job) of every exempt top-level job in a team namespace with an idle policy: the
    IDLE_EXEMPT_METRIC series the alert excludes."""
    out = set()
    for job in jobs:
        meta = job.get("metadata") or {}
        policy = policies.get(meta.get("namespace", ""))
        if policy is not None and top_level(job) and is_exempt(job, policy):
            out.add((meta["namespace"], meta["name"]))
    return sorted(out)


def workload_of(job: Mapping[str, Any], workloads: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The Workload whose controller ownerReference is the job (by uid)."""
    uid = (job.get("metadata") or {}).get("uid")
    for wl in workloads:
        for owner in (wl.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("uid") == uid and owner.get("controller"):
                return wl
    return None


def active(wl: Mapping[str, Any]) -> bool:
    # spec.active defaults to true (workload_types.go `+kubebuilder:default=true`).
    return (wl.get("spec") or {}).get("active", True) is not False


def ours(wl: Mapping[str, Any]) -> bool:
    return IDLE_REQUEUED_AT_ANNOTATION in ((wl.get("metadata") or {}).get("annotations") or {})


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def deactivate_patch(wl: Mapping[str, Any], now: str, startup: bool = False) -> tuple[dict[str, Any], ...]:
    """JSON patch: guarded by the resourceVersion (a Workload changed meanwhile is decided again next round);
    `startup`: also the start-up mark (idle_startup.py)."""
    meta = wl.get("metadata") or {}
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}
    ]
    marks = {IDLE_REQUEUED_AT_ANNOTATION: now, **({IDLE_STARTUP_ANNOTATION: now} if startup else {})}
    if meta.get("annotations"):
        ops += [
            {"op": "add", "path": f"/metadata/annotations/{_pointer(k)}", "value": v}
            for k, v in marks.items()
        ]
    else:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": marks})
    ops.append({"op": "add", "path": "/spec/active", "value": False})
    return tuple(ops)


def reactivate_patch(wl: Mapping[str, Any], *, activate: bool = True) -> tuple[dict[str, Any], ...]:
    meta = wl.get("metadata") or {}
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
        {"op": "remove", "path": f"/metadata/annotations/{_pointer(IDLE_REQUEUED_AT_ANNOTATION)}"},
    ]
    if activate:
        ops.append({"op": "add", "path": "/spec/active", "value": True})
    return tuple(ops)


def firing(
    alerts: Iterable[Mapping[str, Any]], policies: Mapping[str, TeamPolicy]
) -> dict[tuple[str, str], str]:
    """(namespace, job) -> the alert's team label, for the firing idle alerts of teams with a policy."""
    out = {}
    for row in alerts:
        labels = row.get("metric") or row.get("labels") or {}
        if labels.get("alertname") != IDLE_ALERT or labels.get("alertstate", "firing") != "firing":
            continue
        ns, job = labels.get("namespace", ""), labels.get("job", "")
        if ns in policies and job:
            out[(ns, job)] = labels.get("team", policies[ns].team)
    return out


def job_pods(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The job's pods that have not terminated (a pod being deleted still runs its grace period)."""
    key = POD_JOB_LABEL.get(str(job.get("kind")), "")
    name = (job.get("metadata") or {}).get("name")
    return [
        p
        for p in pods
        if ((p.get("metadata") or {}).get("labels") or {}).get(key) == name
        and (p.get("status") or {}).get("phase") not in TERMINATED_PHASES
    ]


def live_pods(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in job_pods(job, pods))


@dataclass
class Decision:
    actions: list[Action]
    # The (namespace, job) idle episodes announced, to pass back next round.
    announced: set[tuple[str, str]]
    # The (namespace, Workload) held (GpuIdleHeld posted), to pass back next round.
    held: set[tuple[str, str]] = field(default_factory=set)


def _on_idle(
    key: tuple[str, str], job: Mapping[str, Any], workloads: list, pods: list, policy: TeamPolicy, now: str
) -> list[Action]:
    """What a new idle episode of `job` (`key`: namespace, name) gets."""
    what = f"GPUs of {key[0]}/{key[1]} below team {policy.team}'s idle threshold for its window"
    if is_exempt(job, policy):
        return [Action(ref(job), EVENT_IDLE_EXEMPT, f"{what}; exempt, left running")]
    wl = workload_of(job, workloads)
    if wl is not None and ours(wl):
        return []  # our requeue is under way (announced before a controller restart)
    if policy.action != "requeue":
        return [Action(ref(job), EVENT_IDLE, f"{what} (action: alert)")]
    if wl is None:
        return [Action(ref(job), EVENT_IDLE, f"{what}; no Kueue Workload owns it, not requeued")]
    if not active(wl):
        return [Action(ref(job), EVENT_IDLE, f"{what}; its Workload is already inactive, left as is")]
    return _requeue(key, job, wl, job_pods(job, pods), policy, now, what)


def _requeue(
    key: tuple[str, str],
    job: Mapping[str, Any],
    wl: Mapping[str, Any],
    pods: list,
    policy: TeamPolicy,
    now: str,
    what: str,
) -> list[Action]:
    """An active Workload of a `requeue` team's idle job deactivated, unless the job is idle since its pods
    started and was requeued in start-up before (idle_startup.py): then the Event only."""
    up = idle_since_start(pods, policy.window_s, now)
    startup = "" if up is None else f"; idle since its pods started {up // 60}m ago"
    if up is not None and IDLE_STARTUP_ANNOTATION in (wl["metadata"].get("annotations") or {}):
        why = "as when it was requeued in its start-up before: its start-up outlasts the window"
        return [Action(ref(job), EVENT_IDLE, f"{what}{startup}, {why}; left to start, not requeued again")]
    return [
        Action(ref(wl), patch=deactivate_patch(wl, now, startup=up is not None), group=key),
        Action(ref(job), EVENT_IDLE, f"{what}{startup}; requeueing it", group=key),
        Action(
            ref(job),
            EVENT_IDLE_REQUEUED,
            f"Workload {wl['metadata']['name']} deactivated{startup}: Kueue suspends the job, its pods get "
            "SIGTERM and checkpoint; it is reactivated once they are gone and no other Workload waits for its GPUs",
            group=key,
        ),
    ]


def _back(
    wl: Mapping[str, Any], owner: Mapping[str, Any], queues: Queues | None, held: set[tuple[str, str]]
) -> tuple[list[Action], bool]:
    """Our inactive Workload `wl` whose job `owner` has no pod left: reactivated, or held (the actions, and
    whether it is held now)."""
    key = (owner["metadata"]["namespace"], owner["metadata"]["name"])
    name = wl["metadata"]["name"]
    if queues is None:  # not known whether anyone waits: keep holding, decide again next round
        return [], (key[0], name) in held
    waiting = waiting_for(wl, queues)
    if waiting:
        if (key[0], name) in held:
            return [], True
        message = (
            f"its pods are gone; Workload {name} kept inactive while other Workloads wait for the GPUs it gave "
            f"back: {', '.join(waiting)}; it re-enters its queue once none is pending"
        )
        return [Action(ref(owner), EVENT_IDLE_HELD, message)], True
    return [
        Action(ref(wl), patch=reactivate_patch(wl), group=key),
        Action(
            ref(owner),
            EVENT_IDLE_REACTIVATED,
            f"its pods are gone: Workload {name} active again, queued in its LocalQueue",
            group=key,
        ),
    ], False


def decide(
    alerts: Iterable[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
    workloads: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    policies: Mapping[str, TeamPolicy],
    previous: Decision,
    now: str,
    *,
    queues: Queues | None,
) -> Decision:
    """One round. `previous`: the last round's Decision (its episodes and holds; actions unused); `now`:
    RFC 3339; `queues`: None when they could not be listed (the held stay held this round)."""
    jobs = [j for j in jobs if top_level(j) and (j.get("metadata") or {}).get("namespace") in policies]
    workloads, pods = list(workloads), list(pods)
    by_key = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in jobs}
    idle = firing(alerts, policies)
    actions: list[Action] = []
    # An episode ends when its alert stops firing (or its job is gone): the next one is announced again.
    still = {k for k in previous.announced if k in idle and k in by_key}
    for key in sorted(idle):
        if key in by_key and key not in still:
            still.add(key)
            actions += _on_idle(key, by_key[key], workloads, pods, policies[key[0]], now)
    by_uid = {j["metadata"].get("uid"): j for j in jobs}
    held: set[tuple[str, str]] = set()
    for wl in workloads:
        if not ours(wl) or (wl.get("metadata") or {}).get("namespace") not in policies:
            continue
        if active(wl):  # someone reactivated it: our mark goes, nothing else
            actions.append(Action(ref(wl), patch=reactivate_patch(wl, activate=False)))
            continue
        owner = next(
            (
                by_uid[o.get("uid")]
                for o in wl["metadata"].get("ownerReferences") or []
                if o.get("uid") in by_uid
            ),
            None,
        )
        if owner is None or live_pods(owner, pods):
            continue
        done, holding = _back(wl, owner, queues, previous.held)
        actions += done
        if holding:
            held.add((owner["metadata"]["namespace"], wl["metadata"]["name"]))
    return Decision(actions, still, held)
