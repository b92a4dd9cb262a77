"""``python -m trainer.demo``: preemption and exact resume, end to end, on 2 CPU workers.

1. an uninterrupted reference run (2 workers under the launcher, tiny model, byte corpus);
2. the same run, SIGTERM to the launcher mid-run -> checkpoint committed -> exit 143;
3. a restart, as Kubernetes would do after 143, that resumes from the checkpoint and finishes;
4. the final weights and optimizer state of 2+3 compared with 1, bit for bit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

STEPS = 40
ARGS = [
    "--model",
    "tiny",
    "--dataset",
    "bytes",
    "--seq-len",
    "64",
    "--global-batch-size",
    "8",
    "--micro-batch-size",
    "2",
    "--threads",
    "1",
    "--log-interval",
    "1",
    "--steps",
    str(STEPS),
    "--dropout",
    "0.1",
    "--checkpoint.interval-steps",
    "10",
]


def _say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


def _launch(work: Path, name: str, ckpt: Path, corpus: Path) -> tuple[subprocess.Popen[bytes], Path]:
    out = work / f"{name}.log"
    cmd = [
        sys.executable,
        "-m",
        "trainer.launch",
        "--standalone",
        "--nproc-per-node",
        "2",
        "--",
        *ARGS,
        "--data-paths",
        f"[{corpus}]",
        "--checkpoint.uri",
        str(ckpt),
    ]
    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
    }
    with open(out, "wb") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env), out


def _events(log: Path, name: str) -> list[dict[str, Any]]:
    evs = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            ev = json.loads(line)
            if ev["event"] == name:
                evs.append(ev)
    return evs


def _final(ckpt: Path) -> dict[str, Any]:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = ckpt / "final.pt"
    dcp_to_torch_save(ckpt / f"step-{STEPS}", out)
    return torch.load(out, weights_only=False)


def _compare(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, int]:
    tensors = [(a["model"][k], b["model"][k]) for k in a["model"]]
    for pid in a["optim"]["state"]:
        sa, sb = a["optim"]["state"][pid], b["optim"]["state"][pid]
        tensors += [(sa[k], sb[k]) for k in sa]
    return len(tensors), sum(not torch.equal(x, y) for x, y in tensors)


def main() -> int:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trainplane-demo-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus.txt"
        # the trainer's own source code is the byte corpus: real text, no download
        corpus.write_bytes(b"\n".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py"))) * 4)

        size = corpus.stat().st_size
        _say(f"1/3 uninterrupted reference run: 2 workers, {STEPS} steps, tiny GPT on {size} bytes of text")
        ref, ref_log = _launch(work, "reference", work / "ckpt-ref", corpus)
        if ref.wait() != 0:
            _say(f"reference run failed; log: {ref_log.read_text()[-2000:]}")
            return 1

        _say("2/3 same run, SIGTERM to the launcher after the step-10 checkpoint")
        run, log = _launch(work, "preempted", work / "ckpt", corpus)
        while run.poll() is None and not [e for e in _events(log, "step_done") if e["step"] >= 13]:
            time.sleep(0.05)
        run.send_signal(signal.SIGTERM)
        code = run.wait()
        exits = _events(log, "preempted_exit")
        step = exits[0]["ckpt_step"] if exits else None
        latency = max((e["signal_to_exit_s"] for e in exits), default=float("nan"))
        _say(
            f"    launcher exit code {code} (143 = preempted after a committed checkpoint), "
            f"checkpoint at step {step}, signal->exit {latency:.2f} s in the workers"
        )
        if code != 143:
            _say(f"expected 143; log: {log.read_text()[-2000:]}")
            return 1

        _say("3/3 restart (what the Job controller does after 143): resume and finish")
        again, log2 = _launch(work, "resumed", work / "ckpt", corpus)
        code2 = again.wait()
        resumed = _events(log2, "resumed")
        _say(f"    exit code {code2}, resumed from step {resumed[0]['ckpt_step'] if resumed else '?'}")
        if code2 != 0 or not resumed:
            _say(f"resume failed; log: {log2.read_text()[-2000:]}")
            return 1

        n, differ = _compare(_final(work / "ckpt"), _final(work / "ckpt-ref"))
        ok = differ == 0
        _say(f"finished in {time.monotonic() - t0:.0f} s")
        print(
            f"demo: resumed run {'MATCHES' if ok else 'DIFFERS FROM'} the uninterrupted run bitwise: "
            f"{n - differ}/{n} weight and optimizer tensors identical after {STEPS} steps",
            flush=True,
        )
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
