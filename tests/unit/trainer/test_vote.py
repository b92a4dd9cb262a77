"""trainer/vote.py: which steps the ranks agree on, and what each agreed step reports."""

from __future__ import annotations

import torch

from trainer.vote import MAX_STEPS_BETWEEN_VOTES, FinishedStep, StepVote


def _vote(every: int | None, last_step: int, signal_at: int | None = None) -> tuple[StepVote, list[int]]:
    calls: list[int] = []  # the length of each all-reduced vector: one per vote
    state = {"step": -1}
    vote = StepVote(
        rank=0,
        world_size=1,
        every=every,
        last_step=last_step,
        signalled=lambda: signal_at is not None and state["step"] >= signal_at,
        compute_seconds=lambda marks: marks["compute"],
        all_reduce=lambda t: calls.append(t.numel()),
    )
    vote.state = state  # type: ignore[attr-defined]
    return vote, calls


def _finished(step: int, seconds: float = 0.5) -> FinishedStep:
    ended = 100.0 + seconds * (step + 1)
    return FinishedStep(torch.tensor(float(step)), {"compute": 0.25}, seconds, ended, 1e-3 * step, [step])


def test_every_n_steps_votes_at_the_first_step_then_every_n_and_always_at_the_last() -> None:
    vote, calls = _vote(every=4, last_step=9)
    voted = []
    for step in range(10):
        vote.state["step"] = step  # type: ignore[attr-defined]
        agreed = vote.add(step, _finished(step))
        if agreed:
            voted.append(step)
            # every step since the last vote, in order, each with its own loss and end time
            assert [r.loss for r in agreed] == [float(s) for s in range(step - len(agreed) + 1, step + 1)]
            assert [r.ended for r in agreed] == [
                _finished(s).ended for s in range(step - len(agreed) + 1, step + 1)
            ]
            assert all(r.rank_seconds == [0.25] for r in agreed)
            assert [r.lr for r in agreed] == [
                _finished(s).lr for s in range(step - len(agreed) + 1, step + 1)
            ]
    assert voted == [0, 4, 8, 9]
    assert len(calls) == 4


def test_a_signal_is_acted_on_at_the_next_vote_and_only_the_newest_step_preempts() -> None:
    vote, _ = _vote(every=4, last_step=20, signal_at=2)
    results = []
    for step in range(6):
        vote.state["step"] = step  # type: ignore[attr-defined]
        results.append((step, vote.add(step, _finished(step))))
    agreed_at_4 = dict(results)[4]
    assert [r.preempt for r in agreed_at_4] == [False, False, False, True]
    assert not any(r.preempt for _, rs in results if _ != 4 for r in rs)


def test_the_measured_schedule_aims_at_about_a_second_between_votes() -> None:
    vote, _ = _vote(every=None, last_step=1000)
    voted = [s for s in range(30) if vote.add(s, _finished(s, seconds=0.1))]
    # 0.1 s steps: after the first vote every 10 steps
    assert voted == [0, 10, 20]
    slow, _ = _vote(every=None, last_step=1000)
    assert [s for s in range(4) if slow.add(s, _finished(s, seconds=3.0))] == [0, 1, 2, 3]
    assert vote.steps_until_next(1e-9) == MAX_STEPS_BETWEEN_VOTES
