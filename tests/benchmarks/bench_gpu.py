"""GPU figures of the trainer (issues 14, 34), side by side in one run on one GPU (a script, not a test).

    make bench-gpu                       # on the GPU machine: JSON in build/bench-gpu.json, a Markdown table
    python tests/benchmarks/bench_gpu.py [--steps 40] [--json out.json] [--markdown out.md] [--dry]

`--dry` runs every part on the CPU (gloo, fp32, the tiny presets, 3 steps, compile with aot_eager): what the
tests run, so the script is known to work before a GPU is lent. Runs that would pass `--budget-s` (default
420 s) are skipped and say so, so the whole bench stays under 8 minutes on one H100/H200.

1. tokens/s and MFU of `gpt-small` (~124M) and `gpt-1b` (~1.1B) in bf16 through the real launcher
   (torchrun, NCCL), DDP and FSDP2, torch.compile off and on;
2. the trainer's step time against a bare DDP loop on the same GPU, model, batch and bf16 autocast;
3. async checkpoint blocking time against the floor: copying the same state (model + AdamW moments)
   from the GPU to pinned host memory;
4. trainer.collectives (the NCCL preflight's sweep) over NCCL on this GPU (one rank: a smoke run of
   the code path, not a fabric figure).
MFU = flops_per_token x tokens/s over wall time / the exact part's dense bf16 peak (trainer/peaks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PY = sys.executable
from tests.benchmarks.bench_trainer import free_port  # noqa: E402 (ROOT on sys.path first)

ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


@dataclass(frozen=True)
class Workload:
    """One model's run: its preset, sequence, micro and global batch; the steps dropped from every median."""

    model: str
    seq: int
    micro: int
    global_: int
    skip: int = 10  # start-up, compilation, allocator warm-up

    def args(self, dry: bool) -> list[str]:
        precision = "fp32" if dry else "bf16"
        return [
            "--model", self.model, "--seq-len", str(self.seq), "--global-batch-size", str(self.global_),
            "--micro-batch-size", str(self.micro), "--precision", precision, "--dataset", "synthetic",
            "--log-interval", "1", "--warmup-steps", "5",
        ]  # fmt: skip


# gpt-small: 4 micro-batches of 16 x 1024 tokens (65,536 per step), the figures of earlier issues; gpt-1b:
# 4 x 4 x 1024 (16,384 per step), what one 80 GB GPU holds with fp32 AdamW state for 1.1B parameters.
GPU_WORKLOADS = {"gpt-small": Workload("gpt-small", 1024, 16, 64), "gpt-1b": Workload("gpt-1b", 1024, 4, 16)}
DRY_WORKLOADS = {
    "gpt-small": Workload("tiny", 32, 2, 4, skip=0),
    "gpt-1b": Workload("mini", 32, 2, 4, skip=0),
}
# (workload, parallelism, compiled), in order: what is measured first matters most if the budget runs out.
RUNS = [
    ("gpt-small", "ddp", False), ("gpt-small", "ddp", True), ("gpt-small", "fsdp", False),
    ("gpt-small", "fsdp", True), ("gpt-1b", "ddp", True), ("gpt-1b", "fsdp", True), ("gpt-1b", "ddp", False),
]  # fmt: skip

BARE_LOOP = textwrap.dedent("""
    import json, sys, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader
    from trainer.data import SyntheticTokens, ElasticSampler
    from trainer.model import GPT, gpt_config
    model_name, steps, seq, gb, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    cuda = torch.cuda.is_available() and sys.argv[6] == "gpu"
    dist.init_process_group("nccl" if cuda else "gloo")
    dev = torch.device("cuda:0" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(0)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    accum = gb // mb
    torch.manual_seed(1234)
    gpt = GPT(gpt_config(model_name, seq, 0.0, {}))
    model = DDP(gpt.to(dev), device_ids=[0] if cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    ds = SyntheticTokens(1 << 20, seq, gpt.config.vocab_size, 1234)
    sampler = ElasticSampler(len(ds), 1234, gb, mb, 1, 0, 0, steps)
    it = iter(DataLoader(ds, batch_size=mb, sampler=sampler, pin_memory=cuda))
    times = []
    for step in range(steps):
        sync(); t0 = time.perf_counter()
        for a in range(accum):
            x = next(it).to(dev, non_blocking=True)
            ctx = model.no_sync() if a < accum - 1 else torch.enable_grad()
            with ctx, torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
                loss = model(x[:, :-1], x[:, 1:])  # the same fused head + loss as the trainer
            (loss / accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
        loss.item(); sync()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"times": times}))
    dist.destroy_process_group()
""")

# The floor of an async save's blocking time: the device-to-host copy of the same tensors.
D2H_FLOOR = textwrap.dedent("""
    import json, sys, time, torch
    from trainer.model import GPT, gpt_config
    cuda = torch.cuda.is_available() and sys.argv[2] == "gpu"
    dev = torch.device("cuda:0" if cuda else "cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    model = GPT(gpt_config(sys.argv[1], 64, 0.0, {})).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    model(torch.zeros(1, 8, dtype=torch.long, device=dev)).sum().backward(); opt.step()
    tensors = [t for t in model.state_dict().values()] + [
        v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.numel() > 1]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    pinned = [torch.empty(t.shape, dtype=t.dtype, pin_memory=cuda) for t in tensors]
    plain = [torch.empty(t.shape, dtype=t.dtype) for t in tensors]
    out = {"bytes": nbytes}
    for name, dst in (("pinned", pinned), ("pageable", plain)):
        best = []
        for _ in range(5):
            sync(); t0 = time.perf_counter()
            for d, s in zip(dst, tensors): d.copy_(s, non_blocking=(name == "pinned" and cuda))
            sync(); best.append(time.perf_counter() - t0)
        out[name + "_s"] = min(best)
    print(json.dumps(out))
""")


@dataclass
class Bench:
    dry: bool
    steps: int
    budget_s: float
    logdir: Path | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def device(self) -> str:
        return "cpu" if self.dry else "gpu"

    def workload(self, name: str) -> Workload:
        return (DRY_WORKLOADS if self.dry else GPU_WORKLOADS)[name]

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def run(self, cmd: list[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """A child in its own process group, killed with its workers when it overruns the budget."""
        limit = max(1.0, min(timeout or self.left(), self.left()))
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT,
                             start_new_session=True)  # fmt: skip
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            err += f"\nbench: killed after {limit:.0f} s (budget)"
            return subprocess.CompletedProcess(cmd, -9, out, err)
        return subprocess.CompletedProcess(cmd, p.returncode, out, err)

    def trainer(self, w: Workload, extra: list[str]) -> tuple[str, int]:
        cmd = [
            PY, "-m", "trainer.launch", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--", *w.args(self.dry), "--steps", str(self.steps),
            *(["--threads", "1", "--compile-backend", "aot_eager"] if self.dry else []), *extra,
        ]  # fmt: skip
        p = self.run(cmd)
        return p.stdout + p.stderr, p.returncode


def events(text: str, name: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            if e.get("event") == name:
                out.append(e)
    return out


def trainer_figures(b: Bench, workload: str, parallelism: str, compiled: bool) -> dict[str, Any]:
    from trainer.model import gpt_config
    from trainer.peaks import gpu_peak

    w = b.workload(workload)
    log, rc = b.trainer(w, ["--parallelism", parallelism, "--compile", str(compiled).lower()])
    done = events(log, "step_done")[w.skip :]
    if rc != 0 or not done:
        return {"error": f"exit {rc}", "tail": log[-3000:]}
    tps = statistics.median(e["tokens_per_s"] for e in done)  # over wall time between steps' ends
    fpt = gpt_config(w.model, w.seq, 0.0, {}).flops_per_token()
    peak = None if b.dry else gpu_peak(device_name())
    return {
        "tokens_per_s": tps,
        "step_s": statistics.median(e["step_s"] for e in done),
        "wall_s": statistics.median(e["wall_s"] for e in done),
        "mfu": fpt * tps / peak.flops if peak else None,
        "steps_measured": len(done),
    }


def bare_figures(b: Bench, work: Path) -> dict[str, Any]:
    w = b.workload("gpt-small")
    script = work / "bare.py"
    script.write_text(BARE_LOOP)
    cmd = [
        PY, "-m", "torch.distributed.run", "--nproc-per-node", "1", f"--master-port={free_port()}", str(script),
        w.model, str(b.steps), str(w.seq), str(w.global_), str(w.micro), b.device,
    ]  # fmt: skip
    p = b.run(cmd)
    lines = [x for x in p.stdout.splitlines() if x.startswith('{"times"')]
    if p.returncode != 0 or not lines:
        return {"error": f"exit {p.returncode}", "tail": (p.stdout + p.stderr)[-3000:]}
    times = json.loads(lines[-1])["times"][w.skip :]
    return {"step_s": statistics.median(times), "tokens_per_s": w.seq * w.global_ / statistics.median(times)}


def checkpoint_figures(b: Bench, work: Path) -> dict[str, Any]:
    w = b.workload("gpt-small")
    root = work / "ckpt"
    log, rc = b.trainer(
        w, ["--checkpoint.uri", str(root), "--checkpoint.interval-steps", "5" if not b.dry else "1",
            "--checkpoint.async-save", "true"],
    )  # fmt: skip
    if b.logdir:
        (b.logdir / "checkpoint-run.log").write_text(log)
    # the full figure, reported at the commit: with background staging it includes the wait for the copy
    # before the next optimizer step, which checkpoint_save_started cannot know yet
    async_steps = {e["ckpt_step"] for e in events(log, "checkpoint_save_started") if e.get("mode") == "async"}
    blocking = [e["blocking_s"] for e in events(log, "checkpoint_committed") if e["ckpt_step"] in async_steps]
    floor = b.run([PY, "-c", D2H_FLOOR, w.model, b.device], timeout=300)
    floors = [x for x in floor.stdout.splitlines() if x.startswith("{")]
    if rc != 0 or not blocking or not floors:
        return {"error": f"exit {rc}/{floor.returncode}", "tail": (log + floor.stderr)[-3000:]}
    f = json.loads(floors[-1])
    # the first save also pays for allocating the pinned staging buffers; report it apart
    steady = blocking[1:] or blocking
    return {
        "blocking_s_first": blocking[0],
        "blocking_s_steady_median": statistics.median(steady),
        "d2h_floor_pinned_s": f["pinned_s"],
        "d2h_pageable_s": f["pageable_s"],
        "state_bytes": f["bytes"],
        "ratio_to_floor": statistics.median(steady) / f["pinned_s"] if f["pinned_s"] else None,
    }


def collectives_smoke(b: Bench) -> dict[str, Any]:
    sizes = (
        ["--min-bytes", "64K", "--max-bytes", "1M"] if b.dry else ["--min-bytes", "1M", "--max-bytes", "256M"]
    )
    cmd = [
        PY, "-m", "torch.distributed.run", "--nproc-per-node", "1", f"--master-port={free_port()}",
        "-m", "trainer.collectives", *sizes, "--iters", "5",
    ]  # fmt: skip
    p = b.run(cmd, timeout=300)
    from trainer.collectives import find_result

    r = find_result(p.stdout)
    if p.returncode != 0 or r is None:
        return {"error": f"exit {p.returncode}", "tail": (p.stdout + p.stderr)[-2000:]}
    return {
        "backend": r.backend,
        "world_size": r.world_size,
        "peak_algbw_gbps": max(x.algbw_gbps for x in r.rows),
    }


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def markdown(out: dict[str, Any]) -> str:
    """The table docs/BENCHMARKS.md records: one row per run, then the ratios the issue asks for."""

    def pct(v: Any) -> str:
        return f"{100 * v:.1f}%" if isinstance(v, int | float) else "-"

    rows = ["| run | tokens/s | step (own) | step (wall) | MFU |", "| --- | ---: | ---: | ---: | ---: |"]
    for key, r in out["runs"].items():
        if "tokens_per_s" in r:
            rows.append(
                f"| {key} | {r['tokens_per_s']:,.0f} | {r['step_s']:.3f} s | {r['wall_s']:.3f} s | {pct(r['mfu'])} |"
            )
        else:
            rows.append(f"| {key} | {r.get('error') or r.get('skipped')} | | | |")
    bare = out.get("bare_ddp", {})
    if "step_s" in bare:
        rows.append(
            f"| bare DDP loop (same model, loss and batch) | {bare['tokens_per_s']:,.0f} | {bare['step_s']:.3f} s | | |"
        )
    lines = [
        f"{out['gpu']}, torch {out['torch']}, {'dry run on CPU' if out['dry'] else 'bf16'}; {out['elapsed_s']:.0f} s",
        "",
        *rows,
        "",
    ]
    for name in ("trainer_over_bare", "fsdp_over_ddp_compiled", "compiled_over_eager_ddp"):
        if out.get(name) is not None:
            lines.append(f"- {name.replace('_', ' ')}: {out[name]:.3f}x step time")
    c = out.get("checkpoint", {})
    if "ratio_to_floor" in c and c["ratio_to_floor"] is not None:
        lines.append(
            f"- async save: training blocked {c['blocking_s_steady_median']:.3f} s (median, after the first), "
            f"{c['ratio_to_floor']:.1f}x the pinned device-to-host copy of the same {c['state_bytes'] / 2**30:.2f} GiB "
            f"({c['d2h_floor_pinned_s']:.3f} s)"
        )
    return "\n".join(lines) + "\n"


def ratio(out: dict[str, Any], a: str, b: str, key: str = "step_s") -> float | None:
    x, y = out["runs"].get(a, out.get(a, {})), out["runs"].get(b, out.get(b, {}))
    return x[key] / y[key] if key in x and key in y else None


def main(argv: list[str] | None = None) -> int:
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--logdir")
    p.add_argument("--dry", action="store_true", help="every part on the CPU, tiny models (the tests' mode)")
    p.add_argument("--budget-s", type=float, default=420.0)
    p.add_argument("--only", default="trainer,bare,checkpoint,collectives")
    p.add_argument("--runs", help="comma-separated trainer runs to keep, e.g. 'gpt-1b fsdp compiled' (all)")
    a = p.parse_args(argv)
    if not a.dry and not torch.cuda.is_available():
        print("bench_gpu: no CUDA device here; --dry runs the same parts on the CPU", file=sys.stderr)
        return 2
    b = Bench(
        dry=a.dry,
        steps=3 if a.dry else a.steps,
        budget_s=a.budget_s,
        logdir=Path(a.logdir) if a.logdir else None,
    )
    only = set(a.only.split(","))
    out: dict[str, Any] = {
        "gpu": device_name(),
        "torch": torch.__version__,
        "dry": a.dry,
        "steps": b.steps,
        "workloads": {k: vars(b.workload(k)) for k in GPU_WORKLOADS},
        "runs": {},
    }
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        if "trainer" in only:
            keep = set(a.runs.split(",")) if a.runs else None
            for workload, par, compiled in RUNS:
                key = f"{workload} {par} {'compiled' if compiled else 'eager'}"
                if keep is not None and key not in keep:
                    continue
                if b.left() < 30:
                    out["runs"][key] = {"skipped": f"budget of {b.budget_s:.0f} s spent"}
                else:
                    out["runs"][key] = trainer_figures(b, workload, par, compiled)
                print(key, json.dumps(out["runs"][key])[:300], flush=True)
        if "bare" in only and b.left() > 20:
            out["bare_ddp"] = bare_figures(b, work)
            out["trainer_over_bare"] = ratio(out, "gpt-small ddp eager", "bare_ddp")
        out["fsdp_over_ddp_compiled"] = ratio(out, "gpt-small fsdp compiled", "gpt-small ddp compiled")
        out["compiled_over_eager_ddp"] = ratio(out, "gpt-small ddp compiled", "gpt-small ddp eager")
        if "checkpoint" in only and b.left() > 20:
            out["checkpoint"] = checkpoint_figures(b, work)
        if "collectives" in only and b.left() > 10:
            out["collectives"] = collectives_smoke(b)
    out["elapsed_s"] = time.monotonic() - b.started
    table = markdown(out)
    print(table)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=2))
    if a.markdown:
        Path(a.markdown).write_text(table)
    failed = [k for k, r in out["runs"].items() if "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
