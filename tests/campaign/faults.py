"""The campaign's model: the tests' bigram plug-in (tests/integration/trainer/plugins.py) with the faults of
its ``Sleepy`` variant (a slow rank, a hung rank) and a hold, armed by a plan file instead of fixed env.

Why not ``Sleepy`` itself: its ``HANG_AT``/``SLOW_RANK`` are read from the environment, which a worker keeps
for its whole life, and count forward calls per process, so after torchrun's in-pod restart (the job's
``--max-restarts=3``) the same hang fires again in every incarnation (seen: 4 hangs, then exit 124). A day
needs each fault once, at a chosen step of a long run. The plan (``CAMPAIGN_PLAN``, JSON) names faults by
global rank and step (the number of steps done when the step starts); a fault that fired leaves
``<id>.fired`` next to the plan and never fires again, so a step redone after a restart runs clean:

- ``hold``: write ``<id>.held`` and wait for ``<id>.release`` (the harness signals or kills meanwhile, so the
  fault lands at exactly this step whatever the machine's speed);
- ``hang``: sleep for an hour (the trainer's watchdog ends the process with 124);
- ``slow``: sleep ``seconds`` in every forward of steps ``step`` to ``until`` (a straggling GPU).

The step is counted, not read: the newest committed checkpoint when the first forward runs (the one this
incarnation resumed from: no save of its own has started yet) plus forward calls / micro-batches per step.
The weights are those of ``Bigram``: a run with an empty plan is the tests' bigram run, bit for bit.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from tests.integration.trainer.plugins import Bigram
from trainer.config import TrainConfig

ENV_PLAN = "CAMPAIGN_PLAN"
HOLD_LIMIT_S = 300.0  # a hold never outlives a harness that died


def newest_committed(root: str | Path) -> int:
    """The highest step-N under ``root`` with a manifest (0 when none): what the trainer resumes from."""
    steps = [int(p.parent.name[5:]) for p in Path(root).glob("step-*/manifest.json")]
    return max(steps, default=0)


class Faulty(Bigram):
    def __init__(self, vocab: int, plan: dict[str, Any], plan_dir: Path | None) -> None:
        super().__init__(vocab)
        self.plan, self.dir = plan, plan_dir
        self.rank = int(os.environ.get("RANK", "0"))
        self.faults = [f for f in plan.get("faults", []) if f["rank"] == self.rank]
        self.calls, self.base = 0, -1

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        if self.faults:
            self._inject()
        return super().forward(idx)

    def _inject(self) -> None:
        if self.base < 0:
            self.base = newest_committed(self.plan["ckpt"])
        accum = int(self.plan["accum"])
        first, step = self.calls % accum == 0, self.base + self.calls // accum
        self.calls += 1
        for f in self.faults:
            if f["kind"] == "slow" and f["step"] <= step < f["until"]:
                time.sleep(float(f["seconds"]))
            elif first and f["kind"] in ("hold", "hang") and f["step"] == step and self._arm(f["id"]):
                if f["kind"] == "hang":
                    time.sleep(3600)
                self._hold(f["id"])

    def _arm(self, fid: str) -> bool:
        assert self.dir is not None
        try:
            (self.dir / f"{fid}.fired").touch(exist_ok=False)
        except FileExistsError:
            return False
        return True

    def _hold(self, fid: str) -> None:
        assert self.dir is not None
        (self.dir / f"{fid}.held").touch()
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not (self.dir / f"{fid}.release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)


def faulty(cfg: TrainConfig) -> Faulty:
    path = os.environ.get(ENV_PLAN)
    plan = json.loads(Path(path).read_text()) if path else {}
    return Faulty(int(cfg.model_args.get("vocab_size", 16)), plan, Path(path).parent if path else None)
