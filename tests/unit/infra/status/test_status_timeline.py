"""`trainplane status`: the timeline built from plain API dicts and a step series (infra/status/timeline.py,
goodput.py), on the day of tests/helpers/status_cluster.py."""

from __future__ import annotations

import dataclasses

from infra.status import Series, build
from infra.status.goodput import restart_loss
from infra.status.timeline import JobState, job_gpus
from tests.helpers.status_cluster import at, job_state, jobset, step_series, unix


def day(**changes) -> JobState:
    return dataclasses.replace(job_state(), **changes)


def rows(tl) -> list[tuple]:
    return [
        (r.number, r.time, r.via, r.cause, r.counted, r.loss.steps, r.loss.seconds, r.loss.gpu_hours(tl.gpus))
        for r in tl.restart_list
    ]


def test_the_days_restarts_their_causes_and_what_each_cost():
    tl = build(job_state(), Series(steps=step_series()))
    assert (tl.state, tl.gpus, tl.restarts, tl.counted, tl.max_restarts) == ("Running", 16, 3, 1, 20)
    assert rows(tl) == [
        # Kueue preempted it at step 280 (checkpoint 250); back past 280 9 minutes later.
        (None, at(30), "Kueue", "preemption", False, 30, 540.0, 2.4),
        # gpu-node-a quarantined, its pods evicted and gone: the controller's pod Event says so.
        (1, at(60), "JobSet", "node fault", False, 40, 540.0, 2.4),
        # rank 0 hung from minute 110: 10 minutes without a step, then 50 steps redone.
        (2, at(120), "JobSet", "hang", True, 50, 1140.0, 5.07),
        # preempted after a checkpoint: nothing redone, 5 minutes without steps.
        (3, at(180), "JobSet", "preemption", False, 0, 300.0, 1.33),
    ]
    assert (tl.steps_lost, tl.gpu_hours_lost) == (120, 11.2)
    assert tl.prometheus is None


def test_the_evidence_names_the_pod_and_node_of_the_fault_not_another_jobs():
    restarts = build(job_state()).restart_list
    assert "GpuPodEvicted" in restarts[1].evidence and "gpu-node-a" in restarts[1].evidence
    # An eviction Event of another job's pod falls in restart 2's window: not this job's cause.
    assert all("other-job" not in r.evidence for r in restarts)
    assert "exited 124" in restarts[2].evidence


def test_restarts_the_api_folded_into_one_event_keep_their_numbers_and_times():
    """Restarts 1 and 3 are one Event with count 2 (first 11:00, last 13:00); restart 2 sits between."""
    tl = build(job_state())
    assert [(r.number, r.time, r.counted) for r in tl.restart_list if r.via == "JobSet"] == [
        (1, at(60), False),
        (2, at(120), True),
        (3, at(180), False),
    ]


def test_the_events_of_an_earlier_jobset_of_the_same_name_are_not_its_restarts():
    state = job_state()
    old = {
        "metadata": {"name": "gpt-small.old", "namespace": "research"},
        "involvedObject": {"kind": "JobSet", "name": "gpt-small", "uid": "an-earlier-jobset"},
        "reason": "RestartJobSetFailurePolicyAction",
        "count": 1,
        "lastTimestamp": at(170),
    }
    for e in state.events:
        e["involvedObject"]["uid"] = "js-uid"
    tl = build(dataclasses.replace(state, events=[*state.events, old]))
    assert [(r.number, r.time, r.counted) for r in tl.restart_list if r.via == "JobSet"] == [
        (1, at(60), False),
        (2, at(120), True),
        (3, at(180), False),
    ]


def test_a_restart_inside_a_folded_event_keeps_its_number_without_a_time():
    """Three uncounted restarts folded into one Event (first 11:00, last 13:00) and a counted one at 12:00."""
    state = job_state()
    folded = next(
        e for e in state.events if e["reason"] == "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
    )
    folded["count"] = 3
    tl = build(
        dataclasses.replace(state, object=jobset(restarts=4, counted=1), pods=[]), Series(steps=step_series())
    )
    rows = [(r.number, r.time, r.counted, r.loss.note) for r in tl.restart_list if r.via == "JobSet"]
    assert rows == [
        (1, at(60), False, None),
        (2, None, False, "no restart time"),
        (3, at(120), True, None),
        (4, at(180), False, None),
    ]
    assert "its time is not kept" in tl.restart_list[2].evidence
    # Restart 1's loss ends at the next restart with a time, not at the one without.
    assert tl.restart_list[1].loss.steps == 40


def test_restarts_whose_events_expired_are_listed_without_a_cause_or_a_time():
    tl = build(day(object=jobset(restarts=5, counted=2), pods=[]), Series(steps=step_series()))
    jobset_rows = [(r.number, r.time, r.cause, r.counted) for r in tl.restart_list if r.via == "JobSet"]
    assert jobset_rows[:2] == [(1, None, "unknown", None), (2, None, "unknown", None)]
    assert [n for n, *_ in jobset_rows] == [1, 2, 3, 4, 5]
    assert "expired" in tl.restart_list[0].evidence
    assert tl.restart_list[0].loss.note == "no restart time"
    # The known ones are the newest three; their pods gone, the JobSet rule names the cause.
    assert [r for r in jobset_rows[2:]] == [
        (3, at(60), "node fault", False),
        (4, at(120), "crash", True),
        (5, at(180), "preemption", False),
    ]


def test_admissions_show_each_condition_and_the_events_it_does_not():
    entries = [(e.time, e.what) for e in build(job_state()).entries if e.source.startswith("Workload")]
    assert entries == [
        (at(0.1), "Admitted"),
        (at(0.1), "QuotaReserved"),
        (at(30), "Evicted"),
        (at(31), "Requeued=True"),
        (at(35), "Admitted=True"),  # the Admitted Event of 10:35 is this condition: shown once
        (at(35), "Evicted=False"),
        (at(35), "QuotaReserved=True"),
        (at(36), "PodsReady=True"),
    ]


def test_the_jobs_state_from_its_conditions():
    done = jobset()
    done["status"]["conditions"].append(
        {"type": "Completed", "status": "True", "lastTransitionTime": at(300)}
    )
    failed = jobset()
    failed["status"]["conditions"].append(
        {"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts", "lastTransitionTime": at(300)}
    )
    assert build(day(object=done)).state == "Completed"
    assert build(day(object=failed)).state == "Failed (ReachedMaxRestarts)"
    assert build(day(pods=[], object=jobset(restarts=0, counted=0), events=[])).state == "Pending"


def test_an_elastic_jobs_failed_pods_are_its_restarts():
    state = job_state()
    job = {
        "metadata": {"name": "gpt-small", "creationTimestamp": at(0)},
        "spec": {
            "parallelism": 4,
            "backoffLimit": 20,
            "template": {
                "spec": {"containers": [{"name": "trainer", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}
            },
        },
        "status": {"failed": 3},
    }
    tl = build(dataclasses.replace(state, kind="Job", object=job))
    assert (tl.gpus, tl.max_restarts, tl.counted) == (32, 20, None)
    pods = [(r.via, r.cause, r.counted) for r in tl.restart_list if r.via == "pod"]
    assert (
        sorted(pods)
        == [("pod", "hang", True), ("pod", "peer loss", False)] + [("pod", "preemption", False)] * 2
    )


def test_job_gpus_counts_replicas_pods_and_each_containers_gpus():
    js = jobset()
    js["spec"]["replicatedJobs"][0]["replicas"] = 2
    assert job_gpus(js, "JobSet") == 32


# ---- goodput.py -------------------------------------------------------------------------------------
STEPS = [(0.0, 0.0), (60.0, 10.0), (120.0, 20.0), (180.0, 20.0), (300.0, 15.0), (360.0, 20.0), (420.0, 25.0)]


def test_steps_and_time_lost_from_the_high_water_and_the_step_resumed_from():
    loss = restart_loss(Series(steps=STEPS), 200.0, None)
    # high-water 20 first reached at 120, resumed at 15, back at 20 at 360.
    assert (loss.high_water, loss.resumed, loss.steps, loss.seconds, loss.caught_up) == (
        20,
        15,
        5,
        240.0,
        True,
    )
    assert loss.gpu_hours(16) == round(240 * 16 / 3600, 2)


def test_a_job_still_redoing_counts_until_its_last_sample_and_says_so():
    loss = restart_loss(Series(steps=STEPS[:5]), 200.0, None)
    assert (loss.steps, loss.seconds, loss.caught_up) == (5, 180.0, False)


def test_without_samples_the_figures_say_why():
    assert restart_loss(None, 1.0, None).note == "no Prometheus"
    assert restart_loss(Series(steps=STEPS), None, None).note == "no restart time"
    assert (
        restart_loss(Series(steps=STEPS), -1.0, None).note == "no trainplane_step sample before the restart"
    )
    after = restart_loss(Series(steps=STEPS[:3]), 200.0, None)
    assert (after.steps, after.note) == (None, "no trainplane_step sample after the restart")
    # The trainer's own count of redone steps stands in.
    redone = restart_loss(Series(steps=STEPS[:3], redone=[(250.0, 0.0), (400.0, 7.0)]), 200.0, None)
    assert (redone.steps, redone.seconds) == (7, None)


def test_the_next_restart_ends_the_window():
    series = Series(steps=step_series())
    assert restart_loss(series, unix(60), unix(120)).steps == 40
    assert restart_loss(series, unix(60), unix(62)).note == "no trainplane_step sample after the restart"
