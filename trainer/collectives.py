"""``python -m torch.distributed.run ... -m trainer.collectives``: the NCCL preflight's bandwidth sweep.

`trainplane nccl-test JOBSTACK` runs this module in the trainer image, on the job's pool, fabric and
placement, so it measures the path training will use: the same torch build, NCCL, NCCL plugin and NCCL
environment. It times ``all_gather_single`` / ``all_reduce`` over a range of message sizes and
reports, per size, the algorithm and bus bandwidth exactly as nccl-tests defines them
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): for a message of ``S`` bytes
taking ``t`` seconds, ``algbw = S / t`` and ``busbw = algbw * factor`` with factor ``(n-1)/n`` for
all_gather (``S`` the gathered output) and ``2(n-1)/n`` for all_reduce. Bus bandwidth is what the
published per-fabric figures quote, so it is what the floor is compared with.

Why torch rather than the nccl-tests binaries: nccl-tests needs MPI (and SSH between pods) to span
nodes; torch's collectives call the same ``ncclAllGather`` / ``ncclAllReduce`` and bootstrap through the
job's own rendezvous, so the preflight runs with no extra image or launcher.

Rank 0 prints a table like nccl-tests and one machine-readable line, ``RESULT_PREFIX {json}``, that the
CLI reads from the pod's log. Exit 0 when the peak bus bandwidth reaches ``--floor-gbps`` (or no floor is
given), 1 when it does not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from trainer.config import ConfigError
from trainer.envscript import apply_env_script
from trainer.netplugin import check_efa_plugin

RESULT_PREFIX = "trainplane-collectives-result:"
COLLECTIVES = ("all_gather", "all_reduce")


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor.

    >>> bus_factor("all_gather", 16), bus_factor("all_reduce", 16)
    (0.9375, 1.875)
    """
    n = world_size
    if collective == "all_gather":
        return (n - 1) / n
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    raise ValueError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")


def message_sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """Sizes from min to max, multiplying by factor (nccl-tests' -b/-e/-f).

    >>> message_sizes(1 << 20, 8 << 20)
    [1048576, 2097152, 4194304, 8388608]
    """
    if min_bytes <= 0 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"bad sweep: min {min_bytes}, max {max_bytes}, factor {factor}")
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= factor
    return sizes


def parse_size(text: str) -> int:
    """'64K', '1M', '8G' (powers of 1024, as nccl-tests reads them) or plain bytes.

    >>> parse_size("8G"), parse_size("512")
    (8589934592, 512)
    """
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    try:
        if t and t[-1] in units:
            return int(t[:-1]) * units[t[-1]]
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 64K, 1M or 8G") from None


@dataclass(frozen=True)
class Row:
    """One message size: bytes, time per operation (microseconds), algorithm and bus bandwidth (GB/s, 1e9)."""

    size: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float


@dataclass(frozen=True)
class Result:
    collective: str
    world_size: int
    backend: str
    rows: list[Row]
    floor_gbps: float | None

    @property
    def peak_busbw_gbps(self) -> float:
        return max((r.busbw_gbps for r in self.rows), default=0.0)

    @property
    def passed(self) -> bool:
        return self.floor_gbps is None or self.peak_busbw_gbps >= self.floor_gbps

    def to_json(self) -> str:
        data = asdict(self)
        data["peak_busbw_gbps"] = self.peak_busbw_gbps
        data["passed"] = self.passed
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Result:
        data = json.loads(text)
        return cls(
            collective=data["collective"],
            world_size=int(data["world_size"]),
            backend=data["backend"],
            rows=[Row(**r) for r in data["rows"]],
            floor_gbps=data.get("floor_gbps"),
        )


def find_result(log: str) -> Result | None:
    """The last result line in a pod's log, or None when the run never got that far."""
    for line in reversed(log.splitlines()):
        if line.startswith(RESULT_PREFIX + " "):
            return Result.from_json(line[len(RESULT_PREFIX) + 1 :])
    return None


def table(result: Result) -> str:
    """The sweep as nccl-tests prints it (size, time, algbw, busbw)."""
    lines = [
        f"# {result.collective} over {result.world_size} ranks ({result.backend})",
        f"# {'size (B)':>14} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}",
    ]
    for r in result.rows:
        lines.append(f"  {r.size:>14} {r.time_us:>12.1f} {r.algbw_gbps:>13.2f} {r.busbw_gbps:>13.2f}")
    floor = "no floor" if result.floor_gbps is None else f"floor {result.floor_gbps:.1f} GB/s"
    verdict = "ok" if result.passed else "BELOW FLOOR"
    lines.append(f"# peak busbw {result.peak_busbw_gbps:.2f} GB/s, {floor}: {verdict}")
    return "\n".join(lines)


def _sweep(collective: str, sizes: Sequence[int], warmup: int, iters: int) -> tuple[list[Row], str]:
    import torch
    import torch.distributed as dist

    from trainer.distributed import DistContext

    ctx = DistContext.from_env()
    backend = "nccl" if ctx.cuda else "gloo"
    if ctx.cuda:
        torch.cuda.set_device(ctx.device)
    dist.init_process_group(backend)
    n = dist.get_world_size()
    # torch 2.13 renamed all_gather_into_tensor (deprecated there); older images have only the old name.
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    elem = 4  # float32, as nccl-tests' default -d float
    rows = []
    try:
        for size in sizes:
            numel = max(n, size // elem // n * n)  # divisible by the world size for all_gather
            out = torch.empty(numel, dtype=torch.float32, device=ctx.device)
            inp = out[: numel // n].clone() if collective == "all_gather" else out

            def op(out=out, inp=inp) -> None:
                if collective == "all_gather":
                    gather(out, inp)
                else:
                    dist.all_reduce(out)

            for _ in range(warmup):
                op()
            if ctx.cuda:
                torch.cuda.synchronize()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                op()
            if ctx.cuda:
                torch.cuda.synchronize()
            # The slowest rank sets the time, as nccl-tests reports it.
            elapsed = torch.tensor([time.perf_counter() - start], device=ctx.device)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            t = float(elapsed.item()) / iters
            nbytes = numel * elem
            algbw = nbytes / t / 1e9
            rows.append(Row(nbytes, t * 1e6, algbw, algbw * bus_factor(collective, n)))
    finally:
        dist.destroy_process_group()
    return rows, backend


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.collectives", description=__doc__.split("\n")[0])
    p.add_argument("--collective", choices=COLLECTIVES, default="all_gather")
    p.add_argument("--min-bytes", type=parse_size, default=parse_size("1M"))
    p.add_argument("--max-bytes", type=parse_size, default=parse_size("8G"))
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--floor-gbps", type=float, default=None)
    a = p.parse_args(argv)
    try:
        sizes = message_sizes(a.min_bytes, a.max_bytes, a.factor)
        apply_env_script()  # the fabric's NCCL settings, as the launcher applies them for training
        check_efa_plugin()  # EFA without NCCL's net plugin measures TCP: say so instead
    except (ValueError, ConfigError) as e:
        print(f"trainer.collectives: {e}", file=sys.stderr)
        return 2
    rows, backend = _sweep(a.collective, sizes, a.warmup, a.iters)
    if int(os.environ.get("RANK", 0)) != 0:
        return 0
    result = Result(a.collective, int(os.environ.get("WORLD_SIZE", 1)), backend, rows, a.floor_gbps)
    print(table(result), flush=True)
    print(f"{RESULT_PREFIX} {result.to_json()}", flush=True)
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
