"""The job's JobSet validates against its CRD schema (../shared/checks/crd_validate.py, a process of its own;
tests/unit/infra/test_training_job.py has the rest)."""

from __future__ import annotations

from infra.render import kubernetes_objects
from tests.helpers import procs
from tests.helpers.jobs import (
    EFA_REF,
    efa_job,
    efa_platform,
    fabric_plan,
    plan_job,
    reference_plan,
)
from tests.helpers.plans import ROOT


def test_jobset_validates_against_its_crd(tmp_path):
    """JobSet v0.12.0's CRD schema and webhook defaults (../shared/checks/crd_validate.py)."""
    import sys

    import yaml

    plans = (reference_plan(), plan_job(efa_job(), {EFA_REF: efa_platform()}), fabric_plan())
    for i, result in enumerate(plans):
        (js,) = [o for o in kubernetes_objects(result) if o["kind"] == "JobSet"]
        (tmp_path / f"jobset-{i}.yaml").write_text(yaml.safe_dump(js))
    check = ROOT.parent / "shared" / "checks" / "crd_validate.py"
    proc = procs.run([sys.executable, str(check), str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
