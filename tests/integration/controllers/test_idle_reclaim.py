"""Idle reclaim end to end: the GPU health operator as shipped (kopf run on its ConfigMap's files) against the
fake Kubernetes API (tests/helpers/fake_kube.py, with JobSets and Kueue Workloads), a real Prometheus
(Debian's package) evaluating the idle alert on what it scrapes, and a real trainer taking Kueue's SIGTERM.

Prometheus scrapes two targets: the controller's own exemption gauge (IDLE_EXEMPT_METRIC, honor_labels as its
PodMonitor has it), and a stub serving each job's mean GPU utilisation under JOB_GPU_UTIL's name (the recording
rule from DCGM series is the idle rules' part, promtool-tested there). The alert is the platform's own
(idle_rules.idle_alert: `JOB_GPU_UTIL < threshold unless on (namespace, job) IDLE_EXEMPT_METRIC == 1`, labels
team/action) with `for: 2s` at a 1 s evaluation interval instead of the team's 30m: a real window would
take the window's length, and `for` is Prometheus' own; what is tested here is that the series the controller
exports keep exempt jobs out of ALERTS, and what the controller does with the firing rows.

The test plays Kueue's part (there is no Kueue here): when the Workload goes inactive it sends the trainer
SIGTERM, as deleting the suspended job's pods does, and deletes the pods once it exited; it keeps team-a's
ClusterQueue's status.pendingWorkloads at 1 until then, so the controller holds the Workload inactive (idle_hold.py)
until the test sets it to 0 (the waiting Workload admitted); when the Workload is active again it starts the job
again. No step is lost: the steps of both runs are contiguous.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import random
import shutil
import signal
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from components.incluster.idle_rules import idle_alert
from components.spec import TeamSpec
from contract.idle import (
    EVENT_IDLE,
    EVENT_IDLE_EXEMPT,
    EVENT_IDLE_HELD,
    EVENT_IDLE_REACTIVATED,
    EVENT_IDLE_REQUEUED,
    IDLE_ALERT,
    IDLE_EXEMPT_LABEL,
    IDLE_EXEMPT_METRIC,
    IDLE_REQUEUED_AT_ANNOTATION,
    JOB_GPU_UTIL,
)
from controllers import idle_reclaim as R
from tests.helpers.fake_kube import FakeKube
from tests.helpers.gpu_health_operator import operator, wait_for
from tests.helpers.prometheus import serve
from tests.helpers.trainer import BASE, Proc, free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("prometheus") is None, reason="prometheus not on PATH (CI installs Debian's prometheus)"
    ),
]

# The trainer runs until it is stopped (its steps take a fraction of a second; the alert takes seconds).
STEPS = 100000
# A team's namespace is its name (components.bundle.team_namespace).
TEAMS = [
    {"team": "team-a", "namespace": "team-a", "action": "requeue", "exemptLabels": {"tier": "interactive"}},
    {"team": "team-b", "namespace": "team-b", "action": "alert", "exemptLabels": {}},
]


def jobset(name, ns, labels=None):
    return {
        "apiVersion": R.JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}", "labels": labels or {}},
        "spec": {"suspend": False},
    }


def workload(job):
    meta = job["metadata"]
    return {
        "kind": "Workload",
        "metadata": {
            "name": f"jobset-{meta['name']}-1a2b3",
            "namespace": meta["namespace"],
            "ownerReferences": [
                {
                    "apiVersion": R.JOBSET_API,
                    "kind": "JobSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"queueName": "gpus"},
    }


def job_pod(job, i):
    meta = job["metadata"]
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-workers-0-{i}",
            "namespace": meta["namespace"],
            "labels": {"jobset.sigs.k8s.io/jobset-name": meta["name"]},
        },
        "spec": {"containers": [{"name": "trainer"}]},
        "status": {"phase": "Running"},
    }


def queues(pending_a: int) -> list[dict]:
    """Each team's LocalQueue `gpus` -> its ClusterQueue, both in one cohort (as kueue_objects builds them; only
    what the hold reads), team-a's with `pending_a` Workloads waiting."""
    out: list[dict] = []
    for team, pending in (("team-a", pending_a), ("team-b", 0)):
        out.append(
            {
                "kind": "LocalQueue",
                "metadata": {"name": "gpus", "namespace": team},
                "spec": {"clusterQueue": team},
            }
        )
        gpus = {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8"}
        spec = {
            "cohortName": "trainplane",
            "resourceGroups": [{"flavors": [{"name": "h100", "resources": [gpus]}]}],
        }
        out.append(
            {
                "kind": "ClusterQueue",
                "metadata": {"name": team},
                "spec": spec,
                "status": {"pendingWorkloads": pending},
            }
        )
    return out


IDLE = jobset("idle-job", "team-a")
EXEMPT_LABEL = jobset("exempt-label", "team-a", {IDLE_EXEMPT_LABEL: "true"})
EXEMPT_TEAM = jobset("exempt-team", "team-a", {"tier": "interactive"})
ALERT_ONLY = jobset("alert-job", "team-b")
JOBS = [IDLE, EXEMPT_LABEL, EXEMPT_TEAM, ALERT_ONLY]


class UtilStub:
    """Serves JOB_GPU_UTIL per (namespace, job) in `jobs` at 1% (idle), on loopback."""

    def __init__(self) -> None:
        self.jobs: set[tuple[str, str]] = set()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = "".join(
                    f'{JOB_GPU_UTIL}{{namespace="{ns}",job="{job}"}} 1\n' for ns, job in sorted(stub.jobs)
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def idle_rules() -> dict:
    """The platform's alert per team (idle_rules.idle_alert), its `for` cut to 2s (module docstring)."""
    rules = []
    for t in TEAMS:
        team = TeamSpec.model_validate(
            {
                "name": t["team"],
                "gpuQuota": 8,
                "idle": {"action": t["action"], "exemptLabels": t["exemptLabels"]},
            }
        )
        rules.append({**idle_alert(team), "for": "2s"})
    return {"groups": [{"name": "trainplane-idle", "rules": rules}]}


@contextlib.contextmanager
def prometheus(tmp: Path, targets: dict[str, int]):
    (tmp / "rules.yml").write_text(yaml.safe_dump(idle_rules()))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp / "rules.yml")],
        "scrape_configs": [
            {"job_name": name, "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
            for name, port in targets.items()
        ],
    }
    with serve(tmp, config) as url:
        yield url


def query(url: str, q: str) -> list[dict]:
    try:
        with urllib.request.urlopen(
            f"{url}/api/v1/query?{urllib.parse.urlencode({'query': q})}", timeout=5
        ) as r:
            return json.loads(r.read())["data"]["result"]
    except OSError:
        return []  # not up yet


def labelled(rows: list[dict]) -> set[tuple[str, str]]:
    return {(r["metric"]["namespace"], r["metric"]["job"]) for r in rows}


def corpus(tmp: Path) -> Path:
    rng = random.Random(7)
    words = "the model learns to predict the next byte of text and the loss falls as training goes on".split()
    p = tmp / "corpus.txt"
    p.write_text("\n".join(" ".join(rng.choice(words) for _ in range(10)) + "." for _ in range(2000)))
    return p


def trainer_args(tmp: Path, text: Path) -> list[str]:
    return [
        *BASE,
        "--dataset",
        "bytes",
        "--data-paths",
        f"[{text}]",
        "--steps",
        str(STEPS),
        "--checkpoint.uri",
        str(tmp / "ckpt"),
        # No periodic checkpoint: the only one is what the SIGTERM makes the trainer write.
        "--checkpoint.interval-steps",
        "1000",
    ]


def wl_of(kube: FakeKube, job: dict) -> dict:
    (wl,) = [
        w
        for w in kube.objects("workloads", job["metadata"]["namespace"])
        if w["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    ]
    return wl


def events_on(kube: FakeKube, job: dict) -> list[str]:
    meta = job["metadata"]
    return sorted(
        e["reason"]
        for e in kube.events()
        if e["involvedObject"]["name"] == meta["name"]
        and e["involvedObject"]["namespace"] == meta["namespace"]
    )


def held_while_a_workload_waits(kube: FakeKube, proc) -> None:
    """Its pods are gone, but a Workload waits in its ClusterQueue: it stays inactive (held), said once; then
    Kueue admits the waiting Workload (nothing pending) and the job may re-enter its queue."""
    wait_for("the hold Event", lambda: EVENT_IDLE_HELD in events_on(kube, IDLE), proc)
    time.sleep(2.5)  # more rounds (1 s each): still held, no second Event
    assert wl_of(kube, IDLE)["spec"].get("active") is False
    (held,) = kube.events(EVENT_IDLE_HELD)
    assert held["type"] == "Normal" and "team-a (1 pending)" in held["message"], held
    kube.update("clusterqueues", "team-a", "", lambda cq: {**cq, "status": {"pendingWorkloads": 0}})


def test_idle_job_is_requeued_without_losing_a_step_and_exempt_jobs_are_left_alone(tmp_path):
    text = corpus(tmp_path)
    # The idle job's pod runs the real trainer (torch's import takes seconds: started first).
    # One process, no launcher (`python -m trainer`, as test_compat.py runs it): one torch import, not two.
    first = Proc(["-m", "trainer", *trainer_args(tmp_path, text)], tmp_path, "first")
    # One Workload waits in team-a's ClusterQueue: the requeued job is held until it is gone (idle_hold.py).
    objects = [*JOBS, *(workload(j) for j in JOBS), job_pod(IDLE, 0), job_pod(ALERT_ONLY, 0), *queues(1)]
    kube = FakeKube(objects)
    stub = UtilStub()
    metrics_port = free_port()
    try:
        with (
            prometheus(tmp_path, {"controller": metrics_port, "dcgm": stub.port}) as prom,
            operator(
                tmp_path,
                kube,
                prometheusUrl=prom,
                idle={"alert": IDLE_ALERT, "metricsPort": metrics_port, "teams": TEAMS},
            ) as proc,
        ):
            # The controller exports the exempt jobs (by the label, by the team's exemptLabels) and Prometheus
            # has them before any job looks idle.
            exempt = {("team-a", "exempt-label"), ("team-a", "exempt-team")}
            wait_for(
                "the exemption series",
                lambda: labelled(query(prom, f"{IDLE_EXEMPT_METRIC} == 1")) == exempt,
                proc,
            )
            first.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 3)
            stub.jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]) for j in JOBS}

            wait_for(
                "the idle job's Workload deactivated",
                lambda: wl_of(kube, IDLE)["spec"].get("active") is False,
                proc,
            )
            wl = wl_of(kube, IDLE)
            assert IDLE_REQUEUED_AT_ANNOTATION in wl["metadata"]["annotations"]
            wait_for("the alert-only team's Event", lambda: events_on(kube, ALERT_ONLY) == [EVENT_IDLE], proc)
            # Only the two jobs that are not exempt ever alert: the exemption series keeps the others out.
            assert labelled(query(prom, f'ALERTS{{alertname="{IDLE_ALERT}",alertstate="firing"}}')) == {
                ("team-a", "idle-job"),
                ("team-b", "alert-job"),
            }

            # Kueue's part: the suspended job's pods are deleted, the trainer gets SIGTERM and checkpoints.
            first.signal(signal.SIGTERM)
            assert first.wait() == 143, first.tail()
            (preempted,) = first.events("preempted_exit")
            kube.remove("pods", job_pod(IDLE, 0)["metadata"]["name"], "team-a")
            stub.jobs.discard(("team-a", "idle-job"))  # no pods, no GPU series

            held_while_a_workload_waits(kube, proc)
            wait_for(
                "the Workload reactivated", lambda: wl_of(kube, IDLE)["spec"].get("active") is True, proc
            )
            assert IDLE_REQUEUED_AT_ANNOTATION not in (wl_of(kube, IDLE)["metadata"].get("annotations") or {})
            wait_for("the reactivation Event", lambda: EVENT_IDLE_REACTIVATED in events_on(kube, IDLE), proc)
            # Kueue admits it again: the job runs on from its checkpoint.
            second = Proc(["-m", "trainer", *trainer_args(tmp_path, text)], tmp_path, "second")
            second.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= preempted["ckpt_step"] + 3)
            second.signal(signal.SIGTERM)
            assert second.wait() == 143, second.tail()

            assert events_on(kube, IDLE) == sorted(
                [EVENT_IDLE, EVENT_IDLE_REQUEUED, EVENT_IDLE_HELD, EVENT_IDLE_REACTIVATED]
            )
            assert events_on(kube, ALERT_ONLY) == [EVENT_IDLE]
            for job in (EXEMPT_LABEL, EXEMPT_TEAM):
                assert events_on(kube, job) == [] and EVENT_IDLE_EXEMPT not in events_on(kube, job)
            for job in (EXEMPT_LABEL, EXEMPT_TEAM, ALERT_ONLY):  # untouched
                untouched = wl_of(kube, job)
                assert "active" not in untouched["spec"] and "annotations" not in untouched["metadata"]
            (event,) = [e for e in kube.events(EVENT_IDLE_REQUEUED)]
            assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "JobSet"
            assert event["involvedObject"]["apiVersion"] == R.JOBSET_API
    finally:
        stub.close()
        first.kill_tree()
        with contextlib.suppress(NameError):
            second.kill_tree()

    # No step lost: the second run resumed from the SIGTERM checkpoint, at the very next step.
    (resumed,) = second.events("resumed")
    assert resumed["ckpt_step"] == preempted["ckpt_step"]
    before = [e["step"] for e in first.events("step_done")]
    after = [e["step"] for e in second.events("step_done")]
    assert max(before) == preempted["ckpt_step"] and min(after) == preempted["ckpt_step"] + 1
    assert before + after == list(range(1, max(after) + 1))
