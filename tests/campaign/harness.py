"""The fault campaign's engine: real launcher and trainer processes under simulated controllers.

Each pod of the job is a real ``python -m trainer.launch`` (one CPU worker, gloo, the bigram plug-in of
tests/campaign/faults.py), started with the launcher options of the job builder's own pod template
(tests/helpers/jobs.py). The controllers are simulated: the Job podFailurePolicy and JobSet failurePolicy
of the same JobSet decide every restart (tests/helpers/jobset_sim.py), and the node model of
tests/helpers/node_sim.py places each pod with the template's own tolerations, nodeSelector and affinity,
and quarantines as the GPU health controller does (the names of contract/recovery.py).

Virtual clock. Real seconds say nothing about a GPU cluster, so time is charged, not measured: each step
the trainer reports stands for ``STEP_S`` (one virtual minute) and each controller delay is one of the
constants below, charged when the event that causes it happens (see ``ledger``). Goodput is productive step
time (every step once) over the virtual wall time of the allocation, from the harness's own step records.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.campaign.faults import ENV_PLAN
from tests.helpers.jobset_sim import JobSetState, PodOutcome, job_failure, jobset_rule
from tests.helpers.node_sim import Unschedulable, pool_cluster, pool_node
from tests.helpers.trainer import Proc, free_port
from trainer.contract import EXIT_HANG, EXIT_PEER_LOST, EXIT_PREEMPTED, exit_action

# ---- the virtual clock (seconds) -------------------------------------------------------------------------
STEP_S = 60  # one optimizer step of the day's job: one virtual minute
CKPT_INTERVAL_STEPS = 10  # a checkpoint every 10 virtual minutes
CKPT_SAVE_S = 10  # assumed: the part of a save that blocks training (async staging to host memory)
STARTUP_S = 180  # assumed: container start, imports, rendezvous and checkpoint load of a 2-node job
RESTART_S = 60  # assumed: JobSet Recreate (delete and create the child Jobs), Kueue re-admission, binding
PROVISION_S = 600  # assumed: a new GPU node (instance boot, driver, node-start diagnostic) for a pending pod
# The trainer's default watchdog limit for 60 s steps: max(factor 10 x median 60 s, floorSeconds 300) =
# 600 s (trainer/config.py WatchdogConfig defaults). The real runs use floor 2 s, factor 3.
HANG_DETECT_S = 600
XID_DETECT_S = 30  # the GPU health agent's poll (intervalSeconds: 30, components/incluster/gpu_health.py)
PEER_LOSS_DETECT_S = 60  # assumed: the peers' collective breaks when the lost node's connections reset
STRAGGLER_SLOWDOWN = 1.3  # assumed: a throttled GPU at 1/1.3 speed (above gpuHealth.stragglers.factor 1.25)
STRAGGLER_FACTOR = 1.25  # gpuHealth.stragglers.factor default (components/spec/platform.py)
STRAGGLER_FOR_MINUTES = 15  # gpuHealth.stragglers.forMinutes default
DAY_START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # the quarantine annotation's clock (a fault's step)
GRACE_S = 60.0  # real seconds a deleted pod's launcher gets after SIGTERM before SIGKILL

# What each fault must come to, from trainer/contract.py's exit codes (and the eviction's DisruptionTarget).
EXPECTED = {
    "preemption": ("jobset", "uncounted"),  # exit 143: exit_action retry
    "xid": ("jobset", "uncounted"),  # evicted: DisruptionTarget
    "lost_node": ("jobset", "uncounted"),  # the peers' exit 75: exit_action retry
    "hang": ("in-pod", "counted"),  # exit 124: exit_action count, against the launcher's --max-restarts
    "straggler": ("none", "none"),  # team `stragglers: alert`: an alert and an Event, no restart
    "save_failure": ("none", "none"),  # one save fails, fewer than maxConsecutiveFailures: training goes on
}
assert exit_action(EXIT_PREEMPTED) == exit_action(EXIT_PEER_LOST) == "retry" != exit_action(EXIT_HANG)


@dataclass(frozen=True)
class Fault:
    """A scripted fault: it strikes when ``step`` steps are done, on the node of pod index ``node_rank``."""

    id: str
    kind: str
    step: int
    node_rank: int
    until: int = 0  # straggler: the step its slowdown ends


@dataclass
class Outcome:
    fault: Fault
    node: str = ""
    level: str = "none"  # jobset | in-pod | none
    counted: str = "none"  # counted | uncounted | none
    codes: list[int] = field(default_factory=list)
    rule: str = ""
    detail: str = ""
    disrupted: bool = False  # the failed pod had DisruptionTarget (an eviction)

    def contract_kind(self) -> str:
        """What trainer/contract.py makes of the first failure: an eviction or a `retry` exit code is an
        uncounted restart, a `count` one a counted restart."""
        if self.disrupted or exit_action(self.codes[0]) == "retry":
            return "uncounted"
        return "counted" if exit_action(self.codes[0]) == "count" else "fail"


@dataclass
class Attempt:
    """One JobSet attempt: its pods, their nodes, the processes, the fault that ended it."""

    index: int
    placement: dict[str, str]
    procs: list[Proc]
    provisioned: int = 0
    ended_by: str = ""
    in_pod: list[str] = field(default_factory=list)


def _code(p: Proc) -> int:
    rc = p.p.returncode
    return 128 - rc if rc < 0 else rc  # the kubelet reports a container killed by signal N as 128 + N


class Campaign:
    def __init__(self, workdir: Path, steps: int, faults: Sequence[Fault], jobset: Any, pools: Any) -> None:
        """``jobset``: the job builder's JobSet; ``pools``: the nodePools of the platform it was built for."""
        self.work, self.steps, self.faults = workdir, steps, sorted(faults, key=lambda f: f.step)
        assert all(f.kind in EXPECTED for f in self.faults)
        self.jobset = jobset
        (self.rj,) = jobset["spec"]["replicatedJobs"]
        self.pod_template = self.rj["template"]["spec"]["template"]
        self.size = int(self.rj["template"]["spec"]["parallelism"]) * int(self.rj.get("replicas", 1))
        self.state = JobSetState(max_restarts=jobset["spec"]["failurePolicy"]["maxRestarts"])
        # the pool the template's nodeSelector names, exactly as many nodes as the job needs
        selector = self.pod_template["spec"]["nodeSelector"]
        (self.pool,) = [p for p in pools if all(p["labels"].get(k) == v for k, v in selector.items())]
        self.cluster = pool_cluster(pools, self.pool["name"], self.size)
        self.ckpt, self.plans = workdir / "ckpt", workdir / "plans"
        self.plans.mkdir(parents=True, exist_ok=True)
        self.attempts: list[Attempt] = []
        self.outcomes: dict[str, Outcome] = {f.id: Outcome(f) for f in self.faults}
        self.placements_checked = 0
        self.quarantined_seen = 0

    # ---- the pod template, as the launcher runs it --------------------------------------------------------
    def trainer_args(self, steps: int) -> list[str]:
        return [
            "--model", "tests.campaign.faults:faulty",
            "--dataset", "tests.integration.trainer.plugins:counting",
            "--seq-len", "16", "--global-batch-size", "8", "--micro-batch-size", "2",
            "--threads", "1", "--log-interval", "1", "--lr", "0.3", "--warmup-steps", "0",
            "--steps", str(steps),
            "--checkpoint.interval-steps", str(CKPT_INTERVAL_STEPS),
            "--checkpoint.async-save", "false",
            "--set", "watchdog.floorSeconds=2", "--set", "watchdog.factor=3", "--set", "watchdog.warmupSteps=3",
        ]  # fmt: skip

    def launcher_args(self, index: int, port: int, ckpt: Path) -> list[str]:
        """The template container's args with what Kubernetes and the cluster would fill in: the completion
        index for $(NODE_RANK), the headless Service name of pod 0 -> 127.0.0.1, one CPU worker per node,
        and the campaign's trainer options for the config file the ConfigMap mounts."""
        (c,) = self.pod_template["spec"]["containers"]
        opts = c["args"][: c["args"].index("--")]
        out = []
        for o in opts:
            key = o.split("=", 1)[0]
            value = {
                "--nproc-per-node": "1",
                "--node-rank": str(index),
                "--master-addr": "127.0.0.1",
                "--master-port": str(port),
            }.get(key)
            out.append(o if value is None else f"{key}={value}")
        assert {o.split("=")[0] for o in out} >= {
            "--nnodes",
            "--node-rank",
            "--master-addr",
            "--max-restarts",
        }
        return [
            "-m",
            "trainer.launch",
            *out,
            "--",
            *self.trainer_args(self.steps),
            "--checkpoint.uri",
            str(ckpt),
        ]

    def write_plan(self) -> Path:
        holds = []
        for f in self.faults:
            if f.kind in ("preemption", "xid", "lost_node"):
                holds.append({"id": f.id, "kind": "hold", "rank": f.node_rank, "step": f.step})
            elif f.kind == "hang":
                holds.append({"id": f.id, "kind": "hang", "rank": f.node_rank, "step": f.step})
            elif f.kind == "straggler":
                holds.append({"id": f.id, "kind": "slow", "rank": f.node_rank, "step": f.step, "until": f.until,
                              "seconds": 0.02})  # fmt: skip
            else:  # the checkpoint root goes away before the save at `step` and is back after it
                holds.append({"id": f"{f.id}-break", "kind": "hold", "rank": 0, "step": f.step - 2})
                holds.append({"id": f"{f.id}-mend", "kind": "hold", "rank": 0, "step": f.step + 2})
        accum = 8 // (2 * self.size)
        path = self.plans / "plan.json"
        path.write_text(json.dumps({"ckpt": str(self.ckpt), "accum": accum, "faults": holds}))
        return path

    # ---- placement ---------------------------------------------------------------------------------------
    def place(self, index: int) -> dict[str, str]:
        labels, spec = self.pod_template["metadata"]["labels"], self.pod_template["spec"]
        pods = [f"{self.jobset['metadata']['name']}-workers-0-{i}-a{index}" for i in range(self.size)]
        placement, provisioned = {}, 0
        for pod in pods:
            try:
                placement[pod] = self.cluster.place(pod, spec, labels)
            except Unschedulable:  # the autoscaler adds a node of the pool for the pending pod
                provisioned += 1
                name = f"{self.pool['name']}-new-{index}-{provisioned}"
                self.cluster.add(pool_node(self.pool, name))
                placement[pod] = self.cluster.place(pod, spec, labels)
        for node in placement.values():
            assert not self.cluster.nodes[node].quarantined, f"a restarted pod landed on quarantined {node}"
        self.placements_checked += len(placement)
        self.quarantined_seen += sum(n.quarantined for n in self.cluster.nodes.values())
        self._provisioned = provisioned
        return placement

    # ---- the run -----------------------------------------------------------------------------------------
    def run(self) -> None:
        plan = self.write_plan()
        pending = list(self.faults)
        while True:
            index = len(self.attempts)
            placement = self.place(index)
            port = free_port()
            procs = [
                Proc(
                    self.launcher_args(i, port, self.ckpt),
                    self.work,
                    f"a{index}-pod{i}",
                    {ENV_PLAN: str(plan)},
                )
                for i in range(self.size)
            ]
            attempt = Attempt(index, placement, procs, self._provisioned)
            self.attempts.append(attempt)
            try:
                done = self.drive(attempt, pending)
            finally:
                for p in procs:
                    p.kill_tree()
            if done:
                return

    def drive(self, at: Attempt, pending: list[Fault]) -> bool:
        """Deliver the faults due in this attempt; True when the job completed."""
        while pending:
            f = pending[0]
            out = self.outcomes[f.id]
            out.node = list(at.placement.values())[f.node_rank]
            if f.kind == "hang":
                starts = 1 + len(at.in_pod)
                self._wait(at, lambda n=starts: self._starts(at) > n, f"the in-pod restart after {f.id}")
                hangs = [e for p in at.procs for e in p.events("hang_detected")]
                out.codes = sorted({e["exit_code"] for e in hangs})
                # torchrun counts the restart against --max-restarts: the new group's restart_count rose
                counts = [e["restart_count"] for e in at.procs[0].events("start")]
                out.level, out.counted = "in-pod", "counted" if counts[-1] > counts[-2] else "uncounted"
                out.detail = "watchdog exit 124; torchrun restarted the workers in the pod (--max-restarts)"
                at.in_pod.append(f.id)
            elif f.kind == "straggler":
                self._wait(at, lambda u=f.until: self._step(at) >= u + 1, f"the end of {f.id}")
                self._straggler(at, f, out)
            elif f.kind == "save_failure":
                self._hold(at, f"{f.id}-break")
                self.ckpt.rename(self.work / "ckpt.away")  # the volume goes away: the root is a regular file
                self.ckpt.write_text("")
                self._release(f"{f.id}-break")
                self._hold(at, f"{f.id}-mend")
                self.ckpt.unlink()
                (self.work / "ckpt.away").rename(self.ckpt)
                self._release(f"{f.id}-mend")
                failed = [e for e in at.procs[0].events("checkpoint_failed")]
                out.detail = f"save of step {failed[-1]['ckpt_step']} failed; the next one committed"
                assert failed and failed[-1]["ckpt_step"] == f.step, failed
            else:
                pending.pop(0)
                self.strike(at, f, out)
                return False
            pending.pop(0)
        codes = [p.wait() for p in at.procs]
        assert codes == [0] * self.size, f"the last attempt ended {codes}: {at.procs[0].tail()}"
        return True

    def strike(self, at: Attempt, f: Fault, out: Outcome) -> None:
        """A fault that ends the attempt: the node's fate, the pods' exits, the JobSet's decision."""
        self._hold(at, f.id)
        pods = list(at.placement)
        victim, node = pods[f.node_rank], out.node
        vproc = at.procs[f.node_rank]
        outcomes: list[PodOutcome] = []
        if f.kind == "preemption":  # spot reclaim: SIGTERM to the node's pod, which checkpoints first
            vproc.signal(signal.SIGTERM)
            self._release(f.id)
            first = self._first_exit(at.procs, list(range(self.size)))
            outcomes = [PodOutcome(pods[first], _code(at.procs[first]))]
            self.cluster.delete(node)
        elif f.kind == "xid":  # the controller quarantines the node and evicts its GPU pods
            when = DAY_START + dt.timedelta(seconds=f.step * STEP_S)
            evicted = self.cluster.quarantine(node, "Xid79", "XID 79: GPU has fallen off the bus", at=when)
            assert evicted == [victim], evicted
            vproc.kill_tree()  # the rank cannot checkpoint without its GPU
            vproc.wait()
            outcomes = [PodOutcome(victim, _code(vproc), ("DisruptionTarget",))]
        else:  # lost_node: the node vanishes; its pod never reports, its peers exit first
            vproc.kill_tree()
            self.cluster.lose(node)
            peers = [i for i in range(self.size) if i != f.node_rank]
            first = self._first_exit(at.procs, peers)
            outcomes = [PodOutcome(pods[first], _code(at.procs[first]))]
            self.cluster.delete(node)  # the pool replaces it
        out.codes = [o.exit_code or 0 for o in outcomes]
        out.disrupted = "DisruptionTarget" in outcomes[0].conditions
        self._decide(at, f, out, outcomes)
        self._recreate(at)

    def _decide(self, at: Attempt, f: Fault, out: Outcome, outcomes: list[PodOutcome]) -> None:
        failure = job_failure(self.rj["template"]["spec"], outcomes, self.jobset["metadata"]["namespace"])
        assert failure is not None, f"{f.id}: the child Job did not fail on {outcomes}"
        rule, action = jobset_rule(self.jobset["spec"]["failurePolicy"], *failure, self.rj["name"])
        before = self.state.restarts_count_towards_max
        self.state.apply(action)
        assert self.state.failed_reason is None, f"{f.id}: the JobSet failed ({self.state.failed_reason})"
        out.level, out.rule = "jobset", f"{rule} ({action})"
        out.counted = "counted" if self.state.restarts_count_towards_max > before else "uncounted"
        at.ended_by = f.id

    def _recreate(self, at: Attempt) -> None:
        """JobSet Recreate: the child Jobs are deleted, their pods get SIGTERM, then SIGKILL after the grace."""
        for p in at.procs:
            if p.p.poll() is None:
                p.signal(signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        for p in at.procs:
            try:
                p.p.wait(max(0.1, deadline - time.monotonic()))
            except Exception:
                p.kill_tree()
        for pod in at.placement:
            self.cluster.remove_pod(pod)

    def _straggler(self, at: Attempt, f: Fault, out: Outcome) -> None:
        """The straggler rule on the trainer's own per-rank compute times: the rank above factor x the
        median of its job's ranks for forMinutes in a row -> the alert; the team's `alert` -> an Event."""
        times: dict[int, dict[int, float]] = {}
        for p in at.procs:
            for e in p.events("step_done"):
                times.setdefault(e["step"], {})[e["rank"]] = e["compute_s"]
        run, longest = 0, 0
        for step in range(f.step + 1, f.until + 1):
            ranks = times.get(step, {})
            slow = len(ranks) == self.size and ranks[f.node_rank] > STRAGGLER_FACTOR * statistics.median(
                ranks.values()
            )
            run = run + 1 if slow else 0
            longest = max(longest, run)
        need = STRAGGLER_FOR_MINUTES * 60 // STEP_S
        fired = longest >= need
        if fired:
            self.cluster.straggler(
                out.node, f"rank {f.node_rank} slower than {STRAGGLER_FACTOR}x its job's median"
            )
        out.detail = (
            f"alert {'fired' if fired else 'did NOT fire'} ({longest} slow steps in a row, need {need})"
        )
        assert fired, out.detail

    # ---- waiting on the processes --------------------------------------------------------------------------
    def _wait(self, at: Attempt, cond: Any, what: str, timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            dead = [p for p in at.procs if p.p.poll() is not None]
            assert not dead and time.monotonic() < deadline, (
                f"waiting for {what}: {(dead or at.procs)[0].tail()}"
            )
            time.sleep(0.02)

    def _hold(self, at: Attempt, fid: str) -> None:
        self._wait(at, lambda: (self.plans / f"{fid}.held").exists(), f"the hold {fid}")

    def _release(self, fid: str) -> None:
        (self.plans / f"{fid}.release").touch()

    def _first_exit(self, procs: list[Proc], which: Sequence[int], timeout: float = 180.0) -> int:
        """The index in ``which`` whose process exits first: the failed pod the Job controller acts on (the
        podFailurePolicy's FailJob fails the child Job on it; the JobSet then deletes the rest). The others
        need not exit by themselves: a peer's torchrun restarts its workers and waits in the rendezvous."""
        deadline = time.monotonic() + timeout
        while True:
            for i in which:
                if procs[i].p.poll() is not None:
                    return i
            assert time.monotonic() < deadline, f"pods still running: {procs[which[0]].tail()}"
            time.sleep(0.02)

    def _step(self, at: Attempt) -> int:
        return max((e["step"] for e in at.procs[0].events("step_done")), default=0)

    def _starts(self, at: Attempt) -> int:
        return len(at.procs[0].events("start"))
