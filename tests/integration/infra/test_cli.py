"""Each CLI command once as a user runs it: a real process (`python -m infra.cli`), its exit code, what it
prints. Everything else about the commands runs in-process (tests/unit/infra/test_cli.py and others)."""

from __future__ import annotations

import json
import sys

from tests.helpers import procs
from tests.helpers.cli import trainplane
from tests.helpers.plans import ROOT

ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "160"}


def test_plan_json_describes_the_onprem_stack():
    proc = trainplane("plan", "onprem-dev", "--json", env=ENV)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["cloud"] == "kubernetes"
    assert data["gpus"] == {"min": 16, "max": 16}
    assert data["outputs"]["kubeconfig"] == "[secret]"
    assert data["tree"][0]["type"] == "trainplane:index:GpuPlatform"
    assert data["counts"]["pulumi:providers:kubernetes"] == 1


def test_python_dash_m_reports_a_bad_job_stack_as_bad_input_not_an_internal_error(tmp_path):
    # verify raises infra.cli.UsageError; run as `python -m infra.cli` the module is __main__, whose own
    # copy of the class used to miss it: "internal error: UsageError", exit 1.
    bad = tmp_path / "Pulumi.bad-job.yaml"
    bad.write_text("config:\n  trainplane:job:\n    platformStack: organization/trainplane/aws-dev\n")
    p = procs.run(
        [sys.executable, "-m", "infra.cli", "verify", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert "internal error" not in p.stderr and "job.name: required" in p.stderr


def test_render_writes_the_manifests_of_a_stack(tmp_path):
    proc = trainplane("render", "onprem-dev", "--out", str(tmp_path / "out"), env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert list((tmp_path / "out").rglob("*.yaml")), proc.stdout


def test_nccl_test_without_a_cluster_prints_the_preflight(tmp_path):
    proc = trainplane("nccl-test", "gpt-small-aws-dev", env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "kind: JobSet" in proc.stdout
