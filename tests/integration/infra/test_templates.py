"""The `pulumi new` templates as a user gets them: the project file, both templates planned and verified
side by side, the wheel `make dist` builds (real processes; tests/unit/infra/test_templates.py has the rest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.helpers import procs
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
        proc = procs.run(
            [sys.executable, str(SHARED_CHECKS / "pulumi_yaml.py"), str(tmp_path / "Pulumi.yaml")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stdout


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`trainplane ...` run from a project directory, as a user does after `pulumi new` (the library is
    importable from this checkout, as it is once installed from requirements.txt)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return procs.run(
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


def _checkout_copy(dest: Path) -> Path:
    """This checkout's tracked files as they are on disk (a clean clone, without build leftovers)."""
    files = procs.run(
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
    build = procs.run(
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
        pip = procs.run(
            [sys.executable, "-m", "pip", *dry_run, "--report", str(report), "-r", str(reqs)],
            env={**os.environ, "TRAINPLANE_DIST": str(src / "dist")},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert pip.returncode == 0, pip.stdout + pip.stderr
        (install,) = json.loads(report.read_text())["install"]
        assert install["download_info"]["url"] == wheel.as_uri()
