"""What a restart cost, from the trainer's Prometheus series (pure).

`trainplane_step` is the last completed optimizer step of the job's rank 0 (trainer/metrics.py); at start
the trainer sets it to the step it resumed from (trainer/train.py), so around a restart at time t:

- high-water: the highest step reached before t, first reached at `last progress`;
- resumed: the lowest step after t (the step of the checkpoint the restarted job loaded);
- steps lost = high-water - resumed: steps computed again (the trainer counts the same in
  `trainplane_steps_redone_total`, contract/recovery.py STEPS_REDONE, used when the
  step series has no sample after the restart);
- time lost = from the last progress before t until the step passes the high-water again: the time with
  no step progress plus the time the lost steps took to redo (until the next restart, or the last sample
  when the job has not caught up yet);
- GPU-hours lost = time lost x the job's GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Series:
    """Samples (unix seconds, value) of the job's `max(trainplane_step)` and `max(trainplane_steps_redone_total)`."""

    steps: list[tuple[float, float]] = field(default_factory=list)
    redone: list[tuple[float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Loss:
    steps: int | None = None
    seconds: float | None = None
    high_water: int | None = None
    resumed: int | None = None
    caught_up: bool = True  # False: the job had not passed the high-water again by the last sample
    note: str | None = None  # why a figure is missing

    def gpu_hours(self, gpus: int) -> float | None:
        return None if self.seconds is None else round(self.seconds * gpus / 3600, 2)


def restart_loss(series: Series | None, t: float | None, until: float | None) -> Loss:
    """The loss of a restart at `t`, looking at samples up to the next restart at `until` (None: the end)."""
    if series is None:
        return Loss(note="no Prometheus")
    if t is None:
        return Loss(note="no restart time")
    before = [(ts, v) for ts, v in series.steps if ts <= t]
    after = [(ts, v) for ts, v in series.steps if ts > t and (until is None or ts <= until)]
    if not before:
        return Loss(note="no trainplane_step sample before the restart")
    high = max(v for _, v in before)
    last_progress = min(ts for ts, v in before if v >= high)
    if not after:
        redone = [v for ts, v in series.redone if ts > t and (until is None or ts <= until)]
        if redone:
            return Loss(
                steps=int(max(redone)), high_water=int(high), note="no trainplane_step sample after it"
            )
        return Loss(high_water=int(high), note="no trainplane_step sample after the restart")
    low_at = min(range(len(after)), key=lambda i: (after[i][1], i))
    resumed = after[low_at][1]
    lost = max(0.0, high - resumed)
    # Back past the high-water: equal once steps were redone, beyond it when none were lost.
    caught = next((ts for ts, v in after[low_at:] if (v >= high if lost else v > high)), None)
    end = caught if caught is not None else after[-1][0]
    return Loss(
        steps=int(lost),
        seconds=max(0.0, end - last_progress),
        high_water=int(high),
        resumed=int(resumed),
        caught_up=caught is not None,
    )
