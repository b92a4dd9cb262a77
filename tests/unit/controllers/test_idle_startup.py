"""Idle reclaim and a job whose start-up outlasts its team's window (issue 30, minor; idle_startup.py): the
alert cannot tell a start-up from idleness, so such a job was requeued at the end of every start-up, reactivated
once its pods were gone, started again and requeued again, never training. Now it is requeued once in start-up;
its Workload keeps the mark, and later start-ups are left to finish."""

from __future__ import annotations

import datetime

from contract.idle import (
    EVENT_IDLE,
    EVENT_IDLE_REACTIVATED,
    EVENT_IDLE_REQUEUED,
    IDLE_REQUEUED_AT_ANNOTATION,
    IDLE_STARTUP_ANNOTATION,
)
from controllers import idle_reclaim as R
from tests.helpers.fake_kube import json_patch
from tests.helpers.idle_objects import alert, jobset, workload

# team-a requeues after 30 minutes idle, as the controller config says (gpu_health_controller.idle_config).
POLICIES = R.TeamPolicy.from_config(
    {"idle": {"teams": [{"team": "a", "namespace": "team-a", "action": "requeue", "forMinutes": 30}]}}
)
T0 = datetime.datetime(2026, 11, 26, 5, 0, tzinfo=datetime.UTC)


def at(minute: float) -> str:
    return (T0 + datetime.timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")


def started_pod(job, name, minute):
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": {"jobset.sigs.k8s.io/jobset-name": job["metadata"]["name"]},
        },
        "status": {"phase": "Running", "startTime": at(minute)},
    }


class Cluster:
    """The controller's rounds on one job, with Kueue's part played: a deactivated Workload's pods go."""

    def __init__(self, job):
        self.job, self.wl = job, workload(job)
        self.previous = R.Decision([], set(), set())
        self.patches: list[tuple[str, tuple]] = []
        self.events: list[tuple[str, str]] = []

    def round(self, minute: float, pods: list, idle: bool) -> None:
        now = at(minute)
        alerts = [alert(self.job["metadata"]["name"])] if idle else []
        d = R.decide(alerts, [self.job], [self.wl], pods, POLICIES, self.previous, now, queues=R.Queues())
        self.previous = d
        for a in d.actions:
            if a.patch:
                self.wl = json_patch(self.wl, list(a.patch))
                self.patches.append((now, a.patch))
            else:
                self.events.append((a.reason, a.message))

    def reasons(self) -> list[str]:
        return [r for r, _ in self.events]


def test_a_job_whose_start_up_outlasts_the_window_is_requeued_once_not_at_every_start():
    """Each start-up takes 45 minutes, idle all along (the window is 30). The first one is requeued (a job
    stuck from its start gives its GPUs back once); the job is reactivated, starts again, and this time it is
    left to finish its start-up: one requeue, not one per start-up."""
    job = jobset("slow-start")
    c = Cluster(job)
    start = 0.0
    for _ in range(3):  # three start-ups
        pods = [
            started_pod(job, "slow-start-workers-0-0", start),
            started_pod(job, "slow-start-workers-0-1", start),
        ]
        c.round(start + 10, pods, idle=False)  # pending: below the threshold for less than the window
        c.round(start + 31, pods, idle=True)  # the alert fires one minute after the window
        if R.active(c.wl):
            # Left to start: it trains from minute 45, the alert resolves.
            c.round(start + 46, pods, idle=False)
            start += 120  # it finishes, or is preempted and admitted again later: a new start-up
        else:
            # Kueue suspends it, its pods go, the alert resolves; the controller reactivates it (nobody
            # waits) and Kueue admits it again: a new start-up.
            c.round(start + 33, [], idle=False)
            assert R.active(c.wl), c.wl
            start += 35

    deactivations = [p for _, p in c.patches if {"op": "add", "path": "/spec/active", "value": False} in p]
    assert len(deactivations) == 1, c.patches
    assert c.reasons().count(EVENT_IDLE_REQUEUED) == 1 and EVENT_IDLE_REACTIVATED in c.reasons()
    left = [m for r, m in c.events if r == EVENT_IDLE and "not requeued again" in m]
    assert len(left) == 2, c.events
    assert "idle since its pods started 31m ago" in left[0]
    # The mark stays on the Workload through its reactivation; our requeue's own annotation is gone.
    annotations = c.wl["metadata"]["annotations"]
    assert IDLE_STARTUP_ANNOTATION in annotations and IDLE_REQUEUED_AT_ANNOTATION not in annotations


def test_a_marked_job_idle_after_it_was_busy_is_requeued():
    """The mark spares start-ups only: a job that trained, then sat idle for the window, is requeued."""
    job = jobset("slow-start")
    c = Cluster(job)
    c.wl["metadata"]["annotations"] = {IDLE_STARTUP_ANNOTATION: at(-600)}
    pods = [started_pod(job, "slow-start-workers-0-0", 0)]
    c.round(180, pods, idle=True)  # running for 3 hours, idle for the last 30 minutes
    assert c.reasons() == [EVENT_IDLE, EVENT_IDLE_REQUEUED] and R.active(c.wl) is False


def test_a_first_start_up_idle_episode_requeues_and_marks_the_workload():
    job = jobset("stuck")
    c = Cluster(job)
    c.round(31, [started_pod(job, "stuck-workers-0-0", 0)], idle=True)
    assert R.active(c.wl) is False
    assert set(c.wl["metadata"]["annotations"]) == {IDLE_REQUEUED_AT_ANNOTATION, IDLE_STARTUP_ANNOTATION}
    assert any("idle since its pods started" in m for r, m in c.events if r == EVENT_IDLE_REQUEUED)


def test_the_policy_reads_the_window_from_the_controller_config():
    assert POLICIES["team-a"].window_s == 30 * 60
