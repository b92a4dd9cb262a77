"""`pulumi new` templates: instantiate each into a temp dir as the CLI would and plan it under mocks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
import yaml

from infra.mockcloud import run_program
from tests.conftest import ROOT
from tests.unit.test_training_job import REF, platform_outputs

TEMPLATES = ROOT / "stacks" / "templates"
SHARED_CHECKS = ROOT.parent / "shared" / "checks"


def instantiate(name: str, dest: Path, answers: dict[str, str] | None = None) -> dict[str, str]:
    """Copy a template, fill its placeholders and return the stack config `pulumi new` would write."""
    shutil.copytree(TEMPLATES / name, dest, dirs_exist_ok=True)
    for f in dest.rglob("*"):
        if f.is_file():
            f.write_text(f.read_text().replace("${PROJECT}", "my-ml").replace("${DESCRIPTION}", "test"))
    project = yaml.safe_load((dest / "Pulumi.yaml").read_text())
    config = {k: str(v.get("default", "")) for k, v in project["template"]["config"].items()}
    config.update(answers or {})
    (dest / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": config}))
    return config


@pytest.mark.parametrize("name", ["gpu-platform", "training-job"])
def test_template_project_file_is_valid(name, tmp_path):
    instantiate(name, tmp_path)
    project = yaml.safe_load((tmp_path / "Pulumi.yaml").read_text())
    assert project["name"] == "my-ml" and project["runtime"]["name"] == "python"
    assert all(k.startswith("trainplane:") for k in project["template"]["config"])
    if (SHARED_CHECKS / "pulumi_yaml.py").exists():
        proc = subprocess.run(
            [sys.executable, str(SHARED_CHECKS / "pulumi_yaml.py"), str(tmp_path / "Pulumi.yaml")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize(
    ("answers", "cluster_type"),
    [
        ({}, "aws:eks/cluster:Cluster"),
        (
            {
                "trainplane:cloud": "gcp",
                "trainplane:region": "us-central1",
                "trainplane:project": "my-ml-project",
            },
            "gcp:container/cluster:Cluster",
        ),
        ({"trainplane:cloud": "kubernetes", "trainplane:gpu": "A100-80GB"}, "pulumi:providers:kubernetes"),
    ],
    ids=["aws", "gcp", "kubernetes"],
)
def test_gpu_platform_template_plans(tmp_path, answers, cluster_type):
    config = instantiate("gpu-platform", tmp_path, answers)
    result = run_program(config, "dev", program=tmp_path / "__main__.py")
    assert result.of_type(cluster_type)
    assert result.outputs["clusterName"] == "ml-dev"
    (gpu,) = [p for p in result.outputs["nodePools"] if p["gpu"]]
    assert gpu["gpusPerNode"] == 8 and gpu["maxNodes"] == 2
    assert result.outputs["teams"][0]["gpuQuota"] == 16


def test_gpu_platform_template_reports_bad_answers_as_config_errors(tmp_path):
    config = instantiate("gpu-platform", tmp_path, {"trainplane:gpusPerNode": "3"})
    with pytest.raises(
        pulumi.RunError, match=r"platform.nodePools\[1\].gpusPerNode: H100 does not come in 3"
    ):
        run_program(config, "dev", program=tmp_path / "__main__.py")


def test_training_job_template_plans_on_the_recorded_platform(tmp_path):
    config = instantiate("training-job", tmp_path)
    result = run_program(
        config, "dev", stack_refs={REF: platform_outputs("aws-dev")}, program=tmp_path / "__main__.py"
    )
    (job,) = result.of_type("kubernetes:batch/v1:Job")
    assert job.inputs["metadata"]["namespace"] == "research"
    assert job.inputs["spec"]["parallelism"] == 4
    assert result.outputs["checkpointUri"].startswith("s3://ml-dev-ckpt-")
