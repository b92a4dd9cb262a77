"""Helpers for trainer tests: real processes (torchrun via trainer.launch), real signals, real files.

The fixtures that start services (moto_server, the GCS emulator) and cached reference runs are in
tests/integration/trainer/conftest.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tests.helpers import procs
from tests.helpers.warm import Starter, eligible

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
# Generous ceilings so a loaded CI machine never flakes; tests do not assert on time.
RUN_TIMEOUT = 240

# Trajectory-defining settings shared by the reference and interrupted runs (tiny model, bytes corpus).
# gcsfs reads this once, at import: in this process (tests that open the emulator's bucket themselves) its
# Storage Control gRPC lookups against the emulator time out and retry for minutes (measured: 4 of the
# 5 minutes test_gcs took). Workers get it through the gcs_emulator fixture's env.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

BASE = [
    "--model",
    "tiny",
    "--seq-len",
    "32",
    "--global-batch-size",
    "8",
    "--micro-batch-size",
    "2",
    "--threads",
    "1",
    "--log-interval",
    "1",
    "--warmup-steps",
    "4",
    "--lr",
    "0.003",
]


# A user's own model and dataset (tests/integration/trainer/plugins.py) through the plug-in interface.
PLUGIN = [
    "--model",
    "tests.integration.trainer.plugins:bigram",
    "--dataset",
    "tests.integration.trainer.plugins:counting",
    "--seq-len",
    "16",
    "--global-batch-size",
    "8",
    "--micro-batch-size",
    "2",
    "--threads",
    "1",
    "--log-interval",
    "1",
    "--lr",
    "0.3",
    "--warmup-steps",
    "0",
]

# single()'s flags for 16 steps with a checkpoint every 4, all kept: the session makes this run once
# (tests/integration/trainer/conftest.py single_run) and the tests that damage or resume its checkpoints
# (test_checkpoint.py, test_damage.py) each work on their own copy (copy_checkpoints).
SAVED_16 = ("--steps", "16", "--checkpoint.interval-steps", "4", "--checkpoint.keep", "5")

# Trainer flags for a run that only ends when a test stops it: one thread per worker, an event per step.
ENDLESS = ["--steps", "100000", "--threads", "1", "--log-interval", "1"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = f"{ROOT}{os.pathsep}{e.get('PYTHONPATH', '')}"
    e.pop("TRAINPLANE_CONFIG", None)
    e.update({"OMP_NUM_THREADS": "1", **extra})
    return e


def events(out: Path, name: str | None = None) -> list[dict[str, Any]]:
    """The JSON events in a process's stdout file `out` (all, or those called `name`)."""
    evs = []
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if name is None or ev.get("event") == name:
                evs.append(ev)
    return evs


# Warm starts (tests/helpers/warm.py): a `python -m trainer...` process forked from a starter that has
# imported torch, unless its start needs what a fork cannot give (warm.eligible) or the test says warm=False.
# TRAINPLANE_TEST_COLD=1 makes every start cold, as before, to rule the starter out when a test fails.
WARM = os.environ.get("TRAINPLANE_TEST_COLD", "") in ("", "0")
_starter: list[Starter] = []


def starter() -> Starter:
    """This test process's starter (one per xdist worker), made on first use."""
    if not _starter:
        _starter.append(Starter(Path(tempfile.mkdtemp(prefix="tp-warm-")), env(), procs.spawn))
    return _starter[0]


class Proc:
    """A trainer or launcher process whose stdout (JSON events) and stderr go to files (started warm when it
    can be: `starter`)."""

    def __init__(
        self,
        args: list[str],
        workdir: Path,
        name: str,
        extra_env: dict[str, str] | None = None,
        new_session: bool = True,
        warm: bool = True,
    ) -> None:
        self.out = workdir / f"{name}.out"
        self.err = workdir / f"{name}.err"
        self.args = args
        child_env = env(**(extra_env or {}))
        with open(self.out, "wb") as o, open(self.err, "wb") as e, open(os.devnull, "rb") as i:
            self.p: Any
            if (
                warm
                and WARM
                and eligible(args, child_env, starter().env, [i.fileno(), o.fileno(), e.fileno()])
            ):
                self.p = procs.adopt(starter().start(args, workdir, child_env, [i, o, e]))
            else:
                self.p = procs.spawn(
                    [PY, *args], cwd=workdir, stdout=o, stderr=e, env=child_env, start_new_session=new_session
                )

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        return events(self.out, name)

    def wait_for(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = RUN_TIMEOUT
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in self.events():
                if pred(ev):
                    return ev
            if self.p.poll() is not None:
                raise AssertionError(f"process exited {self.p.returncode} before the event; {self.tail()}")
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for event; {self.tail()}")

    def wait(self, timeout: float = RUN_TIMEOUT) -> int:
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_tree()
            raise

    def signal(self, sig: int) -> None:
        self.p.send_signal(sig)

    def kill_tree(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGKILL)  # its own session: workers and loaders go too
        except ProcessLookupError:
            pass

    def tail(self) -> str:
        return f"stdout: {self.out.read_text()[-3000:]}\nstderr: {self.err.read_text()[-3000:]}"


def launch(
    workdir: Path,
    name: str,
    nproc: int,
    trainer_args: list[str],
    run_opts: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> Proc:
    opts = [
        "--nproc-per-node",
        str(nproc),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{free_port()}",
        "--rdzv-conf",
        "last_call_timeout=1",
        *(run_opts or []),
    ]
    return Proc(["-m", "trainer.launch", *opts, "--", *trainer_args], workdir, name, extra_env)


def run_args(
    corpus: Path, d: Path, *extra: str, steps: int | None = None, samples: bool = False
) -> list[str]:
    """The trainer's arguments for a run of BASE on the bytes `corpus`, its checkpoints in d/ckpt (and with
    `samples`, the dataset indices of each step in d/samples; samples_by_step reads them); `extra` last."""
    return [
        *BASE,
        "--dataset",
        "bytes",
        "--data-paths",
        f"[{corpus}]",
        *(["--steps", str(steps)] if steps is not None else []),
        "--checkpoint.uri",
        str(d / "ckpt"),
        *(["--record-samples", str(d / "samples")] if samples else []),
        *extra,
    ]


def single(d: Path, name: str, corpus: Path, *extra: str) -> Proc:
    """One trainer process without the launcher (`python -m trainer`), synchronous saves to d/ckpt."""
    return Proc(["-m", "trainer", *run_args(corpus, d, "--checkpoint.async-save", "false", *extra)], d, name)


def finished(d: Path, name: str, nproc: int, args: list[str], **kw: Any) -> Proc:
    """A launcher run to its end: exit 0 (the tail of its output if not)."""
    p = launch(d, name, nproc, args, **kw)
    assert p.wait() == 0, p.tail()
    return p


def preempted(d: Path, name: str, nproc: int, args: list[str], at_step: int, **kw: Any) -> Proc:
    """A launcher run SIGTERMed once a rank has done `at_step` steps: it saves and exits 143."""
    p = launch(d, name, nproc, args, **kw)
    p.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= at_step)
    p.signal(signal.SIGTERM)
    assert p.wait() == 143, p.tail()
    return p


def copy_checkpoints(run: Path, dest: Path, steps: list[int] | None = None) -> Path:
    """Copy run/ckpt to dest/ckpt: all of it, or only the checkpoints of `steps`. Returns dest/ckpt."""
    if steps is None:
        shutil.copytree(run / "ckpt", dest / "ckpt")
    for s in steps or []:
        shutil.copytree(run / "ckpt" / f"step-{s}", dest / "ckpt" / f"step-{s}")
    return dest / "ckpt"


def final_state(ckpt_root: Path, step: int) -> dict[str, Any]:
    """Load a committed checkpoint into one plain dict (DCP -> torch.save), checking its manifest."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    d = ckpt_root / f"step-{step}"
    man = json.loads((d / "manifest.json").read_text())
    assert man["step"] == step
    # Not beside the checkpoint: a reference run's (tests/integration/trainer/conftest.py) is read by
    # every xdist worker, and two of them must not write the same file.
    with tempfile.TemporaryDirectory(prefix="final-state-") as tmp:
        out = Path(tmp) / f"flat-{step}.pt"
        dcp_to_torch_save(d, out)
        return torch.load(out, weights_only=False)


def assert_bitwise(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["model"].keys() == b["model"].keys() and len(a["model"]) > 0
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), f"param {k} differs"
    sa, sb = a["optim"]["state"], b["optim"]["state"]
    assert sa.keys() == sb.keys() and len(sa) > 0
    for k in sa:
        for kk in sa[k]:
            assert torch.equal(sa[k][kk], sb[k][kk]), f"optimizer {k}.{kk} differs"


def samples_by_step(record_dir: Path) -> dict[int, list[int]]:
    """Per step, the dataset indices trained on by the last attempt that ran it (sorted, all ranks).

    An interrupted attempt may have trained steps after its last checkpoint; the resumed attempt redoes
    them, so only the newest attempt's records for a step count.
    """
    recs: dict[int, dict[str, list[int]]] = {}
    for f in record_dir.glob("samples-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            recs.setdefault(r["step"], {}).setdefault(r["attempt"], []).extend(r["indices"])
    out = {step: sorted(by[max(by)]) for step, by in recs.items()}
    assert out and all(out.values()), "no samples recorded"
    return out


__all__ = [
    "BASE",
    "PLUGIN",
    "SAVED_16",
    "Proc",
    "assert_bitwise",
    "copy_checkpoints",
    "events",
    "final_state",
    "finished",
    "free_port",
    "launch",
    "preempted",
    "run_args",
    "samples_by_step",
    "single",
]
