"""`pulumi new` templates: instantiate each into a temp dir as the CLI would and plan it under mocks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pulumi
import pytest
import yaml

from infra.mockcloud import run_program
from tests.helpers.jobs import JOBSET
from tests.helpers.plans import ROOT
from tests.helpers.templates import TEMPLATES, instantiate

SHARED_CHECKS = ROOT.parent / "shared" / "checks"


@pytest.mark.parametrize("name", ["gpu-platform", "training-job"])
def test_template_project_file_is_valid(name, tmp_path):
    template = yaml.safe_load((TEMPLATES / name / "Pulumi.yaml").read_text())
    assert all(k.startswith("trainplane:") for k in template["template"]["config"])
    tmp_path = tmp_path / "my-ml"
    instantiate(name, tmp_path)
    project = yaml.safe_load((tmp_path / "Pulumi.yaml").read_text())
    assert project["name"] == "my-ml" and project["runtime"]["name"] == "python"
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
        # No region answer: the template has no region default (none could follow the cloud answer),
        # so the program picks the cloud's own.
        ({"trainplane:cloud": "gcp", "trainplane:project": "my-ml-project"}, "gcp:container/cluster:Cluster"),
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
    region = {"aws": "us-east-1", "gcp": "us-central1"}.get(answers.get("trainplane:cloud", "aws"))
    assert result.outputs.get("region") == region


def test_gpu_platform_template_reports_bad_answers_as_config_errors(tmp_path):
    config = instantiate("gpu-platform", tmp_path, {"trainplane:gpusPerNode": "3"})
    with pytest.raises(
        pulumi.RunError, match=r"platform.nodePools\[1\].gpusPerNode: H100 does not come in 3"
    ):
        run_program(config, "dev", program=tmp_path / "__main__.py")


def test_training_job_template_defaults_run_on_the_platform_template_defaults(tmp_path):
    """The job template's team, pool, node count, GPUs and platformStack are what the platform template
    makes: the job validates against those outputs (it failed with "job.team: 'research' is not a team",
    "job.nodePool: 'h100' is not a node pool", "4 nodes is more than pool gpu can scale to (2)")."""
    platform_dir, job_dir = tmp_path / "gpu-platform", tmp_path / "training-job"
    platform = run_program(
        instantiate("gpu-platform", platform_dir), "dev", program=platform_dir / "__main__.py"
    )
    config = instantiate("training-job", job_dir)
    ref = config["trainplane:platformStack"]
    assert ref == "organization/gpu-platform/dev"
    result = run_program(config, "dev", stack_refs={ref: platform.outputs}, program=job_dir / "__main__.py")
    (jobset,) = result.of_type(JOBSET)
    assert jobset.inputs["metadata"]["namespace"] == platform.outputs["teams"][0]["name"] == "ml"
    (workers,) = jobset.inputs["spec"]["replicatedJobs"]
    assert workers["template"]["spec"]["parallelism"] == 2
    assert result.outputs["checkpointUri"].startswith("s3://ml-dev-ckpt-")


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`trainplane ...` run from a project directory, as a user does after `pulumi new` (the library is
    importable from this checkout, as it is once installed from requirements.txt)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "infra.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_both_templates_with_their_defaults_plan_and_verify_side_by_side(tmp_path):
    """`pulumi new` of each template with every default, side by side, then `trainplane plan dev` and
    `trainplane verify dev` in each project directory: the stacks hold the templates' flat answers and
    the job finds its platform stack (organization/gpu-platform/dev) in the sibling project. Before, the
    first plan answered "no such stack file" (stacks/ only) or "no trainplane:platform (or trainplane:job)
    object in config"."""
    platform_dir, job_dir = tmp_path / "gpu-platform", tmp_path / "training-job"
    instantiate("gpu-platform", platform_dir)
    instantiate("training-job", job_dir)
    plans = {}
    for d in (platform_dir, job_dir):
        plan = _cli(d, "plan", "dev", "--json")
        assert plan.returncode == 0, plan.stdout + plan.stderr
        plans[d.name] = json.loads(plan.stdout)
        verify = _cli(d, "verify", "dev")
        assert verify.returncode == 0, verify.stdout + verify.stderr
    assert plans["gpu-platform"]["cloud"] == plans["training-job"]["cloud"] == "aws"
    assert plans["gpu-platform"]["counts"]["aws:eks/cluster:Cluster"] == 1
    assert plans["training-job"]["counts"][JOBSET] == 1


def test_a_template_stack_that_holds_the_full_object_plans_from_the_object(tmp_path):
    """The template programs prefer `trainplane:platform` when it is set; so does `trainplane plan`."""
    from infra import stackfile

    config = instantiate("gpu-platform", tmp_path / "gpu-platform")
    derived = stackfile.load(tmp_path / "gpu-platform" / "Pulumi.dev.yaml").object("trainplane:platform")
    assert isinstance(derived, dict) and derived["cluster"]["name"] == "ml-dev"
    full = {**derived, "cluster": {**derived["cluster"], "name": "by-hand"}}
    doc = {"config": {**config, "trainplane:platform": full}}
    (tmp_path / "gpu-platform" / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    loaded = stackfile.load(tmp_path / "gpu-platform" / "Pulumi.dev.yaml").object("trainplane:platform")
    assert loaded == full


def _checkout_copy(dest: Path) -> Path:
    """This checkout's tracked files as they are on disk (a clean clone, without build leftovers)."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.mark.slow
def test_make_dist_builds_the_wheel_the_templates_requirements_install(tmp_path):
    """The install story of the README: `make dist`, export TRAINPLANE_DIST, and pip resolves each
    template's requirements.txt from that wheel without any index (they pinned trainplane==0.1.0, which no
    index serves, with no way to point pip elsewhere). The build prints no setuptools `project.license`
    deprecation (printed on each build step with the TOML-table form) and the wheel holds every file the
    library ships."""
    src = _checkout_copy(tmp_path / "src")
    build = subprocess.run(
        ["make", "dist", f"PY={sys.executable}"], cwd=src, capture_output=True, text=True, timeout=600
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert "project.license" not in build.stdout + build.stderr
    (wheel,) = (src / "dist").glob("trainplane-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    shipped = {
        str(p.relative_to(src))
        for pkg in ("components", "infra", "trainer")
        for p in (src / pkg).rglob("*")
        if p.is_file() and p.name != "Dockerfile"
    }
    assert shipped - names == set()

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for name in ("gpu-platform", "training-job"):
        reqs = TEMPLATES / name / "requirements.txt"
        assert f"trainplane=={version}" in reqs.read_text().splitlines()
        report = tmp_path / f"{name}.json"
        dry_run = ["install", "--dry-run", "--no-deps", "--ignore-installed", "--no-index", "--quiet"]
        pip = subprocess.run(
            [sys.executable, "-m", "pip", *dry_run, "--report", str(report), "-r", str(reqs)],
            env={**os.environ, "TRAINPLANE_DIST": str(src / "dist")},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert pip.returncode == 0, pip.stdout + pip.stderr
        (install,) = json.loads(report.read_text())["install"]
        assert install["download_info"]["url"] == wheel.as_uri()


def test_stack_files_are_found_where_pulumi_keeps_them(tmp_path):
    """`stackConfigDir` of Pulumi.yaml, else next to it (Pulumi's default); an org/project/stack name in the
    project of that name, here or beside it (pulumi v3.259.0 sdk/go/common/workspace/project.go
    StackConfigDir). Only stacks/ was looked at before."""
    from infra import stackfile

    here, there = tmp_path / "jobs", tmp_path / "platform-dir"
    here.mkdir()
    there.mkdir()
    (here / "Pulumi.yaml").write_text("name: jobs\nruntime: python\nstackConfigDir: envs\n")
    (there / "Pulumi.yaml").write_text("name: platform\nruntime: python\n")
    assert stackfile.resolve("dev", here) == here / "envs" / "Pulumi.dev.yaml"
    assert stackfile.resolve("organization/jobs/dev", here) == here / "envs" / "Pulumi.dev.yaml"
    assert stackfile.resolve("organization/platform/prod", here) == there / "Pulumi.prod.yaml"
    assert stackfile.resolve("acme/platform/prod", here) == there / "Pulumi.prod.yaml"
