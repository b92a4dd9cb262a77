"""The cloud backends are plug-ins found through the `trainplane.backends` entry points: trainplane's own
three are declared in pyproject.toml, another distribution declares its own the same way, and reading
the registry imports no backend (nor a cloud SDK) until a stack asks for one."""

from __future__ import annotations

import importlib
import sys
import tomllib

import pytest
import yaml

from components import backends as registry
from components.backends import ENTRY_POINT_GROUP, backend, backend_names, installed_backends
from components.quickstart import platform_from_prompts
from infra.verify import verifiers
from infra.verify.verifier import CloudVerifier, VerifierDefaults
from infra.verify.verifiers import VERIFIER_GROUP, installed_verifiers, verifier
from tests.conftest import ROOT


def _declared() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["entry-points"][ENTRY_POINT_GROUP]


def test_the_built_in_clouds_are_declared_as_entry_points():
    declared = _declared()
    assert declared == {
        "aws": "components.aws.backend:BACKEND",
        "gcp": "components.gcp.backend:BACKEND",
        "kubernetes": "components.kubernetes.backend:BACKEND",
    }
    for name, target in declared.items():
        module, _, attribute = target.partition(":")
        assert getattr(importlib.import_module(module), attribute).name == name


def test_the_installed_metadata_declares_them_too():
    # Entry points are read from the installed metadata, written by `pip install -e .`: after a change
    # of pyproject.toml's entry points, install again.
    assert installed_backends().items() >= _declared().items(), "reinstall: pip install -e ."
    assert backend_names()[:3] == ("aws", "gcp", "kubernetes")


def test_each_installed_clouds_spec_section_is_the_module_beside_its_backend():
    """The composed spec models take each installed backend's section from <package>.spec_keys, found from
    the entry point's name before any backend is imported (components/spec/sections.py); the backend
    object names the same module."""
    from components.spec.platform import SECTIONS, NodePoolSpec
    from components.spec.sections import section_module_name

    assert section_module_name("components.aws.backend:BACKEND") == "components.aws.spec_keys"
    assert list(SECTIONS[:3]) == [backend(n).spec_keys for n in ("aws", "gcp", "kubernetes")]
    assert [s.__name__ for s in SECTIONS[:3]] == [
        section_module_name(installed_backends()[n]) for n in ("aws", "gcp", "kubernetes")
    ]
    assert {"instanceType", "machineType", "selector"} <= {
        i.alias or f for f, i in NodePoolSpec.model_fields.items()
    }


PLUGIN = """
from components.kubernetes.backend import ExistingClusterBackend

class PluginBackend(ExistingClusterBackend):  # a cloud of its own, answering as an existing cluster
    name = "plug"

BACKEND = PluginBackend()
"""


def test_another_distribution_adds_a_cloud_by_its_entry_point(tmp_path, monkeypatch):
    dist = tmp_path / "trainplane_plug-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: trainplane-plug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nplug = plug_cloud.backend:BACKEND\n")
    (tmp_path / "plug_cloud").mkdir()
    (tmp_path / "plug_cloud" / "__init__.py").write_text("")
    (tmp_path / "plug_cloud" / "backend.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry._REGISTRY, "entries", None)  # read the entry points again
    names = backend_names()
    assert names[:3] == ("aws", "gcp", "kubernetes") and "plug" in names
    assert "plug_cloud.backend" not in sys.modules  # named, not imported
    assert backend("plug").name == "plug"
    assert "plug_cloud.backend" in sys.modules
    monkeypatch.delitem(sys.modules, "plug_cloud.backend")
    monkeypatch.delitem(sys.modules, "plug_cloud")


def test_two_distributions_declaring_one_cloud_are_refused(tmp_path, monkeypatch):
    for n, target in (("a", "one.backend:BACKEND"), ("b", "two.backend:BACKEND")):
        dist = tmp_path / f"trainplane_{n}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: trainplane-{n}\nVersion: 1.0\n")
        (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nclash = {target}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="cloud backend 'clash' is declared twice"):
        installed_backends()


# ---- the verifiers: what `trainplane verify` asks each cloud (infra/verify/verifiers.py) ---------------


def test_each_built_in_cloud_has_a_verifier_declared_and_found():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"][VERIFIER_GROUP]
    assert declared == {
        "aws": "infra.verify.clouds.aws.verifier:VERIFIER",
        "gcp": "infra.verify.clouds.gcp.verifier:VERIFIER",
        "kubernetes": "infra.verify.clouds.kubernetes.verifier:VERIFIER",
    }
    assert installed_verifiers().items() >= declared.items(), "reinstall: pip install -e ."
    for name in backend_names()[:3]:
        v = verifier(name)
        assert isinstance(v, CloudVerifier) and isinstance(v, VerifierDefaults)
        assert v.name == name and type(v).__module__ == f"infra.verify.clouds.{name}.verifier"
        assert verifiers.has_verifier(name) and verifiers.missing_verifier_note(name) is None


def test_a_cloud_without_a_verifier_gets_the_defaults_and_a_note(monkeypatch):
    monkeypatch.setattr(registry._REGISTRY, "entries", {**registry._REGISTRY.loaded(), "plug": "x:BACKEND"})
    assert verifier("plug") is verifiers.DEFAULTS
    assert not verifiers.has_verifier("plug")
    assert verifiers.missing_verifier_note("plug") == (
        "cloud plug: no verifier registered (entry points trainplane.verifiers): verified as a plain "
        "Kubernetes cluster (no add-ons, cloud identity, create rules or cloud API checked)"
    )
    # No note for a name that is no backend (a fleet's plan names none).
    assert verifiers.missing_verifier_note("") is None and verifiers.missing_verifier_note("nope") is None


def test_another_distribution_adds_a_verifier_by_its_entry_point_and_a_clash_is_refused(
    tmp_path, monkeypatch
):
    dist = tmp_path / "trainplane_plug-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: trainplane-plug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{VERIFIER_GROUP}]\nplug = plug_cloud.verifier:VERIFIER\naws = plug_cloud.verifier:AWS\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="cloud verifier 'aws' is declared twice"):
        installed_verifiers()
    (dist / "entry_points.txt").write_text(f"[{VERIFIER_GROUP}]\nplug = plug_cloud.verifier:VERIFIER\n")
    assert installed_verifiers()["plug"] == "plug_cloud.verifier:VERIFIER"


def test_the_quickstarts_default_cloud_is_the_templates():
    template = yaml.safe_load((ROOT / "stacks" / "templates" / "gpu-platform" / "Pulumi.yaml").read_text())
    default = template["template"]["config"]["trainplane:cloud"]["default"]
    assert platform_from_prompts(lambda _: None)["cloud"] == default
