"""`trainplane verify`'s text output: what the table's `skip` means is printed, not only in --json."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from infra.verify.output import print_report
from infra.verify.report import CheckResult, Report
from tests.helpers.cli import cli

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _printed(report: Report) -> list[str]:
    out = io.StringIO()
    print_report(report, Console(file=out, width=4096))
    return out.getvalue().splitlines()


def test_each_skipped_check_prints_its_reason():
    report = Report("s", "aws", "1.33", "offline", "offline plan")
    report.checks = [
        CheckResult("storage", examined=["1 claim"]),
        CheckResult("fabric", skipped="2 p5 nodes without EFA"),
        CheckResult("live-cluster", skipped="no nodes in an offline plan"),
    ]
    lines = _printed(report)
    assert "fabric: skipped: 2 p5 nodes without EFA" in lines
    assert "live-cluster: skipped: no nodes in an offline plan" in lines
    assert not any(line.startswith("storage: skipped") for line in lines)


def test_verify_text_says_why_as_json_does():
    text = cli("verify", "aws-dev", cached=True)
    data = cli("verify", "aws-dev", "--json", cached=True)
    assert text.returncode == data.returncode == 0, text.stderr
    skipped = {c["name"]: c["skipped"] for c in json.loads(data.stdout)["checks"] if c["status"] == "skip"}
    assert skipped, "aws-dev has a skipped check (fabric: no pool with a GPU fabric)"
    for name, reason in skipped.items():
        assert f"{name}: skipped: {reason}" in text.stdout.splitlines()
