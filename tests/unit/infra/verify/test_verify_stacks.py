"""Every reference stack verifies clean, offline; a mockplan.py dump verifies like the offline plan; the
CLI's exit codes. (On a branch without the issue-10 fixes the clean test fails, listing the defects.)"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from infra.cli import main
from infra.verify import plan_from_stack, verify
from tests.helpers.plans import stack_files
from tests.helpers.verify_plans import edit, plan, prometheus_class, release

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


# Every reference stack: platforms, jobs (on a platform or a fleet) and fleets (verify FLEET).
@pytest.mark.parametrize("path", stack_files(), ids=lambda p: p.name)
def test_every_reference_stack_verifies_clean(path: Path):
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    report = verify(plan(name) if "trainplane:platform" in path.read_text() else plan_from_stack(str(path)))
    assert report.ok, "\n".join(f.line() for f in report.findings)


def test_cli_exit_codes_and_json(tmp_path, capsys):
    assert main(["verify", "no-such-stack"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["verify", "--dump", str(bad)]) == 2
    assert "cannot read a plan dump" in capsys.readouterr().err
    # Offline an existing cluster leaves class and enforcement to the live check: notes, no failure.
    assert main(["verify", "onprem-dev", "--check", "storage", "--check", "network", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["status"] for c in doc["checks"]] == ["pass", "pass"]
    assert doc["checks"][0]["notes"]
    # A failing check exits 1: a dump whose Prometheus volume names a class nobody creates.
    broken = edit(plan("aws-dev"), release("kube-prometheus-stack"), prometheus_class("nope"))
    dump = tmp_path / "broken.json"
    dump.write_text(
        json.dumps(
            {
                "stack": "aws-dev",
                "resources": [asdict(r) for r in broken.resources],
                "outputs": broken.outputs,
            }
        )
    )
    assert main(["verify", "--dump", str(dump), "--check", "storage"]) == 1
    assert "storage: PVC monitoring/prometheus-kube-prometheus-stack-prometheus-db" in capsys.readouterr().out
