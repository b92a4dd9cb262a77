"""Torn checkpoints are skipped and cleaned, damaged ones kept aside, retention keeps K, a second signal
during the save is safe."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from tests.helpers.trainer import (
    SAVED_16,
    assert_bitwise,
    copy_checkpoints,
    final_state,
    finished,
    launch,
    run_args,
    single,
)
from trainer.checkpoint import ENV_FAULT_COMMIT_DELAY, CheckpointStore
from trainer.goodput import HIGH_WATER_FILE

STEPS = 24


def test_torn_checkpoints_are_skipped_and_cleaned(tmp_path, corpus, single_run):
    full = single_run(*SAVED_16)
    ckpt = copy_checkpoints(full, tmp_path)
    want = final_state(ckpt, 16)
    # step 16: DCP wrote everything but the manifest never came (killed in the commit window)
    (ckpt / "step-16" / "manifest.json").unlink()
    # step 12: committed, then a shard lost its tail (a partial copy, a full disk)
    shard = max((ckpt / "step-12").glob("*.distcp"), key=lambda f: f.stat().st_size)
    shard_size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:-100])
    store = CheckpointStore(str(ckpt), keep=5, config_hash="x")
    assert store.committed_steps() == [4, 8]

    again = single(
        tmp_path,
        "again",
        corpus,
        "--steps",
        "16",
        "--checkpoint.interval-steps",
        "4",
        "--checkpoint.keep",
        "5",
    )
    assert again.wait() == 0, again.tail()
    # never committed: skipped and removed; committed then damaged: skipped and moved aside, never deleted
    assert {e["ckpt_step"] for e in again.events("checkpoint_torn_skipped")} == {16}
    assert [e["ckpt_step"] for e in again.events("checkpoint_corrupt_skipped")] == [12]
    assert [e["ckpt_step"] for e in again.events("resumed")] == [8]
    assert {e["ckpt_step"] for e in again.events("checkpoint_removed") if e["reason"] == "torn"} == {16}
    [kept] = ckpt.glob("damaged-step-12-*")
    assert (kept / shard.name).stat().st_size == shard_size - 100
    assert_bitwise(final_state(ckpt, 16), want)


@pytest.mark.parametrize("keep", [2, 3])
def test_retention_keeps_newest_k(tmp_path, corpus, keep):
    ckpt = tmp_path / "ckpt"
    p = single(
        tmp_path,
        "run",
        corpus,
        "--steps",
        "12",
        "--checkpoint.interval-steps",
        "2",
        "--checkpoint.keep",
        str(keep),
        "--checkpoint.async-save",
        "true",
    )
    assert p.wait() == 0, p.tail()
    # the root holds the checkpoints and the goodput high-water mark (trainer/goodput.py), nothing else
    assert sorted(int(d.name[5:]) for d in ckpt.glob("step-*")) == [12 - 2 * i for i in range(keep)][::-1]
    assert {d.name for d in ckpt.iterdir() if not d.name.startswith("step-")} == {HIGH_WATER_FILE}
    assert CheckpointStore(str(ckpt), keep=keep, config_hash="x").committed_steps() == sorted(
        12 - 2 * i for i in range(keep)
    )


@pytest.mark.slow
def test_second_sigterm_during_commit_is_ignored_and_checkpoint_is_trusted(tmp_path, corpus, reference):
    ref = reference(2, STEPS)
    args = run_args(corpus, tmp_path, "--checkpoint.interval-steps", "1000", steps=STEPS)
    run = launch(tmp_path, "run", 2, args, extra_env={ENV_FAULT_COMMIT_DELAY: "2"})
    run.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 5)
    run.signal(signal.SIGTERM)
    run.wait_for(lambda e: e["event"] == "fault_commit_delay")
    # the second signal reaches the launcher and every worker while rank 0 is inside the commit window
    run.signal(signal.SIGTERM)
    for e in run.events("start"):
        Path(f"/proc/{e['pid']}").exists() and __import__("os").kill(e["pid"], signal.SIGTERM)
    assert run.wait() == 143, run.tail()
    step = run.events("preempted_exit")[0]["ckpt_step"]
    assert all(e["signals_received"] >= 1 for e in run.events("preemption_agreed"))
    assert CheckpointStore(str(tmp_path / "ckpt"), keep=3, config_hash="x").manifest(step) is not None

    rest = finished(tmp_path, "rest", 2, args)
    assert [e["ckpt_step"] for e in rest.events("resumed")] == [step, step]
    assert_bitwise(final_state(tmp_path / "ckpt", STEPS), final_state(ref / "ckpt", STEPS))


@pytest.mark.slow
def test_sigkill_inside_commit_window_leaves_an_untrusted_checkpoint(tmp_path, corpus, reference):
    ref = reference(2, STEPS)
    args = run_args(corpus, tmp_path, "--checkpoint.interval-steps", "3", steps=STEPS)
    # grace of 1 s, commit takes 5 s: the agent SIGKILLs the workers between DCP and the manifest
    run = launch(
        tmp_path,
        "run",
        2,
        args,
        run_opts=["--shutdown-timeout", "1"],
        extra_env={ENV_FAULT_COMMIT_DELAY: "5"},
    )
    run.wait_for(lambda e: e["event"] == "checkpoint_committed" and e["ckpt_step"] >= 6)
    run.signal(signal.SIGTERM)
    assert run.wait() == 1, run.tail()  # not 143: nothing was committed for the preemption
    delayed = run.events("fault_commit_delay")
    assert len(delayed) == 1
    torn = delayed[0]["ckpt_step"]
    assert (tmp_path / "ckpt" / f"step-{torn}" / ".metadata").exists()
    assert not (tmp_path / "ckpt" / f"step-{torn}" / "manifest.json").exists()

    rest = finished(tmp_path, "rest", 2, args)
    assert torn in {e["ckpt_step"] for e in rest.events("checkpoint_torn_skipped")}
    assert all(e["ckpt_step"] < torn for e in rest.events("resumed"))
    assert_bitwise(final_state(tmp_path / "ckpt", STEPS), final_state(ref / "ckpt", STEPS))


def test_store_verification_rejects_bad_manifests(tmp_path):
    d = tmp_path / "step-3"
    d.mkdir()
    (d / ".metadata").write_bytes(b"x" * 10)
    store = CheckpointStore(str(tmp_path), keep=2, config_hash="h")
    assert store.manifest(3) is None and store.inspect(3)[0] == "torn"  # no manifest: never committed
    (d / "manifest.json").write_text("{not json")
    assert store.manifest(3) is None and store.inspect(3)[0] == "damaged"  # committed, then broken
    (d / "manifest.json").write_text('{"step": 3, "files": {".metadata": 11}}')
    assert store.manifest(3) is None and store.inspect(3)[:1] == ("damaged",)  # size mismatch
    (d / "manifest.json").write_text('{"step": 4, "files": {".metadata": 10}}')
    assert store.manifest(3) is None  # manifest of another step (a copied directory)
    (d / "manifest.json").write_text('{"step": 3, "files": {".metadata": 10}}')
    assert store.manifest(3) is not None and store.inspect(3)[0] == "ok"
    (d / "skipped.json").write_text("{}")  # an earlier resume found it unloadable and could not move it
    assert store.manifest(3) is None
    shutil.rmtree(d)
    assert store.all_steps() == []


def test_cpu_stager_copies_are_independent_and_buffers_reused():
    import torch

    from trainer.checkpoint import _CpuStager

    a = torch.randn(1000, 300)
    step = torch.tensor(3.0)
    sd = {
        "model": {"a": a, "cols": a[:, 5:7], "tied": a},
        "optim": {"state": {0: {"step": step}}, "param_groups": [{"lr": 0.1, "params": [0]}]},
        "train": {"rng": b"xx", "step": 7},
    }
    assert _CpuStager.handles(sd)
    assert not _CpuStager.handles({"m": torch.randn(2).to_sparse()})
    assert not _CpuStager.handles({"m": object()})
    stager = _CpuStager(threads=2)
    try:
        out = stager.stage(sd)
        assert torch.equal(out["model"]["a"], a)
        assert torch.equal(out["model"]["cols"], a[:, 5:7]) and out["model"]["cols"].stride() == (300, 1)
        ptr = out["model"]["a"].untyped_storage().data_ptr()
        assert ptr != a.untyped_storage().data_ptr()
        assert out["model"]["tied"].untyped_storage().data_ptr() == ptr  # shared storage stays shared
        assert out["optim"]["param_groups"] == sd["optim"]["param_groups"] and out["train"] == sd["train"]
        a.add_(1)
        step.add_(1)  # training goes on: the staged copy must not change
        assert not torch.equal(out["model"]["a"], a) and out["optim"]["state"][0]["step"].item() == 3.0
        again = stager.stage(sd)
        assert torch.equal(again["model"]["a"], a) and again["optim"]["state"][0]["step"].item() == 4.0
        assert again["model"]["a"].untyped_storage().data_ptr() == ptr  # warm buffer reused
    finally:
        stager.close()


def test_a_stager_closed_by_dcp_after_a_save_is_replaced_for_the_next(tmp_path):
    # torch 2.11's DefaultStager closes its inner stager at the end of every stage: reused, the second
    # GPU save failed (KeyError: <class 'type'>, seen on an H100) and the run ended with 74.
    import torch

    from trainer.checkpoint import CheckpointStore

    store = CheckpointStore.__new__(CheckpointStore)
    store._stagers = None
    _, first = store._stager_pair()
    state = {"w": torch.arange(4.0), "kind": torch.Tensor, "step": 3}
    first.stage(state)
    assert store._stager_pair()[1] is first  # still usable: reused (warm buffers)
    first._state_dict_stager.close()  # what torch 2.11 does at the end of each stage
    _, second = store._stager_pair()
    assert second is not first
    staged = second.stage(state)
    assert torch.equal(staged["w"], state["w"]) and staged["kind"] is torch.Tensor
    second.close()


def _store(tmp_path: Path, logged: list[tuple[str, dict]]) -> CheckpointStore:
    return CheckpointStore(
        str(tmp_path / "ckpt"), keep=5, config_hash="h", log=lambda ev, **kw: logged.append((ev, kw))
    )


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_the_blocking_figure_counts_the_wait_for_the_previous_save(tmp_path, monkeypatch):
    """Save 2 waits for save 1's slow commit: its blocking figure holds that wait and what the caller had
    already waited (``blocked``: the outcome collective), not only the save call."""
    import time

    import torch

    logged: list[tuple[str, dict]] = []
    store = _store(tmp_path, logged)
    commit = store._commit

    def slow_commit(step: int, *a, **kw):
        if step == 1:
            time.sleep(0.6)
        return commit(step, *a, **kw)

    monkeypatch.setattr(store, "_commit", slow_commit)
    state = {"model": {"w": torch.randn(64, 64)}, "train": {"step": 1}}
    try:
        assert store.save(state, 1, asynchronous=True)
        assert store.save(state, 2, asynchronous=True, blocked=0.25)
        store.wait()
    finally:
        store.close()
    started = {kw["ckpt_step"]: kw for ev, kw in logged if ev == "checkpoint_save_started"}
    assert started[2]["blocking_s"] >= 0.25 + 0.5, started
    committed = {kw["ckpt_step"]: kw for ev, kw in logged if ev == "checkpoint_committed"}
    assert committed[2]["blocking_s"] >= 0.75 and store.last_result is not None
    assert store.last_result.step == 2 and store.last_result.blocking_seconds >= 0.75
    assert store.committed_steps() == [1, 2]


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_background_staging_waits_before_the_state_changes_and_counts_the_wait(tmp_path, monkeypatch):
    """TRAINPLANE_CKPT_STAGING=background: DCP's DefaultStager copies in its own thread (the GPU path, on
    CPU); ``wait_staged`` (the trainer calls it before optimizer.step) waits for the copy, the wait is in
    the save's blocking figure, and what is written is the state at the save, not the state changed after."""
    import time

    import torch
    import torch.distributed.checkpoint as dcp

    from trainer.checkpoint.writers import make_reader
    from trainer.contract import ENV_CKPT_STAGING

    monkeypatch.setenv(ENV_CKPT_STAGING, "background")
    logged: list[tuple[str, dict]] = []
    store = _store(tmp_path, logged)
    _, stager = store._stager_pair()
    assert stager.background
    stage = stager._stage

    def slow_stage(sd, **kw):
        time.sleep(0.4)
        return stage(sd, **kw)

    monkeypatch.setattr(stager, "_stage", slow_stage)
    w = torch.randn(64, 64)
    saved = w.clone()
    try:
        assert store.save({"model": {"w": w}, "train": {"step": 1}}, 1, asynchronous=True)
        (started,) = [kw for ev, kw in logged if ev == "checkpoint_save_started"]
        assert started["staging"] == "background" and started["blocking_s"] < 0.4
        assert store.wait_staged() >= 0.3
        w.add_(1.0)  # the optimizer step: after the copy, it must not reach the checkpoint
        store.wait()
    finally:
        store.close()
    assert store.last_result is not None and store.last_result.blocking_seconds >= 0.3
    back = {"model": {"w": torch.zeros(64, 64)}}
    dcp.load(back, storage_reader=make_reader(str(tmp_path / "ckpt" / "step-1"), local=True))
    assert torch.equal(back["model"]["w"], saved)
