"""The independent mock runner (../shared/checks/mockplan.py) plans every stack, and Pulumi.yaml is valid
(processes of their own; tests/unit/test_program.py has the rest)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.plans import FLEET_JOB_STACKS, FLEET_STACKS, ROOT, stack_files

SHARED_CHECKS = ROOT.parent / "shared" / "checks"


STACK_NAMES = [p.name[len("Pulumi.") : -len(".yaml")] for p in stack_files()]


def _mockplan(stack_file: str, *extra: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, str(SHARED_CHECKS / "mockplan.py"), stack_file, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.skipif(
    not (SHARED_CHECKS / "mockplan.py").exists(), reason="../shared/checks is not beside this checkout"
)
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_independent_mock_runner_plans_every_stack(stack, plan_stack, tmp_path):
    from infra import stackfile

    job = stackfile.load(stack, ROOT).object("trainplane:job")
    extra: list[str] = []
    refs = None
    # A job stack reads its platform, a fleet stack its manager and workers: feed both runners the
    # platforms' outputs from the checker.
    platforms = [job["platformStack"]] if job is not None and "platformStack" in job else []
    platforms += list(FLEET_STACKS.get(FLEET_JOB_STACKS.get(stack, stack), ()))
    # A job on a fleet reads the fleet stack too (last: it reads the platforms before it).
    platforms += [FLEET_JOB_STACKS[stack]] if stack in FLEET_JOB_STACKS else []
    if platforms:
        refs = {}
    for platform in platforms:
        rc, dump = _mockplan(f"stacks/Pulumi.{platform.split('/')[-1]}.yaml", *extra)
        assert rc == 0, dump.get("error")
        ref_file = tmp_path / f"platform-{platform.split('/')[-1]}.json"
        ref_file.write_text(json.dumps(dump))
        extra += ["--ref", f"{platform}={ref_file}"]
        refs[platform] = dump["outputs"]
    rc, dump = _mockplan(f"stacks/Pulumi.{stack}.yaml", *extra)
    assert rc == 0, dump.get("error")
    ours = plan_stack(stack, refs)
    assert sorted((r["type"], r["name"]) for r in dump["resources"]) == sorted(
        (r.type, r.name) for r in ours.resources
    )
    # The other independent checkers, on what the engine would be sent: nested provider inputs against the
    # SDKs' input types, Helm values against the pinned charts' defaults, custom resources against the
    # upstream CRD schemas (../shared/reference).
    (tmp_path / "plan.json").write_text(json.dumps(dump))
    for checker in ("provider_inputs.py", "helm_values_keys.py"):
        proc = _check(checker, str(tmp_path / "plan.json"))
        assert proc.returncode == 0, f"{checker}: {proc.stdout[-2000:]}"
    from infra.render import render

    render(ours, tmp_path / "rendered")
    proc = _check("crd_validate.py", str(tmp_path / "rendered"))
    assert proc.returncode == 0, f"crd_validate.py: {proc.stdout[-2000:]}"


def _check(checker: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SHARED_CHECKS / checker), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(
    not (SHARED_CHECKS / "pulumi_yaml.py").exists(), reason="../shared/checks is not beside this checkout"
)
def test_pulumi_yaml_is_valid():
    proc = subprocess.run(
        [sys.executable, str(SHARED_CHECKS / "pulumi_yaml.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith("valid")
