"""How long a killed worker costs: from SIGKILL of one worker to the restarted group's first step, with the
workers forked from the launcher's zygote and started fresh (TRAINPLANE_ZYGOTE=0), side by side in one run
(a script, not a test).

    python tests/benchmarks/bench_restart.py [--reps 3] [--json out.json]

Each repetition: a launcher with 2 workers and ``--max-restarts 1`` trains the tiny model (checkpoint every
step), one worker is killed with SIGKILL at step 4, torchrun restarts the group in the pod, and the time to
the first step_done after the kill is taken (resume from the checkpoint included), and the launch itself
(launcher start to the first step). docs/BENCHMARKS.md records the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trainer import ENV, PY, ROOT, events, free_port

ARGS = ["--model", "tiny", "--dataset", "synthetic", "--seq-len", "32", "--global-batch-size", "8"]
ARGS += ["--micro-batch-size", "2", "--threads", "1", "--log-interval", "1", "--steps", "100000"]
ARGS += ["--checkpoint.interval-steps", "1"]


def _wait(out: Path, pred: Any, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in events(out, "step_done") + events(out, "start"):
            if pred(e):
                return e
        time.sleep(0.01)
    raise SystemExit(f"bench_restart: timed out; see {out}")


def one(work: Path, zygote: bool) -> dict[str, float]:
    out = work / f"run-{zygote}-{time.monotonic_ns()}.log"
    env = {**ENV, "TRAINPLANE_ZYGOTE": "1" if zygote else "0"}
    cmd = [PY, "-m", "trainer.launch", "--nproc-per-node", "2", "--max-restarts", "1", "--rdzv-backend"]
    cmd += ["c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--", *ARGS]
    cmd += ["--checkpoint.uri", str(work / f"ckpt-{out.stem}")]
    started = time.time()
    with open(out, "wb") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
    try:
        first = _wait(out, lambda e: e["event"] == "step_done")
        _wait(out, lambda e: e["event"] == "step_done" and e["step"] >= 4)
        victim = next(e["pid"] for e in events(out, "start") if e.get("rank") == 1)
        killed = time.time()
        os.kill(victim, signal.SIGKILL)
        again = _wait(out, lambda e: e["event"] == "step_done" and e["ts"] > killed)
        return {"launch_s": first["ts"] - started, "restart_s": again["ts"] - killed}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows: dict[str, list[dict[str, float]]] = {"fresh": [], "zygote": []}
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as d:
        for _ in range(a.reps):  # alternating, so that a busy moment hits both alike
            rows["fresh"].append(one(Path(d), zygote=False))
            rows["zygote"].append(one(Path(d), zygote=True))
    med = {
        k: {m: statistics.median(r[m] for r in v) for m in ("launch_s", "restart_s")} for k, v in rows.items()
    }
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; reps {a.reps}")
    print("| workers started | launch to first step (s) | kill to the restarted group's first step (s) |")
    print("| --- | --- | --- |")
    for k in ("fresh", "zygote"):
        print(f"| {k} | {med[k]['launch_s']:.2f} | {med[k]['restart_s']:.2f} |")
    print(
        f"ratio fresh/zygote: launch {med['fresh']['launch_s'] / med['zygote']['launch_s']:.1f}x, "
        f"restart {med['fresh']['restart_s'] / med['zygote']['restart_s']:.1f}x"
    )
    if a.json:
        a.json.write_text(json.dumps({"runs": rows, "median": med}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
