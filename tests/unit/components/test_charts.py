"""The chart pins (components/charts.py) against the upstream values files kept in ../shared/reference/charts:
no chart falls behind the newest one kept there unless it says why, every pin has its own version's values
(so the values-key checks compare with the right chart), and the docs' table lists every pin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.charts import BEHIND_REFERENCE, CHARTS
from tests.helpers.plans import ROOT

REFERENCE = ROOT.parent / "shared" / "reference" / "charts"
# Verbatim upstream values.yaml files of charts ../shared/reference does not keep (as in test_verify_facts).
LOCAL_REFERENCE = ROOT / "tests" / "data" / "charts"
needs_reference = pytest.mark.skipif(not REFERENCE.is_dir(), reason="../shared is not beside this checkout")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.lstrip("v").split("."))


def reference_versions(chart: str, *folders: Path) -> list[str]:
    """Versions of `chart` whose values.yaml is kept in `folders`, oldest first. The name must be the
    chart's followed by a version (`karpenter-crd-1.0.0` is not a `karpenter` file)."""
    pattern = re.compile(rf"{re.escape(chart)}-(v?\d+(?:\.\d+)+)\.values\.yaml")
    found = {
        m.group(1) for f in folders if f.is_dir() for p in f.iterdir() if (m := pattern.fullmatch(p.name))
    }
    return sorted(found, key=_key)


def behind(name: str) -> str | None:
    """The newest reference version when `name` is pinned below it, else None."""
    kept = reference_versions(CHARTS[name].chart, REFERENCE, LOCAL_REFERENCE)
    if kept and _key(CHARTS[name].version) < _key(kept[-1]):
        return kept[-1]
    return None


def test_reference_versions_read_the_chart_name_exactly(tmp_path: Path):
    for name in ("karpenter-1.14.1", "karpenter-crd-1.15.0", "karpenter-1.9.0", "alloy-v1.2.0"):
        (tmp_path / f"{name}.values.yaml").write_text("{}\n")
    assert reference_versions("karpenter", tmp_path) == ["1.9.0", "1.14.1"]
    assert reference_versions("alloy", tmp_path) == ["v1.2.0"]


@needs_reference
@pytest.mark.parametrize("name", sorted(CHARTS))
def test_no_chart_is_pinned_behind_the_newest_reference_values(name: str):
    newest = behind(name)
    assert newest is None or name in BEHIND_REFERENCE, (
        f"{name} is pinned at {CHARTS[name].version} but ../shared/reference/charts keeps {newest}: bump it in "
        "components/charts.py (re-reading the templates for every value sent) or list it in BEHIND_REFERENCE "
        "with the reason"
    )


@needs_reference
def test_charts_listed_behind_the_reference_are_behind_it_and_say_why():
    for name, reason in BEHIND_REFERENCE.items():
        assert name in CHARTS and reason.strip(), name
        assert behind(name) is not None, (
            f"{name} is no longer behind the reference: drop it from BEHIND_REFERENCE"
        )


@needs_reference
@pytest.mark.parametrize("name", sorted(CHARTS))
def test_every_pin_has_the_values_of_its_own_version(name: str):
    """The values-key checks fall back to the newest file kept when the pinned version has none."""
    pinned = CHARTS[name]
    assert pinned.version in reference_versions(pinned.chart, REFERENCE, LOCAL_REFERENCE), (
        f"no values.yaml of {pinned.chart} {pinned.version} in ../shared/reference/charts or tests/data/charts"
    )


def test_the_docs_table_lists_every_pin():
    text = (ROOT / "docs" / "components.md").read_text()
    section = text.split("## Pinned charts", 1)[1].split("\n## ", 1)[0]
    rows = {
        cells[0].strip("` "): cells[1].strip("` ")
        for line in section.splitlines()
        if line.startswith("| `") and len(cells := line.strip("|").split("|")) > 2
    }
    assert {name: CHARTS[name].version for name in CHARTS} == {n: v for n, v in rows.items() if n in CHARTS}
    assert set(CHARTS) <= set(rows)
