"""`trainplane plan` as a user runs it: a real process, its exit code, what it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, stack_files


def trainplane(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "infra.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "160"},
    )


def test_plan_json_describes_the_onprem_stack():
    proc = trainplane("plan", "onprem-dev", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["cloud"] == "kubernetes"
    assert data["gpus"] == {"min": 16, "max": 16}
    assert data["outputs"]["kubeconfig"] == "[secret]"
    assert data["tree"][0]["type"] == "trainplane:index:GpuPlatform"
    assert data["counts"]["pulumi:providers:kubernetes"] == 1


def test_plan_prints_a_readable_summary():
    proc = trainplane("plan", "onprem-dev")
    assert proc.returncode == 0, proc.stderr
    for heading in ("Resources by type", "Node pools and cost", "At scale", "Critical path"):
        assert heading in proc.stdout


def test_invalid_stack_exits_2_with_one_line_per_problem(tmp_path):
    bad = tmp_path / "Pulumi.bad.yaml"
    text = (ROOT / "stacks" / "Pulumi.aws-dev.yaml").read_text()
    bad.write_text(
        text.replace("gpu: H100", "gpu: H1000").replace(
            "maxNodes: 4\n      - name: h100", "maxNodez: 4\n      - name: h100"
        )
    )
    proc = trainplane("plan", str(bad))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == f"{bad}: 2 problem(s)"
    assert "platform.nodePools[0].maxNodez: unknown key; did you mean 'maxNodes'?" in lines
    assert any(line.startswith("platform.nodePools[1].gpu: 'H1000' is not a known GPU") for line in lines)
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("config: [unclosed", "not valid YAML"),
        (
            "config:\n  platform: {cloud: aws}\n",
            "config key 'platform' needs a namespace, e.g. trainplane:platform",
        ),
        ("config:\n  aws:region: us-east-1\n", "no trainplane:platform (or trainplane:job) object in config"),
    ],
)
def test_unreadable_stack_files_are_named(tmp_path, content, expected):
    f = tmp_path / "Pulumi.x.yaml"
    f.write_text(content)
    proc = trainplane("plan", str(f))
    assert proc.returncode == 2
    assert expected in proc.stderr and str(f) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_stack_is_a_usage_error():
    proc = trainplane("plan", "no-such-stack")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"{ROOT / 'stacks' / 'Pulumi.no-such-stack.yaml'}: no such stack file"


@pytest.mark.parametrize("stack", [p.name[len("Pulumi.") : -len(".yaml")] for p in stack_files()])
def test_every_stack_file_plans(stack):
    proc = trainplane("plan", stack, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["resources"] >= 1
    assert data["criticalPath"]["steps"], "a plan always has a critical path"


def test_python_dash_m_reports_a_bad_job_stack_as_bad_input_not_an_internal_error(tmp_path):
    # verify raises infra.cli.UsageError; run as `python -m infra.cli` the module is __main__, whose own
    # copy of the class used to miss it: "internal error: UsageError", exit 1.
    bad = tmp_path / "Pulumi.bad-job.yaml"
    bad.write_text("config:\n  trainplane:job:\n    platformStack: organization/trainplane/aws-dev\n")
    p = subprocess.run(
        [sys.executable, "-m", "infra.cli", "verify", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert "internal error" not in p.stderr and "job.name: required" in p.stderr
