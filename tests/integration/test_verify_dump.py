"""A dump written by the independent mock runner (../shared/checks/mockplan.py, its own process) verifies like
its job stack (tests/unit/test_verify_dump.py has the rest)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.cli import main
from infra.verify.dump import load_dump
from tests.helpers.plans import ROOT
from tests.helpers.verify_plans import (
    outcome,
    stack_report,
)

MOCKPLAN = ROOT.parent / "shared" / "checks" / "mockplan.py"


def _mockplan(tmp_path: Path, stack: str, *refs: str) -> Path:
    out = subprocess.run(
        [sys.executable, str(MOCKPLAN), f"stacks/Pulumi.{stack}.yaml", *refs],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    path = tmp_path / f"{stack}.mockplan.json"
    path.write_text(out.stdout)
    return path


@pytest.mark.skipif(not MOCKPLAN.exists(), reason="../shared/checks/mockplan.py not present")
def test_a_mockplan_job_dump_verifies_like_its_stack(tmp_path: Path, capsys):
    # Compatibility input: mockplan.py records no config; the job's team and pools are recovered from
    # the pod template it sends (one node-affinity term per pool). Failed before: "pool  is not a node
    # pool of the platform".
    stack, platform = "gpt-small-aws-h100-reserved", "aws-h100-reserved"
    ref = f"organization/trainplane/{platform}"
    platform_dump = _mockplan(tmp_path, platform)
    job_dump = _mockplan(tmp_path, stack, "--ref", f"{ref}={platform_dump}")
    assert main(["verify", "--dump", str(job_dump), "--ref", f"{ref}={platform_dump}", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(c["name"], c["status"]) for c in doc["checks"]] == [c[:2] for c in outcome(stack_report(stack))]
    loaded = load_dump(job_dump, platform_dump)
    assert loaded.config is not None
    assert (loaded.config["team"], loaded.config["nodePools"]) == (
        "research",
        ["h100-block", "h100-od", "h100-spot"],
    )
