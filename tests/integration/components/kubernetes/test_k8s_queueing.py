"""Every Kueue object of the plans validates against its CRD schema (../shared/checks/crd_validate.py, a process of its
own; tests/unit/components/kubernetes/test_k8s_queueing.py has the rest)."""

from __future__ import annotations

import yaml

from tests.helpers import procs
from tests.helpers.queues import _kueue_objects, _of, _topology_cel, capacity_pools


def test_every_kueue_object_validates_against_its_crd(tmp_path):
    import sys

    from tests.helpers.plans import ROOT

    objects = _kueue_objects(capacity_pools())
    assert {o["kind"] for o in objects} == {
        "ResourceFlavor",
        "Topology",
        "ProvisioningRequestConfig",
        "AdmissionCheck",
        "ClusterQueue",
    }
    for i, o in enumerate(objects):
        (tmp_path / f"{i}-{o['kind']}.yaml").write_text(yaml.safe_dump(o))
    for t in _of(objects, "Topology"):
        assert _topology_cel(t["spec"]["levels"]) == []
    check = ROOT.parent / "shared" / "checks" / "crd_validate.py"
    proc = procs.run([sys.executable, str(check), str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 problem(s)" in proc.stdout
