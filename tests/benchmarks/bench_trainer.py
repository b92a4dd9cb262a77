"""Trainer benchmarks, measured side by side in one run (a script, not a test).

    python tests/benchmarks/bench_trainer.py [--quick] [--json out.json]

1. step time: trainer (launcher, 2 workers) vs a bare DDP loop on the same model, data and batch;
2. checkpoint saving of a >= 200 MB state: async blocking time vs sync save time;
3. checkpoint write throughput vs a raw sequential write (+fsync) of the same bytes to the same disk;
4. the same to S3 (moto_server on loopback) vs a raw boto3 multipart upload;
5. SIGTERM to the launcher -> exit 143 latency;
6. per-file CRC-32s in the manifest: save time and async blocking with and without them (alternating
   saves), the resume-time verification, and the raw speed of the checksum candidates.
Results are printed as ratios against their goals; docs/BENCHMARKS.md records them.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PY = sys.executable
ENV = {
    **os.environ,
    "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    "OMP_NUM_THREADS": "1",
}

# the workload of the step-time comparison: big enough that a step is tens of ms on a CPU core
WORKLOAD = [
    "--model",
    "mini",
    "--seq-len",
    "128",
    "--global-batch-size",
    "16",
    "--micro-batch-size",
    "4",
    "--threads",
    "1",
    "--log-interval",
    "1",
    "--dataset",
    "synthetic",
]

BARE_LOOP = textwrap.dedent("""
    import json, os, sys, time
    import torch, torch.distributed as dist, torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader
    from trainer.data import SyntheticTokens, ElasticSampler
    from trainer.model import GPT, gpt_config
    steps, seq, gb, mb = int(sys.argv[1]), 128, 16, 4
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, ws = dist.get_rank(), dist.get_world_size()
    accum = gb // (mb * ws)
    torch.manual_seed(1234)
    model = DDP(GPT(gpt_config("mini", seq, 0.0, {})))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    ds = SyntheticTokens(65536, seq, 256, 1234)
    sampler = ElasticSampler(len(ds), 1234, gb, mb, ws, rank, 0, steps)
    it = iter(DataLoader(ds, batch_size=mb, sampler=sampler))
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        for a in range(accum):
            x = next(it)
            ctx = model.no_sync() if a < accum - 1 else torch.enable_grad()
            with ctx:
                logits = model(x[:, :-1])
                loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
                (loss / accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    if rank == 0:
        print(json.dumps({"times": times}))
    dist.destroy_process_group()
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launcher(trainer_args: list[str], out: Path) -> subprocess.Popen[bytes]:
    cmd = [
        PY,
        "-m",
        "trainer.launch",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{free_port()}",
        "--",
        *trainer_args,
    ]
    with open(out, "wb") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=ENV, cwd=ROOT)


def events(path: Path, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in (json.loads(line) for line in path.read_text().splitlines() if line.startswith("{"))
        if e.get("event") == name
    ]


def bench_step_time(work: Path, steps: int, rounds: int) -> dict[str, Any]:
    """Interleaved rounds of trainer and bare loop; median step time, first 10 steps dropped."""
    bare_py = work / "bare.py"
    bare_py.write_text(BARE_LOOP)
    trainer_t: list[float] = []
    bare_t: list[float] = []
    for r in range(rounds):
        p = launcher([*WORKLOAD, "--steps", str(steps)], work / f"trainer-{r}.log")
        assert p.wait() == 0, (work / f"trainer-{r}.log").read_text()[-2000:]
        done = events(work / f"trainer-{r}.log", "step_done")
        trainer_t += [e["step_s"] for e in done if e["rank"] == 0][10:]
        out = subprocess.run(
            [
                PY,
                "-m",
                "torch.distributed.run",
                "--nproc-per-node",
                "2",
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                f"127.0.0.1:{free_port()}",
                str(bare_py),
                str(steps),
            ],
            capture_output=True,
            text=True,
            env=ENV,
            cwd=ROOT,
            check=True,
        )
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith('{"times"'))
        bare_t += json.loads(line)["times"][10:]
    tm, bm = statistics.median(trainer_t), statistics.median(bare_t)
    return {
        "trainer_step_s": tm,
        "bare_step_s": bm,
        "overhead": tm / bm - 1,
        "goal": "< 3%",
        "met": tm / bm - 1 < 0.03,
        "samples": len(trainer_t),
    }


def _state(mb_target: int) -> tuple[Any, Any, int]:
    import torch

    from trainer.model import GPT, GPTConfig

    # d_model 512: 3.1M params per layer; model + 2 AdamW moments = 12 bytes/param
    layers = max(1, round(mb_target * 2**20 / 12 / (12 * 512 * 512)))
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=256, seq_len=64, n_layer=layers, n_head=8, d_model=512))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.zeros(1, 8, dtype=torch.long)).sum().backward()
    opt.step()
    nbytes = sum(p.numel() * 12 for p in model.parameters())
    return model, opt, nbytes


def _raw_write(path: Path, nbytes: int) -> float:
    buf = os.urandom(1 << 24)
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            n = min(left, len(buf))
            f.write(buf[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())
    dt = time.perf_counter() - t0
    path.unlink()
    return dt


def bench_checkpoint(work: Path, mb_target: int, reps: int, s3: dict[str, str] | None) -> dict[str, Any]:
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from trainer.checkpoint import CheckpointStore

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    model, opt, nbytes = _state(mb_target)

    def state() -> dict[str, Any]:
        msd, osd = get_state_dict(model, opt)
        return {"model": msd, "optim": osd}

    store = CheckpointStore(str(work / "ckpt"), keep=2, config_hash="bench", thread_count=4)
    sync_s, block_s, async_total, raw_s, written = [], [], [], [], 0
    step = 0
    for _ in range(reps):
        step += 1
        t0 = time.perf_counter()
        store.save(state(), step, asynchronous=False)
        sync_s.append(time.perf_counter() - t0)
        written = store.last_result.bytes if store.last_result else 0
        raw_s.append(_raw_write(work / "raw.bin", written))
        step += 1
        t0 = time.perf_counter()
        store.save(state(), step, asynchronous=True)
        block_s.append(time.perf_counter() - t0)
        store.wait()
        async_total.append(time.perf_counter() - t0)
    # the floor for any async save: copying the state once into warm, preallocated CPU buffers
    import torch

    tensors = [t for t in state()["model"].values()] + [
        t for s in state()["optim"]["state"].values() for t in s.values() if isinstance(t, torch.Tensor)
    ]
    buffers = [torch.empty_like(t) for t in tensors]
    for b, t in zip(buffers, tensors, strict=True):
        b.copy_(t)
    t0 = time.perf_counter()
    for b, t in zip(buffers, tensors, strict=True):
        b.copy_(t)
    copy_floor = time.perf_counter() - t0
    del buffers
    res: dict[str, Any] = {
        "state_mb": nbytes / 2**20,
        "checkpoint_mb": written / 2**20,
        "state_copy_floor_s": copy_floor,
        "async_blocking_first_s": block_s[0],
        "async_blocking_warm_s": statistics.median(block_s[1:]),
        "sync_save_s": statistics.median(sync_s),
        "async_blocking_s": statistics.median(block_s),
        "async_total_s": statistics.median(async_total),
        "raw_write_s": statistics.median(raw_s),
    }
    res["async_blocking_ratio"] = res["async_blocking_s"] / res["sync_save_s"]
    res["async_blocking_warm_ratio"] = res["async_blocking_warm_s"] / res["sync_save_s"]
    res["local_throughput_ratio"] = res["raw_write_s"] / res["sync_save_s"]
    res["local_dcp_mb_s"] = res["checkpoint_mb"] / res["sync_save_s"]
    res["local_raw_mb_s"] = res["checkpoint_mb"] / res["raw_write_s"]
    if s3 is not None:
        res.update(_bench_s3(state, written, reps, s3))
    dist.destroy_process_group()
    return res


def _bench_s3(state: Any, nbytes: int, reps: int, s3: dict[str, str]) -> dict[str, Any]:
    import boto3
    from boto3.s3.transfer import TransferConfig

    from trainer.checkpoint import CheckpointStore

    os.environ.update(s3)
    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"])
    client.create_bucket(Bucket="bench")
    # 8 writer threads: object stores gain from more parallel PUTs than a local disk
    store = CheckpointStore("s3://bench/ckpt", keep=2, config_hash="bench", thread_count=8)
    dcp_s, raw_s = [], []
    payload = os.urandom(nbytes)
    cfg = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=16 << 20, max_concurrency=4)
    for i in range(reps):
        t0 = time.perf_counter()
        store.save(state(), 1000 + i, asynchronous=False)
        dcp_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        client.upload_fileobj(io.BytesIO(payload), "bench", f"raw/{i}.bin", Config=cfg)
        raw_s.append(time.perf_counter() - t0)
        client.delete_object(Bucket="bench", Key=f"raw/{i}.bin")
    d, r = statistics.median(dcp_s), statistics.median(raw_s)
    return {"s3_dcp_save_s": d, "s3_raw_multipart_s": r, "s3_throughput_ratio": r / d}


def bench_checksums(work: Path, mb_target: int, reps: int) -> dict[str, Any]:
    """Save with and without checksums, alternating on one state; then verify and load the last one."""
    import zlib

    import google_crc32c
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from trainer.checkpoint import CheckpointStore

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    model, opt, _ = _state(mb_target)

    def state() -> dict[str, Any]:
        msd, osd = get_state_dict(model, opt)
        return {"model": msd, "optim": osd}

    stores = {
        on: CheckpointStore(str(work / f"crc-{on}"), keep=2, config_hash="bench", thread_count=4)
        for on in (True, False)
    }
    stores[False].checksums = False  # a class default (True) in the trainer; off only to measure the cost
    times: dict[tuple[bool, str], list[float]] = {
        (on, k): [] for on in (True, False) for k in ("sync", "block")
    }
    step = 0
    for _ in range(reps):
        for on in (False, True):
            st = stores[on]
            step += 1
            t0 = time.perf_counter()
            st.save(state(), step, asynchronous=False)
            times[(on, "sync")].append(time.perf_counter() - t0)
            step += 1
            t0 = time.perf_counter()
            st.save(state(), step, asynchronous=True)
            times[(on, "block")].append(time.perf_counter() - t0)
            st.wait()
    crc_store = stores[True]
    cand = crc_store.newest_committed()
    assert cand is not None and "crc32" in cand.manifest
    t0 = time.perf_counter()
    assert crc_store.verify(cand) is None
    verify_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    crc_store.load(state(), cand)
    load_s = time.perf_counter() - t0
    for st in stores.values():
        st.close()
    dist.destroy_process_group()
    buf = bytearray(os.urandom(256 << 20))

    def speed(fn: Any) -> float:
        fn()
        t0 = time.perf_counter()
        fn()
        return 256 / (time.perf_counter() - t0)

    mv, frozen = memoryview(buf), bytes(buf)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "sync_save_s_with": med[(True, "sync")],
        "sync_save_s_without": med[(False, "sync")],
        "async_blocking_s_with": med[(True, "block")],
        "async_blocking_s_without": med[(False, "block")],
        "verify_s": verify_s,
        "load_s": load_s,
        "checkpoint_mb": cand.manifest["bytes"] / 2**20,
        "zlib_crc32_mib_s": speed(lambda: zlib.crc32(mv)),
        # google-crc32c takes read-only bytes only: from a tensor's buffer that is a copy first
        "crc32c_with_copy_mib_s": speed(lambda: google_crc32c.value(bytes(mv))),
        "crc32c_mib_s": speed(lambda: google_crc32c.value(frozen)),
    }


def bench_sigterm(work: Path, reps: int) -> dict[str, Any]:
    launcher_s, worker_s = [], []
    for r in range(reps):
        log = work / f"sigterm-{r}.log"
        p = launcher(
            [
                "--model",
                "tiny",
                "--steps",
                "100000",
                "--threads",
                "1",
                "--log-interval",
                "1",
                "--checkpoint.uri",
                str(work / f"sig-ckpt-{r}"),
            ],
            log,
        )
        while not [e for e in events(log, "step_done") if e["step"] >= 20]:
            time.sleep(0.02)
        t0 = time.perf_counter()
        p.send_signal(signal.SIGTERM)
        code = p.wait()
        launcher_s.append(time.perf_counter() - t0)
        assert code == 143, log.read_text()[-2000:]
        worker_s.append(max(e["signal_to_exit_s"] for e in events(log, "preempted_exit")))
    return {
        "launcher_sigterm_to_exit_s": statistics.median(launcher_s),
        "worker_signal_to_exit_s": statistics.median(worker_s),
        "checkpoint": "tiny model, local disk",
    }


def start_moto(work: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    port = free_port()
    exe = Path(PY).with_name("moto_server")
    p = subprocess.Popen(
        [str(exe) if exe.exists() else "moto_server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=open(work / "moto.log", "wb"),
        stderr=subprocess.STDOUT,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    return p, {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--skip-step-time", action="store_true", help="only the checkpoint and signal parts")
    ap.add_argument("--only-checksums", action="store_true", help="only part 6 (checksum cost)")
    args = ap.parse_args()
    reps = 2 if args.quick else 4
    results: dict[str, Any] = {
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, no GPU",
        "python": platform.python_version(),
    }
    import torch

    results["torch"] = torch.__version__
    if args.only_checksums:
        with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
            results["checksums"] = bench_checksums(Path(tmp), 240, reps)
        print(json.dumps(results, indent=2))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
        work = Path(tmp)
        results["step_time"] = (
            {"trainer_step_s": float("nan"), "bare_step_s": float("nan"), "overhead": float("nan")}
            if args.skip_step_time
            else bench_step_time(work, 40 if args.quick else 60, reps)
        )
        print(json.dumps({"step_time": results["step_time"]}), flush=True)
        moto, s3 = start_moto(work)
        try:
            results["checkpoint"] = bench_checkpoint(work, 240, reps, s3)
        finally:
            moto.terminate()
        print(json.dumps({"checkpoint": results["checkpoint"]}), flush=True)
        results["sigterm"] = bench_sigterm(work, reps)
        print(json.dumps({"sigterm": results["sigterm"]}), flush=True)
        results["checksums"] = bench_checksums(work, 240, reps)
        print(json.dumps({"checksums": results["checksums"]}), flush=True)
    st, ck, sg = results["step_time"], results["checkpoint"], results["sigterm"]
    rows = [
        (
            "trainer step vs bare DDP loop",
            f"{st['trainer_step_s'] * 1e3:.1f} ms vs {st['bare_step_s'] * 1e3:.1f} ms",
            f"overhead {st['overhead']:+.1%}",
            "< 3%",
        ),
        (
            "async save blocking vs sync save",
            f"{ck['async_blocking_s']:.3f} s vs {ck['sync_save_s']:.3f} s ({ck['checkpoint_mb']:.0f} MB)",
            f"{ck['async_blocking_ratio']:.1%}",
            "< 10%",
        ),
        (
            "  warm (after 1st save) / copy floor",
            f"{ck['async_blocking_warm_s']:.3f} s / {ck['state_copy_floor_s']:.3f} s",
            f"{ck['async_blocking_warm_ratio']:.1%}",
            "< 10%",
        ),
        (
            "DCP local write vs raw write+fsync",
            f"{ck['local_dcp_mb_s']:.0f} vs {ck['local_raw_mb_s']:.0f} MB/s",
            f"{ck['local_throughput_ratio']:.0%}",
            ">= 70%",
        ),
        (
            "DCP to S3 (moto) vs boto3 multipart",
            f"{ck['s3_dcp_save_s']:.2f} s vs {ck['s3_raw_multipart_s']:.2f} s",
            f"{ck['s3_throughput_ratio']:.0%}",
            ">= 80%",
        ),
        (
            "sync save with / without CRC-32s",
            f"{results['checksums']['sync_save_s_with']:.3f} s / {results['checksums']['sync_save_s_without']:.3f} s",
            f"{results['checksums']['sync_save_s_with'] / results['checksums']['sync_save_s_without'] - 1:+.1%}",
            "",
        ),
        (
            "async blocking with / without CRC-32s",
            f"{results['checksums']['async_blocking_s_with']:.3f} s / "
            f"{results['checksums']['async_blocking_s_without']:.3f} s",
            "",
            "",
        ),
        (
            "SIGTERM -> exit 143",
            f"launcher {sg['launcher_sigterm_to_exit_s']:.2f} s, "
            f"workers {sg['worker_signal_to_exit_s']:.2f} s",
            "",
            "within grace",
        ),
    ]
    print()
    for name, raw, ratio, goal in rows:
        print(f"{name:40} {raw:45} {ratio:18} goal {goal}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
