"""A dump written by the independent mock runner (../shared/checks/mockplan.py, its own process) verifies like
its job stack (tests/unit/infra/verify/test_verify_dump.py has the rest)."""

from __future__ import annotations

import json

import pytest

from infra.cli import main
from infra.verify.dump import load_dump
from tests.helpers.mockplan import MOCKPLAN, platform_refs
from tests.helpers.verify_plans import (
    outcome,
    stack_report,
)


@pytest.mark.skipif(not MOCKPLAN.exists(), reason="../shared/checks/mockplan.py not present")
def test_a_mockplan_job_dump_verifies_like_its_stack(mockplan, capsys):
    # Compatibility input: mockplan.py records no config; the job's team and pools are recovered from
    # the pod template it sends (one node-affinity term per pool). Failed before: "pool  is not a node
    # pool of the platform".
    stack, platform = "gpt-small-aws-h100-reserved", "aws-h100-reserved"
    ref = f"organization/trainplane/{platform}"
    assert platform_refs(stack) == [(ref, platform)]  # what mockplan(stack) fed its --ref
    platform_dump = mockplan(platform)
    job_dump = mockplan(stack)  # planned on platform_dump's outputs (--ref, as below)
    assert main(["verify", "--dump", str(job_dump), "--ref", f"{ref}={platform_dump}", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(c["name"], c["status"]) for c in doc["checks"]] == [c[:2] for c in outcome(stack_report(stack))]
    loaded = load_dump(job_dump, platform_dump)
    assert loaded.config is not None
    assert (loaded.config["team"], loaded.config["nodePools"]) == (
        "research",
        ["h100-block", "h100-od", "h100-spot"],
    )
