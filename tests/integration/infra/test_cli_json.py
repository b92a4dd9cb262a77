"""`plan --json` is byte-identical across processes (tests/unit/infra/test_cli_json.py has the rest)."""

from __future__ import annotations

import sys

from tests.helpers import procs
from tests.helpers.plans import ROOT

STACK = "aws-h100-reserved"  # its critical path's third step used to change between runs


def test_plan_json_is_byte_identical_across_processes():
    # Separate processes hash strings differently (a set's order changes): both must print the same.
    outs = []
    for seed in ("1", "2"):
        proc = procs.run(
            [sys.executable, "-m", "infra.cli", "plan", STACK, "--json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed},
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
