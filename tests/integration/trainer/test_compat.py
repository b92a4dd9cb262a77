"""Checkpoints written by earlier trainer code still resume, and the run continues as that code would have.

`fixtures/ckpt-f01cf3b/` was written by the trainer at commit f01cf3b (before the Trainer was reshaped
around a Stateful train state and the checkpoint package split), single process, with exactly ``ARGS``
below: ``step-3`` is the periodic (async) save, ``step-6`` the final one. Resuming ``step-3`` with today's
code must end bitwise equal to that code's own ``step-6``: the on-disk layout (``model``, ``optim``,
``sched``, ``train.{step,samples,world_size,preemptions,resumes,rng}``), the manifest (format 2, and
format 1 as written before checksums existed) and the training trajectory are all unchanged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.trainer import Proc, assert_bitwise, final_state

FIXTURE = Path(__file__).parent / "fixtures" / "ckpt-f01cf3b"
ARGS = [
    *("--model", "tiny", "--model-args", "{n_layer: 1, d_model: 8, n_head: 2}"),
    *("--seq-len", "16", "--global-batch-size", "4", "--micro-batch-size", "2", "--steps", "6"),
    *("--threads", "1", "--dropout", "0.1", "--warmup-steps", "2"),
    *("--checkpoint.interval-steps", "3", "--checkpoint.keep", "2", "--checkpoint.thread-count", "1"),
]


def _as_format_1(step_dir: Path) -> None:
    """Rewrite a manifest the way the trainer wrote it before checksums and recorded keys (format 1)."""
    path = step_dir / "manifest.json"
    man = json.loads(path.read_text())
    keep = ("step", "world_size", "config_hash", "bytes", "files", "time")
    path.write_text(json.dumps({**{k: man[k] for k in keep}, "format": 1}, sort_keys=True))


@pytest.mark.parametrize("fmt", [2, 1])
def test_checkpoint_from_before_the_reshape_resumes_bitwise(tmp_path, fmt):
    ckpt, ref = tmp_path / "ckpt", tmp_path / "ref"
    shutil.copytree(FIXTURE / "step-3", ckpt / "step-3")
    shutil.copytree(FIXTURE / "step-6", ref / "step-6")
    if fmt == 1:
        _as_format_1(ckpt / "step-3")

    run = Proc(["-m", "trainer", *ARGS, "--checkpoint.uri", str(ckpt)], tmp_path, f"resume-f{fmt}")
    assert run.wait() == 0, run.tail()
    (resumed,) = run.events("resumed")
    assert resumed["ckpt_step"] == 3 and resumed["samples"] == 12
    assert resumed["verified"] == ("crc32" if fmt == 2 else "sizes")

    got, want = final_state(ckpt, 6), final_state(ref, 6)
    assert_bitwise(got, want)
    assert got["sched"] == want["sched"]
    for key in ("step", "samples", "world_size", "preemptions"):
        assert got["train"][key] == want["train"][key], key
    assert got["train"]["resumes"] == want["train"]["resumes"] + 1
