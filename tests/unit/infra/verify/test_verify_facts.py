"""The facts file: every fact has a source, and the chart defaults it states match the charts' own
values.yaml kept in ../shared/reference/charts (when present)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.charts import CHARTS
from infra.verify import facts as F
from tests.helpers.plans import ROOT

REFERENCE = ROOT.parent / "shared" / "reference" / "charts"
# Verbatim upstream values.yaml files of charts ../shared/reference does not keep (source in each test).
LOCAL_REFERENCE = ROOT / "tests" / "data" / "charts"
MISSING = object()


def _versions(chart: dict) -> list[str]:
    return list(chart.get("versions") or [chart["version"]])


def test_every_cloud_and_chart_fact_names_its_source():
    def walk(node, path):
        if isinstance(node, dict):
            if (
                any(k in node for k in ("provisioner", "daemonSet", "ports", "address"))
                and "source" not in node
            ):
                yield path
            for k, v in node.items():
                yield from walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, f"{path}[{i}]")

    unsourced = list(walk(F.facts()["clouds"], "clouds")) + list(
        walk(F.facts()["storagePorts"], "storagePorts")
    )
    assert not unsourced, unsourced
    for name, chart in F.facts()["charts"].items():
        assert chart.get("source"), name


def test_the_pinned_chart_versions_are_modelled():
    for name, chart in F.facts()["charts"].items():
        assert CHARTS[name].version in _versions(chart), (name, CHARTS[name].version, _versions(chart))


def _reference_cases():
    for name, chart in F.facts()["charts"].items():
        for version in _versions(chart):
            path = REFERENCE / f"{name}-{version}.values.yaml"
            if not path.exists() and (LOCAL_REFERENCE / path.name).exists():
                path = LOCAL_REFERENCE / path.name
            for key, value in (chart.get("defaults") or {}).items():
                yield pytest.param(path, key, value, id=f"{name}-{version}:{key}")


@pytest.mark.parametrize(("path", "key", "value"), list(_reference_cases()))
def test_chart_defaults_match_the_reference_values(path: Path, key: str, value):
    if not path.exists():
        pytest.skip(f"{path.name} not in ../shared/reference/charts")
    ref = yaml.safe_load(path.read_text())
    got = F.dig(ref, key, MISSING)
    assert got is not MISSING, f"{key} is not a key of {path.name}"
    assert got == value, f"{path.name} {key}: chart says {got!r}, facts.yaml {value!r}"


def test_default_storage_class_by_version():
    assert [c["name"] for c in F.storage_classes("aws", (1, 29)) if c["default"]] == ["gp2"]
    assert [c["name"] for c in F.storage_classes("aws", (1, 33)) if c["default"]] == []
    assert [c["name"] for c in F.storage_classes("gcp", (1, 33)) if c["default"]] == ["standard-rwo"]
    assert F.storage_classes("kubernetes", (1, 33)) is None
