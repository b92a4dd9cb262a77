"""GPU figures of the trainer (issue 14 point 12), side by side in one run on one GPU (a script, not a test).

    python tests/benchmarks/bench_gpu.py [--steps 40] [--json out.json]

1. tokens/s and MFU of `gpt-small` (~124M) in bf16 through the real launcher (torchrun, NCCL), DDP and
   FSDP, torch.compile off and on;
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
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PY = sys.executable
from tests.benchmarks.bench_trainer import free_port  # noqa: E402 (ROOT on sys.path first)

ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}

SEQ, MICRO, GLOBAL = 1024, 16, 64  # 4 micro-batches of 16 x 1024 tokens per step: 65,536 tokens
WORKLOAD = [
    "--model", "gpt-small", "--seq-len", str(SEQ), "--global-batch-size", str(GLOBAL),
    "--micro-batch-size", str(MICRO), "--precision", "bf16", "--dataset", "synthetic",
    "--log-interval", "1", "--warmup-steps", "5",
]  # fmt: skip
LOGDIR: Path | None = None  # --logdir: the checkpoint run's own log is kept there
SKIP = 10  # steps dropped from every median (start-up, compilation, allocator warm-up)

BARE_LOOP = textwrap.dedent("""
    import json, sys, time
    import torch, torch.distributed as dist, torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader
    from trainer.data import SyntheticTokens, ElasticSampler
    from trainer.model import GPT, gpt_config
    steps, seq, gb, mb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    dist.init_process_group("nccl")
    torch.cuda.set_device(0)
    dev = torch.device("cuda:0")
    accum = gb // mb
    torch.manual_seed(1234)
    model = DDP(GPT(gpt_config("gpt-small", seq, 0.0, {})).to(dev), device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    ds = SyntheticTokens(1 << 20, seq, 50304, 1234)
    sampler = ElasticSampler(len(ds), 1234, gb, mb, 1, 0, 0, steps)
    it = iter(DataLoader(ds, batch_size=mb, sampler=sampler, pin_memory=True))
    times = []
    for step in range(steps):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for a in range(accum):
            x = next(it).to(dev, non_blocking=True)
            ctx = model.no_sync() if a < accum - 1 else torch.enable_grad()
            with ctx, torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x[:, :-1])
                loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
            (loss / accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
        loss.item(); torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"times": times}))
    dist.destroy_process_group()
""")

# The floor of an async save's blocking time: the device-to-host copy of the same tensors.
D2H_FLOOR = textwrap.dedent("""
    import json, time, torch
    from trainer.model import GPT, gpt_config
    dev = torch.device("cuda:0")
    model = GPT(gpt_config("gpt-small", 1024, 0.0, {})).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    model(torch.zeros(1, 8, dtype=torch.long, device=dev)).sum().backward(); opt.step()
    tensors = [t for t in model.state_dict().values()] + [
        v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.numel() > 1]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    pinned = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
    plain = [torch.empty(t.shape, dtype=t.dtype) for t in tensors]
    out = {"bytes": nbytes}
    for name, dst in (("pinned", pinned), ("pageable", plain)):
        best = []
        for _ in range(5):
            torch.cuda.synchronize(); t0 = time.perf_counter()
            for d, s in zip(dst, tensors): d.copy_(s, non_blocking=(name == "pinned"))
            torch.cuda.synchronize(); best.append(time.perf_counter() - t0)
        out[name + "_s"] = min(best)
    print(json.dumps(out))
""")


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


def run_trainer(extra: list[str], steps: int) -> tuple[str, int]:
    cmd = [
        PY, "-m", "trainer.launch", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--", *WORKLOAD, "--steps", str(steps), *extra,
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=900)
    return p.stdout + p.stderr, p.returncode


def trainer_figures(parallelism: str, compiled: bool, steps: int) -> dict[str, Any]:
    import torch

    from trainer.model import gpt_config
    from trainer.peaks import gpu_peak

    log, rc = run_trainer(["--parallelism", parallelism, "--compile", str(compiled).lower()], steps)
    done = [e for e in events(log, "step_done")][SKIP:]
    if rc != 0 or not done:
        return {"error": f"exit {rc}", "tail": log[-3000:]}
    tps = statistics.median(e["tokens_per_s"] for e in done)
    step_s = statistics.median(e["step_s"] for e in done)
    fpt = gpt_config("gpt-small", SEQ, 0.0, {}).flops_per_token()
    peak = gpu_peak(torch.cuda.get_device_name(0))
    return {
        "tokens_per_s": tps,
        "step_s": step_s,
        "mfu": fpt * tps / peak.flops if peak else None,
        "gpu": peak.model if peak else torch.cuda.get_device_name(0),
        "steps_measured": len(done),
    }


def bare_figures(steps: int, work: Path) -> dict[str, Any]:
    script = work / "bare.py"
    script.write_text(BARE_LOOP)
    cmd = [
        PY, "-m", "torch.distributed.run", "--nproc-per-node", "1", f"--master-port={free_port()}",
        str(script), str(steps), str(SEQ), str(GLOBAL), str(MICRO),
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=900)
    lines = [x for x in p.stdout.splitlines() if x.startswith('{"times"')]
    if p.returncode != 0 or not lines:
        return {"error": f"exit {p.returncode}", "tail": (p.stdout + p.stderr)[-3000:]}
    times = json.loads(lines[-1])["times"][SKIP:]
    return {"step_s": statistics.median(times), "tokens_per_s": SEQ * GLOBAL / statistics.median(times)}


def checkpoint_figures(steps: int, work: Path) -> dict[str, Any]:
    root = work / "ckpt"
    log, rc = run_trainer(
        ["--checkpoint.uri", str(root), "--checkpoint.interval-steps", "5", "--checkpoint.async-save",
         "true"],
        steps,
    )  # fmt: skip
    if LOGDIR:
        (LOGDIR / "checkpoint-run.log").write_text(log)
    blocking = [e["blocking_s"] for e in events(log, "checkpoint_save_started") if "blocking_s" in e]
    floor = subprocess.run(
        [PY, "-c", D2H_FLOOR], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300
    )
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
        "ratio_to_floor": statistics.median(steady) / f["pinned_s"],
    }


def collectives_smoke() -> dict[str, Any]:
    cmd = [
        PY, "-m", "torch.distributed.run", "--nproc-per-node", "1", f"--master-port={free_port()}",
        "-m", "trainer.collectives", "--min-bytes", "1M", "--max-bytes", "256M", "--iters", "5",
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    from trainer.collectives import find_result

    r = find_result(p.stdout)
    if p.returncode != 0 or r is None:
        return {"error": f"exit {p.returncode}", "tail": (p.stdout + p.stderr)[-2000:]}
    return {
        "backend": r.backend,
        "world_size": r.world_size,
        "peak_algbw_gbps": max(x.algbw_gbps for x in r.rows),
    }


def main() -> int:
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--json")
    p.add_argument("--logdir")
    p.add_argument("--only", default="trainer,bare,checkpoint,collectives")
    a = p.parse_args()
    only = set(a.only.split(","))
    global LOGDIR
    LOGDIR = Path(a.logdir) if a.logdir else None
    out: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "workload": {"model": "gpt-small", "seq": SEQ, "micro": MICRO, "global": GLOBAL, "steps": a.steps},
    }
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        if "trainer" in only:
            for par in ("ddp", "fsdp"):
                for compiled in (False, True):
                    key = f"{par}_compile_{'on' if compiled else 'off'}"
                    out[key] = trainer_figures(par, compiled, a.steps)
                    print(key, json.dumps(out[key])[:400], flush=True)
        if "bare" in only:
            out["bare_ddp"] = bare_figures(a.steps, work)
            print("bare_ddp", json.dumps(out["bare_ddp"])[:400], flush=True)
            t = out.get("ddp_compile_off", {})
            if "step_s" in t and "step_s" in out["bare_ddp"]:
                out["trainer_over_bare"] = t["step_s"] / out["bare_ddp"]["step_s"]
        if "checkpoint" in only:
            out["checkpoint"] = checkpoint_figures(a.steps, work)
            print("checkpoint", json.dumps(out["checkpoint"])[:600], flush=True)
        if "collectives" in only:
            out["collectives"] = collectives_smoke()
            print("collectives", json.dumps(out["collectives"])[:400], flush=True)
    print(json.dumps(out, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
