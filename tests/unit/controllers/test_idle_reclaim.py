"""Idle reclaim's decisions (controllers/idle_reclaim.py), each branch, and the round's sending
(idle_round.py) against a recording API; tests/integration/controllers/test_idle_reclaim.py runs them in the operator."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiException

from contract.idle import (
    EVENT_IDLE,
    EVENT_IDLE_EXEMPT,
    EVENT_IDLE_HELD,
    EVENT_IDLE_REACTIVATED,
    EVENT_IDLE_REQUEUED,
    IDLE_EXEMPT_LABEL,
    IDLE_REQUEUED_AT_ANNOTATION,
)
from controllers import idle_reclaim as R
from controllers.idle_round import IdleRound
from tests.helpers.fake_kube import json_patch
from tests.helpers.idle_objects import alert, jobset, pod, workload

NOW = "2026-11-26T05:00:00Z"
FAILED = object()  # run(queues=FAILED): the queue lists failed
POLICIES = {
    "team-a": R.TeamPolicy("a", "team-a", "requeue", {"tier": "interactive"}),
    "team-b": R.TeamPolicy("b", "team-b", "alert"),
}


def run(alerts, jobs, workloads=(), pods=(), announced=frozenset(), queues=None, held=frozenset()):
    """One decide(); `queues`: the listed queues (default: none listed), or FAILED."""
    previous = R.Decision([], set(announced), set(held))
    listed = None if queues is FAILED else queues or R.Queues()
    return R.decide(alerts, jobs, workloads, pods, POLICIES, previous, NOW, queues=listed)


def summary(decision):
    return [(a.reason or "PATCH", a.target["kind"], a.target["name"]) for a in decision.actions]


def test_alert_team_gets_one_event_per_episode():
    job = jobset("j", ns="team-b")
    first = run([alert("j", ns="team-b")], [job], [workload(job)])
    assert summary(first) == [(EVENT_IDLE, "JobSet", "j")]
    assert first.actions[0].target["apiVersion"] == R.JOBSET_API and first.actions[0].target["uid"] == "uid-j"
    # still firing: nothing more, however many rounds
    again = run([alert("j", ns="team-b")], [job], [workload(job)], announced=first.announced)
    assert again.actions == [] and again.announced == {("team-b", "j")}
    # the alert stopped: the episode ends; a new one is announced again
    gap = run([], [job], announced=again.announced)
    assert gap.actions == [] and gap.announced == set()
    assert summary(run([alert("j", ns="team-b")], [job], announced=gap.announced)) == [
        (EVENT_IDLE, "JobSet", "j")
    ]


@pytest.mark.parametrize(
    "labels", [{IDLE_EXEMPT_LABEL: "true"}, {"tier": "interactive"}], ids=["idle-exempt-label", "team-label"]
)
def test_exempt_job_gets_one_exempt_event_and_nothing_else(labels):
    job = jobset("j", labels=labels)
    d = run([alert("j")], [job], [workload(job)], [pod(job, "p")])
    assert summary(d) == [(EVENT_IDLE_EXEMPT, "JobSet", "j")]
    assert run([alert("j")], [job], [workload(job)], announced=d.announced).actions == []
    assert R.exempt_jobs([job], POLICIES) == [("team-a", "j")]


def test_labels_that_do_not_match_exactly_are_not_exempt():
    job = jobset("j", labels={IDLE_EXEMPT_LABEL: "false", "tier": "batch"})
    assert R.exempt_jobs([job], POLICIES) == []
    assert summary(run([alert("j")], [job]))[0][0] == EVENT_IDLE


def test_requeue_deactivates_the_workload_first_then_the_events():
    job = jobset("j")
    wl = workload(job)
    d = run([alert("j")], [job], [wl], [pod(job, "p")])
    assert summary(d) == [
        ("PATCH", "Workload", "jobset-j-abcde"),
        (EVENT_IDLE, "JobSet", "j"),
        (EVENT_IDLE_REQUEUED, "JobSet", "j"),
    ]
    assert {a.group for a in d.actions} == {("team-a", "j")}
    patched = json_patch(wl, list(d.actions[0].patch))
    assert patched["spec"]["active"] is False
    assert patched["metadata"]["annotations"] == {IDLE_REQUEUED_AT_ANNOTATION: NOW}
    # guarded: a Workload changed since it was listed is not patched
    assert (
        json_patch({**wl, "metadata": {**wl["metadata"], "resourceVersion": "8"}}, list(d.actions[0].patch))
        is None
    )
    # existing annotations are kept
    kept = workload(job, annotations={"x": "y"})
    after = json_patch(kept, list(run([alert("j")], [job], [kept]).actions[0].patch))
    assert after["metadata"]["annotations"] == {"x": "y", IDLE_REQUEUED_AT_ANNOTATION: NOW}


def test_requeue_without_a_workload_is_an_event_saying_so():
    job = jobset("j")
    d = run([alert("j")], [job], [workload(job, controller=False)])
    assert summary(d) == [(EVENT_IDLE, "JobSet", "j")] and "no Kueue Workload" in d.actions[0].message


def test_a_workload_someone_else_deactivated_is_left_alone():
    job = jobset("j")
    d = run([alert("j")], [job], [workload(job, active=False)])
    assert summary(d) == [(EVENT_IDLE, "JobSet", "j")] and "already inactive" in d.actions[0].message


def test_our_requeue_under_way_is_not_repeated_after_a_restart():
    job = jobset("j")
    wl = workload(job, active=False, annotations={IDLE_REQUEUED_AT_ANNOTATION: NOW})
    assert run([alert("j")], [job], [wl], [pod(job, "p")]).actions == []


def test_reactivated_once_the_jobs_pods_are_all_terminated():
    job = jobset("j")
    wl = workload(job, active=False, annotations={IDLE_REQUEUED_AT_ANNOTATION: NOW, "x": "y"})
    assert run([], [job], [wl], [pod(job, "p0", "Succeeded"), pod(job, "p1")]).actions == []
    for pods in ([], [pod(job, "p0", "Failed"), pod(job, "p1", "Succeeded")]):
        d = run([], [job], [wl], pods)
        assert summary(d) == [
            ("PATCH", "Workload", "jobset-j-abcde"),
            (EVENT_IDLE_REACTIVATED, "JobSet", "j"),
        ]
        after = json_patch(wl, list(d.actions[0].patch))
        assert after["spec"]["active"] is True and after["metadata"]["annotations"] == {"x": "y"}
    # another job's pods do not hold it
    assert summary(run([], [job], [wl], [pod(jobset("k"), "k0")]))[0][0] == "PATCH"


def test_a_workload_we_did_not_deactivate_is_never_reactivated():
    job = jobset("j")
    assert run([], [job], [workload(job, active=False)], []).actions == []
    # nor one outside the teams with a policy
    other = jobset("j", ns="team-z")
    wl = workload(other, active=False, annotations={IDLE_REQUEUED_AT_ANNOTATION: NOW})
    assert run([], [other], [wl], []).actions == []


def test_our_mark_on_a_workload_someone_reactivated_is_removed_silently():
    job = jobset("j")
    wl = workload(job, active=True, annotations={IDLE_REQUEUED_AT_ANNOTATION: NOW})
    d = run([], [job], [wl], [pod(job, "p")])
    assert summary(d) == [("PATCH", "Workload", "jobset-j-abcde")]
    after = json_patch(wl, list(d.actions[0].patch))
    assert after["spec"]["active"] is True and after["metadata"]["annotations"] == {}


def test_rows_that_are_not_firing_idle_alerts_of_a_known_team_job_are_ignored():
    job = jobset("j")
    rows = [
        alert("j", state="pending"),
        alert("j", name="TrainplaneStragglerNode"),
        alert("j", ns="team-z"),
        alert("gone"),
    ]
    assert run(rows, [job, jobset("j", ns="team-z")]).actions == []


def test_a_jobsets_child_jobs_are_not_jobs_of_their_own():
    child = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j-workers-0",
            "namespace": "team-a",
            "uid": "c",
            "labels": {IDLE_EXEMPT_LABEL: "true"},
            "ownerReferences": [{"kind": "JobSet", "name": "j", "uid": "uid-j", "controller": True}],
        },
    }
    plain = {**child, "metadata": {**child["metadata"], "name": "elastic", "ownerReferences": []}}
    assert R.exempt_jobs([child, plain], POLICIES) == [("team-a", "elastic")]
    assert run([alert("j-workers-0")], [child]).actions == []


def test_the_config_gives_each_namespace_its_teams_policy():
    config = {
        "idle": {
            "teams": [{"team": "a", "namespace": "team-a", "action": "requeue", "exemptLabels": {"k": "v"}}]
        }
    }
    assert R.TeamPolicy.from_config(config) == {"team-a": R.TeamPolicy("a", "team-a", "requeue", {"k": "v"})}
    assert R.TeamPolicy.from_config({}) == {}


# ---- the hold (idle_hold.py): kept inactive while others wait for the GPUs ------------------------------


def local_queue(cq, ns="team-a", name="default"):
    return {"kind": "LocalQueue", "metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": cq}}


def cluster_queue(name, pending=0, cohort="platform", borrowing=None, lending=None):
    resource = {"name": "nvidia.com/gpu", "nominalQuota": "8"}
    if borrowing is not None:
        resource["borrowingLimit"] = borrowing
    if lending is not None:
        resource["lendingLimit"] = lending
    spec = {"resourceGroups": [{"flavors": [{"name": "h100", "resources": [resource]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"pendingWorkloads": pending},
    }


def queues(*cluster, local=None):
    return R.Queues((local or local_queue("team-a-cq"),), cluster)


def requeued(job):
    return workload(job, active=False, annotations={IDLE_REQUEUED_AT_ANNOTATION: NOW})


HELD_KEY = ("team-a", "jobset-j-abcde")


def test_held_while_its_own_cluster_queue_has_pending_workloads_then_reactivated():
    job = jobset("j")
    wl = requeued(job)
    waiting = queues(cluster_queue("team-a-cq", pending=2), cluster_queue("team-b-cq"))
    d = run([], [job], [wl], [], queues=waiting)
    assert summary(d) == [(EVENT_IDLE_HELD, "JobSet", "j")] and d.held == {HELD_KEY}
    assert "team-a-cq (2 pending)" in d.actions[0].message and "team-b-cq" not in d.actions[0].message
    # once per hold: the next rounds say nothing while it lasts
    again = run([], [job], [wl], [], queues=waiting, held=d.held)
    assert again.actions == [] and again.held == {HELD_KEY}
    # nothing pending any more: active again, the hold over
    done = run(
        [],
        [job],
        [wl],
        [],
        queues=queues(cluster_queue("team-a-cq"), cluster_queue("team-b-cq")),
        held=again.held,
    )
    assert summary(done) == [("PATCH", "Workload", "jobset-j-abcde"), (EVENT_IDLE_REACTIVATED, "JobSet", "j")]
    assert json_patch(wl, list(done.actions[0].patch))["spec"]["active"] is True and done.held == set()


def test_held_while_a_cohort_peer_that_may_borrow_has_pending_workloads():
    job = jobset("j")
    wl = requeued(job)
    d = run(
        [], [job], [wl], [], queues=queues(cluster_queue("team-a-cq"), cluster_queue("team-b-cq", pending=1))
    )
    assert (
        summary(d) == [(EVENT_IDLE_HELD, "JobSet", "j")] and "team-b-cq (1 pending)" in d.actions[0].message
    )


@pytest.mark.parametrize(
    "own, peer",
    [
        (cluster_queue("team-a-cq"), cluster_queue("team-b-cq", pending=1, cohort="other")),
        (cluster_queue("team-a-cq", cohort=""), cluster_queue("team-b-cq", pending=1, cohort="")),
        # the platform with borrowing off: borrowingLimit 0 (kueue_objects.cluster_queue_spec)
        (cluster_queue("team-a-cq"), cluster_queue("team-b-cq", pending=1, borrowing="0")),
        (cluster_queue("team-a-cq", lending="0"), cluster_queue("team-b-cq", pending=1)),
    ],
    ids=["other-cohort", "no-cohort", "peer-may-not-borrow", "own-may-not-lend"],
)
def test_pending_workloads_that_cannot_get_the_gpus_do_not_hold_it(own, peer):
    job = jobset("j")
    d = run([], [job], [requeued(job)], [], queues=queues(own, peer))
    assert summary(d) == [("PATCH", "Workload", "jobset-j-abcde"), (EVENT_IDLE_REACTIVATED, "JobSet", "j")]


@pytest.mark.parametrize(
    "known",
    [
        R.Queues(),  # no LocalQueues, no ClusterQueues (none listed)
        queues(cluster_queue("team-b-cq", pending=3)),  # its ClusterQueue not found
        R.Queues((local_queue("team-a-cq", name="other"),), (cluster_queue("team-a-cq", pending=3),)),
        R.Queues((local_queue("team-a-cq", ns="team-b"),), (cluster_queue("team-a-cq", pending=3),)),
    ],
    ids=["nothing", "cluster-queue-missing", "local-queue-missing", "local-queue-in-another-namespace"],
)
def test_a_queue_not_found_never_holds_it(known):
    job = jobset("j")
    d = run([], [job], [requeued(job)], [], queues=known, held={HELD_KEY})
    assert summary(d)[0] == ("PATCH", "Workload", "jobset-j-abcde") and d.held == set()


def test_queue_lists_failing_keep_it_inactive_this_round_without_a_word():
    job = jobset("j")
    wl = requeued(job)
    held = run([], [job], [wl], [], queues=FAILED, held={HELD_KEY})
    assert held.actions == [] and held.held == {HELD_KEY}
    fresh = run([], [job], [wl], [], queues=FAILED)
    assert fresh.actions == [] and fresh.held == set()
    # its pods still running: not a hold, nothing to decide
    assert (
        run([], [job], [wl], [pod(job, "p")], queues=queues(cluster_queue("team-a-cq", pending=1))).held
        == set()
    )


# ---- the round: lists, sends, exports --------------------------------------------------------------------


class Api:
    """Records requests; answers lists from `objects` (path -> items), 404 for the rest; PATCH fails with
    `patch_status` when set."""

    def __init__(self, objects, patch_status=None):
        self.objects, self.patch_status, self.sent = objects, patch_status, []
        self.fail: dict[str, int] = {}  # path -> the status its GET fails with

    def request(self, method, path, body=None, content_type=""):
        self.sent.append((method, path, body))
        if method == "GET" and path in self.fail:
            raise ApiException(status=self.fail[path])
        if method == "PATCH":
            if self.patch_status:
                raise ApiException(status=self.patch_status)
            return {}
        if path not in self.objects:
            raise ApiException(status=404)
        return {"items": self.objects[path]}


def idle_round(api, alerts):
    events = []
    config = {"idle": {"teams": [{"team": "a", "namespace": "team-a", "action": "requeue"}]}}
    r = IdleRound(config, api, lambda q: alerts, lambda t, reason, msg: events.append((reason, t["name"])))
    return r, events


def strip(obj):
    """As a list returns its items: without apiVersion and kind (the round puts them back)."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def test_round_requeues_and_exports_exempt_jobs_without_kueue_installed():
    job, free = jobset("j"), jobset("free", labels={IDLE_EXEMPT_LABEL: "true"})
    base = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets"
    api = Api(
        {
            base: [strip(job), strip(free)],
            "/apis/batch/v1/namespaces/team-a/jobs": [],
            "/api/v1/namespaces/team-a/pods": [],
        }
    )
    r, events = idle_round(api, [alert("j")])
    r.run()  # no workloads route: Kueue not installed, the Workload list is empty
    assert events == [(EVENT_IDLE, "j")] and r.gauge is not None and r.gauge.current == {("team-a", "free")}
    sample = r.gauge.registry.get_sample_value(
        "trainplane_job_idle_exempt", {"namespace": "team-a", "job": "free"}
    )
    assert sample == 1.0
    # the label removed: the series goes
    api.objects[base] = [strip(job), strip(jobset("free"))]
    r.run()
    assert r.gauge.current == set()
    assert (
        r.gauge.registry.get_sample_value(
            "trainplane_job_idle_exempt", {"namespace": "team-a", "job": "free"}
        )
        is None
    )


def test_round_whose_workload_patch_fails_posts_nothing_and_decides_again():
    job = jobset("j")
    wl = workload(job)
    api = Api(
        {
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets": [strip(job)],
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads": [strip(wl)],
            "/apis/batch/v1/namespaces/team-a/jobs": [],
            "/api/v1/namespaces/team-a/pods": [],
        },
        patch_status=422,
    )
    r, events = idle_round(api, [alert("j")])
    r.run()
    patches = [s for s in api.sent if s[0] == "PATCH"]
    assert events == [] and r.announced == set()
    assert patches[0][1] == "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/jobset-j-abcde"
    api.patch_status = None
    r.run()
    assert events == [(EVENT_IDLE, "j"), (EVENT_IDLE_REQUEUED, "j")] and r.announced == {("team-a", "j")}


def test_round_without_prometheus_keeps_the_episodes_and_still_reactivates():
    job = jobset("j")
    wl = workload(job, active=False, annotations={IDLE_REQUEUED_AT_ANNOTATION: NOW})
    api = Api(
        {
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets": [strip(job)],
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads": [strip(wl)],
            "/apis/batch/v1/namespaces/team-a/jobs": [],
            "/api/v1/namespaces/team-a/pods": [],
        }
    )
    events = []

    def down(q):
        raise OSError("connection refused")

    config = {"idle": {"teams": [{"team": "a", "namespace": "team-a", "action": "requeue"}]}}
    r = IdleRound(config, api, down, lambda t, reason, msg: events.append((reason, t["name"])))
    r.announced = {("team-a", "j")}
    r.run()
    assert events == [(EVENT_IDLE_REACTIVATED, "j")] and r.announced == {("team-a", "j")}


def test_an_elastic_jobs_pods_are_found_by_the_job_controllers_label():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "elastic", "namespace": "team-a", "uid": "uid-elastic"},
    }
    wl = workload(job, active=False, annotations={IDLE_REQUEUED_AT_ANNOTATION: NOW})
    running = {
        "kind": "Pod",
        "metadata": {
            "name": "elastic-0",
            "namespace": "team-a",
            "labels": {"batch.kubernetes.io/job-name": "elastic"},
        },
        "status": {"phase": "Running"},
    }
    assert run([], [job], [wl], [running]).actions == []
    assert summary(run([], [job], [wl], []))[1] == (EVENT_IDLE_REACTIVATED, "Job", "elastic")


def test_round_holds_by_the_listed_queues_and_keeps_holding_when_they_cannot_be_listed():
    job = jobset("j")
    wl = requeued(job)
    cq_path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
    api = Api(
        {
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets": [strip(job)],
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads": [strip(wl)],
            "/apis/batch/v1/namespaces/team-a/jobs": [],
            "/api/v1/namespaces/team-a/pods": [],
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues": [strip(local_queue("team-a-cq"))],
            cq_path: [strip(cluster_queue("team-a-cq", pending=1))],
        }
    )
    r, events = idle_round(api, [])
    r.run()
    assert events == [(EVENT_IDLE_HELD, "j")] and r.held == {HELD_KEY}
    # the ClusterQueue list fails (403, 500, a timeout): still held, nothing said, listed again next round
    api.fail = {cq_path: 500}
    r.run()
    assert events == [(EVENT_IDLE_HELD, "j")] and r.held == {HELD_KEY}
    assert not [s for s in api.sent if s[0] == "PATCH"]
    # listed again: nothing pending, reactivated
    api.fail = {}
    api.objects[cq_path] = [strip(cluster_queue("team-a-cq"))]
    r.run()
    assert events[-1] == (EVENT_IDLE_REACTIVATED, "j") and r.held == set()


def test_round_lists_no_queues_while_nothing_waits_for_reactivation():
    job = jobset("j")
    api = Api(
        {
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets": [strip(job)],
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads": [strip(workload(job))],
            "/apis/batch/v1/namespaces/team-a/jobs": [],
            "/api/v1/namespaces/team-a/pods": [],
        }
    )
    r, _ = idle_round(api, [])
    r.run()
    assert not [p for _, p, _ in api.sent if "queues" in p]
