"""``python -m tests.campaign.day`` (``make campaign``): a scripted day of faults on the real trainer.

A day is 1440 steps of one virtual minute, a checkpoint every 10 (virtual minutes), on the 2-node JobSet the
job builder makes for the reference job (gpt-small on aws-dev's spot H100 pool). Its faults: 2 spot
preemptions, a node with XID 79, a hung rank, a straggler, a failed checkpoint write and a lost node whose
peers exit first. The virtual clock is tests/campaign/harness.py's (its constants are the mapping).

It prints one row per fault and the totals, and fails (exit 1) unless: no pod landed on a quarantined
node, every fault came to the kind trainer/contract.py says (counted, uncounted, or no restart), the final
weights and optimizer state equal an uninterrupted run's bit for bit, and goodput is at least 90 %.
Deterministic except timings: every fault lands at its step (the plug-in holds the rank there).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.campaign import harness as h
from tests.campaign.harness import EXPECTED, Campaign, Fault
from tests.helpers.jobs import jobset, platform_outputs
from tests.helpers.trainer import assert_bitwise, final_state

DAY_STEPS = 1440
DAY: tuple[Fault, ...] = (
    Fault("preempt-1", "preemption", 130, 1),
    Fault("xid79", "xid", 347, 1),
    Fault("hang", "hang", 603, 1),
    Fault("straggler", "straggler", 700, 0, until=760),
    Fault("ckpt-write", "save_failure", 900, 0),
    Fault("lost-node", "lost_node", 1106, 0),
    Fault("preempt-2", "preemption", 1290, 0),
)
GOODPUT_FLOOR = 0.90
DETECT_S = {"preemption": 0, "xid": h.XID_DETECT_S, "lost_node": h.PEER_LOSS_DETECT_S}


@dataclass
class Ledger:
    """Virtual seconds by cause (a fault's id, ``startup``, ``checkpoint``, ``productive``) and kind of cost."""

    seconds: dict[str, dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )
    redone: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, cause: str, what: str, s: float) -> None:
        self.seconds[cause][what] += s

    @property
    def wall(self) -> float:
        return sum(sum(v.values()) for v in self.seconds.values())

    @property
    def productive(self) -> float:
        return self.seconds["productive"]["step"]

    def lost(self, cause: str) -> float:
        return sum(self.seconds[cause].values()) if cause in self.seconds else 0.0


def ledger(c: Campaign) -> Ledger:
    """Charge the virtual clock from the step records of global rank 0 (pod 0's stdout) of every attempt."""
    led, high = Ledger(), 0
    slow = [f for f in c.faults if f.kind == "straggler"]
    for at in c.attempts:
        cause = c.attempts[at.index - 1].ended_by if at.index else "startup"
        if at.index:
            kind = c.outcomes[cause].fault.kind
            led.add(cause, "detection", DETECT_S[kind])
            led.add(cause, "restart", h.RESTART_S)
            led.add(cause, "provisioning", h.PROVISION_S if at.provisioned else 0)
        in_pod = iter(at.in_pod)
        for e in at.procs[0].events():
            ev = e["event"]
            if ev == "start":
                if e["restart_count"] > 0:
                    cause = next(in_pod)
                    led.add(cause, "detection", h.HANG_DETECT_S)
                led.add(cause, "startup", h.STARTUP_S)
            elif ev == "step_done":
                k = e["step"]
                if k > high:
                    led.add("productive", "step", h.STEP_S)
                    high = k
                else:
                    led.add(cause, "redone", h.STEP_S)
                    led.redone[cause] += 1
                for f in slow:
                    if f.step < k <= f.until:
                        led.add(f.id, "slowdown", (h.STRAGGLER_SLOWDOWN - 1) * h.STEP_S)
            elif ev == "checkpoint_failed":  # the save's time bought nothing: the fault that broke it pays
                broke = [f.id for f in c.faults if f.kind == "save_failure" and f.step == e["ckpt_step"]]
                led.add("checkpoint", "save", -h.CKPT_SAVE_S)
                led.add(broke[0] if broke else "checkpoint", "failed save", h.CKPT_SAVE_S)
            elif ev == "checkpoint_save_started":
                periodic = e["ckpt_step"] % h.CKPT_INTERVAL_STEPS == 0 or e["ckpt_step"] == c.steps
                led.add("checkpoint" if periodic else at.ended_by, "save", h.CKPT_SAVE_S)
    assert high == c.steps, f"rank 0 reached step {high} of {c.steps}"
    return led


def table(c: Campaign, led: Ledger) -> str:
    rows = [
        "| fault | kind | at step | node | restart | decision | exit codes | steps redone | virtual min lost |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in c.faults:
        o = c.outcomes[f.id]
        restart = o.level if o.level == "none" else f"{o.level}, {o.counted}"
        decision = o.rule or o.detail
        rows.append(
            f"| {f.id} | {f.kind} | {f.step} | {o.node} | {restart} | {decision} | "
            f"{','.join(map(str, o.codes)) or '-'} | {led.redone.get(f.id, 0)} | {led.lost(f.id) / 60:.1f} |"
        )
    in_pod = sum(o.level == "in-pod" for o in c.outcomes.values())
    counted, total = c.state.restarts_count_towards_max, c.state.restarts
    rows += [
        "",
        f"goodput {led.productive / led.wall:.1%}: productive {led.productive / 3600:.2f} h of "
        f"{led.wall / 3600:.2f} h virtual wall time ({c.steps} steps of {h.STEP_S} s, a checkpoint every "
        f"{h.CKPT_INTERVAL_STEPS} steps)",
        f"JobSet restarts: {total} ({counted} counted, {total - counted} uncounted); in-pod restarts (torchrun "
        f"--max-restarts, counted there): {in_pod}; steps redone: {sum(led.redone.values())}",
        f"overhead: startup {led.lost('startup') / 60:.1f} min, checkpoint saves {led.lost('checkpoint') / 60:.1f} "
        f"min; placements checked {c.placements_checked}, none on a quarantined node",
    ]
    return "\n".join(rows)


def check(c: Campaign, led: Ledger, reference_ckpt: Path, goodput_floor: float | None) -> None:
    """The campaign's assertions (also the integration test's)."""
    for f in c.faults:
        o = c.outcomes[f.id]
        assert (o.level, o.counted) == EXPECTED[f.kind], (
            f"{f.id}: {o.level}/{o.counted}, expected {EXPECTED[f.kind]}"
        )
        if o.level != "none":  # the simulator's decision (or torchrun's) agrees with the exit contract
            assert o.counted == o.contract_kind(), (
                f"{f.id}: {o.counted}, the contract says {o.contract_kind()}"
            )
    if any(f.kind == "xid" for f in c.faults):
        assert c.quarantined_seen > 0, "no placement happened while a node was quarantined"
    assert_bitwise(final_state(c.ckpt, c.steps), final_state(reference_ckpt, c.steps))
    if goodput_floor is not None:
        assert led.productive / led.wall >= goodput_floor, f"goodput {led.productive / led.wall:.1%}"


def run(
    work: Path, steps: int, faults: tuple[Fault, ...], goodput_floor: float | None
) -> tuple[Campaign, Ledger]:
    js, pools = jobset(), platform_outputs("aws-dev")["nodePools"]  # the platform jobset() is built for
    ref = Campaign(work / "reference", steps, (), js, pools)
    ref.run()
    c = Campaign(work / "campaign", steps, faults, js, pools)
    c.run()
    led = ledger(c)
    check(c, led, ref.ckpt, goodput_floor)
    return c, led


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.campaign.day", description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, help="keep the runs' logs and checkpoints here")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trainplane-campaign-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        try:
            c, led = run(work, DAY_STEPS, DAY, GOODPUT_FLOOR)
        except AssertionError as e:
            print(f"campaign: FAILED: {e}", file=sys.stderr)
            return 1
    print(table(c, led))
    print(
        f"campaign: passed in {time.monotonic() - t0:.0f} s real: final weights equal the uninterrupted run's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
