"""Benchmark: planning a stack from process start to exit, beside the bare cost of importing its SDKs.

For each stack, one process runs `trainplane plan <stack> --json`; another imports exactly the pulumi
SDK modules that the plan loaded (recorded from the plan's own sys.modules) and exits. Runs alternate so
machine noise hits both sides alike; medians and the ratio are printed, and `--markdown` prints a table
row for docs/BENCHMARKS.md.

    .venv/bin/python tests/benchmarks/bench_plan.py [--repeat 5] [--markdown] [stack ...]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from infra.mockcloud import run_stack
result = run_stack(sys.argv[1])
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("pulumi", "pulumi_aws", "pulumi_gcp", "pulumi_kubernetes"))
print(json.dumps({"modules": mods, "resources": sum(r.custom for r in result.resources)}))
"""


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def bench(stack: str, repeat: int) -> dict:
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, stack], cwd=ROOT, check=True, capture_output=True, text=True
    )
    info = json.loads(probe.stdout.strip().splitlines()[-1])
    # `import pulumi` brings its own runtime; name the SDK modules the program pulled in on top of it.
    imports = "import pulumi, " + ", ".join(m for m in info["modules"] if m.split(".")[0] != "pulumi")
    plan_cmd = [sys.executable, "-m", "infra.cli", "plan", stack, "--json"]
    import_cmd = [sys.executable, "-c", imports]
    plans, bare = [], []
    timed(plan_cmd)  # warm the page cache once for both sides
    for _ in range(repeat):
        plans.append(timed(plan_cmd))
        bare.append(timed(import_cmd))
    sdks = sorted({m.split(".")[0] for m in info["modules"]} - {"pulumi"})
    return {
        "stack": stack,
        "resources": info["resources"],
        "sdks": sdks,
        "plan_s": statistics.median(plans),
        "imports_s": statistics.median(bare),
        "ratio": statistics.median(plans) / statistics.median(bare),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("stacks", nargs="*", default=["aws-dev", "gcp-dev"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows = [bench(s, args.repeat) for s in args.stacks]
    machine = f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores, Python {platform.python_version()}"
    if args.markdown:
        print(f"Measured {date.today()} on {machine}, median of {args.repeat} alternating runs.\n")
        print(
            "| stack | resources | SDKs imported | plan, process start to exit | bare SDK imports | ratio |"
        )
        print("| --- | ---: | --- | ---: | ---: | ---: |")
        for r in rows:
            print(
                f"| {r['stack']} | {r['resources']} | {', '.join(r['sdks'])} | {r['plan_s']:.2f} s "
                f"| {r['imports_s']:.2f} s | {r['ratio']:.2f}x |"
            )
    else:
        for r in rows:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
