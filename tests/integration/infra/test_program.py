"""The independent mock runner (../shared/checks/mockplan.py) plans every stack, and Pulumi.yaml is valid
(processes of their own; tests/unit/infra/test_program.py has the rest)."""

from __future__ import annotations

import json
import sys

import pytest

from infra import stackfile
from tests.helpers import procs
from tests.helpers.checkers import SHARED_CHECKS, run_checker
from tests.helpers.mockplan import platform_refs
from tests.helpers.plans import ROOT, cached_run_program, stack_files

STACK_NAMES = [p.name[len("Pulumi.") : -len(".yaml")] for p in stack_files()]


@pytest.mark.skipif(
    not (SHARED_CHECKS / "mockplan.py").exists(), reason="../shared/checks is not beside this checkout"
)
@pytest.mark.parametrize("stack", STACK_NAMES)
def test_independent_mock_runner_plans_every_stack(stack, mockplan, tmp_path):
    # Both runners plan the stack; a job stack reads its platform: both are fed the platform's outputs
    # from the checker's dump. The dumps and our plans are made once per session (a job stack's platform
    # is planned by its own case too; tests/helpers/mockplan.py, tests/helpers/plans.py).
    path = mockplan(stack)
    dump = json.loads(path.read_text())
    refs = {
        ref: json.loads(mockplan(name).read_text())["outputs"] for ref, name in platform_refs(stack)
    } or None
    sf = stackfile.load(stack, ROOT)
    ours = cached_run_program(sf.config, sf.name, refs, sf.secret_keys)
    assert sorted((r["type"], r["name"]) for r in dump["resources"]) == sorted(
        (r.type, r.name) for r in ours.resources
    )
    # The other independent checkers, on what the engine would be sent: nested provider inputs against the
    # SDKs' input types, Helm values against the pinned charts' defaults, custom resources against the
    # upstream CRD schemas (../shared/reference).
    # (in this process: tests/helpers/checkers.py)
    for checker in ("provider_inputs.py", "helm_values_keys.py"):
        code, out = run_checker(checker, str(path))
        assert code == 0, f"{checker}: {out[-2000:]}"
    from infra.render import render

    render(ours, tmp_path / "rendered")
    code, out = run_checker("crd_validate.py", str(tmp_path / "rendered"))
    assert code == 0, f"crd_validate.py: {out[-2000:]}"


@pytest.mark.skipif(
    not (SHARED_CHECKS / "pulumi_yaml.py").exists(), reason="../shared/checks is not beside this checkout"
)
def test_pulumi_yaml_is_valid():
    proc = procs.run(
        [sys.executable, str(SHARED_CHECKS / "pulumi_yaml.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith("valid")
