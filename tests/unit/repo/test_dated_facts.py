"""Facts carry dates (issue 31): every price, version and limit in the catalog and facts files has a
`source` (where to re-check it) and an `asOf` (the day it was last read there), per entry or per block
where one source covers the block. This fails when one has neither.

Rules, per file: a mapping that names a `source` (or a `<key>Source`) has an `asOf` (or `<key>AsOf`) in
itself or a mapping around it; every top-level entry and every mapping in a list is in the scope of a
source; every date parses. The catalog has its own, stricter rules below.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import clock
from components.catalog import catalog
from tests.helpers.plans import ROOT

FACT_FILES = sorted(
    [
        *(ROOT / "components" / "data").glob("*.yaml"),
        # Each cloud's own data (its catalog section, regions, support calendar): components/<cloud>/data/.
        *(ROOT / "components").glob("*/data/*.yaml"),
        *(ROOT / "infra" / "verify" / "clouds").glob("*/facts.yaml"),
        ROOT / "infra" / "verify" / "facts.yaml",
    ]
)
META = ("source", "asOf")


def _is_source(key: Any) -> bool:
    return isinstance(key, str) and (key == "source" or key.endswith("Source"))


def _date_key(source_key: str) -> str:
    return "asOf" if source_key == "source" else source_key[: -len("Source")] + "AsOf"


def _sibling_source(mapping: dict, key: Any) -> bool:
    """`templateTagSource` covers `templateTagPrefix`: a `<stem>Source` beside a key that starts with stem."""
    return any(_is_source(k) and k != "source" and str(key).startswith(k[: -len("Source")]) for k in mapping)


def _has_source(node: Any) -> bool:
    if isinstance(node, dict):
        return any(_is_source(k) for k in node) or any(_has_source(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_source(v) for v in node)
    return False


def _is_meta(key: Any) -> bool:
    return key in META or _is_source(key) or str(key).endswith("AsOf")


def _date_problems(node: dict, path: str, dated: bool) -> Iterator[str]:
    for key, value in node.items():
        if isinstance(key, str) and (key == "asOf" or key.endswith("AsOf")):
            try:
                clock.as_of_date(str(value))
            except ValueError as e:
                yield f"{path}.{key}: {e}"
        if _is_source(key) and not (dated or _date_key(key) in node):
            yield f"{path}.{key}: a source without a date ({_date_key(key)})"


def _walk(node: Any, path: str, dated: bool, sourced: bool) -> Iterator[str]:
    if isinstance(node, dict):
        dated = dated or "asOf" in node
        sourced = sourced or "source" in node
        yield from _date_problems(node, path, dated)
        for key, value in node.items():
            if not _is_meta(key):
                own = sourced or _sibling_source(node, key)
                yield from _walk(value, f"{path}.{key}", dated or f"{key}AsOf" in node, own)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, dict) and not (sourced or _has_source(item)):
                yield f"{path}[{i}]: no source"
            yield from _walk(item, f"{path}[{i}]", dated, sourced)


def problems(doc: Any) -> Iterator[str]:
    """Where `doc` breaks the rules, as 'path: what'."""
    assert isinstance(doc, dict)
    for key, value in doc.items():
        if not _is_meta(key) and not ("source" in doc or _sibling_source(doc, key) or _has_source(value)):
            yield f"{key}: no source"
    yield from _walk(doc, "", False, "source" in doc)


@pytest.mark.parametrize("path", FACT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fact_has_a_source_and_a_date(path: Path):
    assert list(problems(yaml.safe_load(path.read_text()))) == []


def test_each_clouds_verify_facts_are_among_the_files():
    clouds = {
        p.parent.name for p in FACT_FILES if p.name == "facts.yaml" and p.parent.parent.name == "clouds"
    }
    assert clouds >= {"aws", "gcp", "kubernetes"}


def test_each_clouds_own_data_is_among_the_files():
    """The data a cloud keeps in its package (components/<cloud>/data/) is walked like the shared files."""
    names = {p.relative_to(ROOT).as_posix() for p in FACT_FILES}
    for cloud in ("aws", "gcp"):
        for name in ("catalog.yaml", "regions.yaml", "k8s_support.yaml"):
            assert f"components/{cloud}/data/{name}" in names
    assert {"components/data/gpus.yaml", "components/aws/data/instance_types.yaml"} <= names


def test_the_rules_catch_an_undated_source_and_an_unsourced_entry():
    assert list(problems({"a": {"x": 1, "source": "s"}})) == [".a.source: a source without a date (asOf)"]
    assert list(problems({"a": {"x": 1}})) == ["a: no source"]
    assert list(problems({"a": [{"x": 1, "source": "s", "asOf": "2026-11"}, {"x": 2}]})) == [
        ".a[1]: no source"
    ]
    assert list(problems({"taints": [], "taintsSource": "s"})) == [
        ".taintsSource: a source without a date (taintsAsOf)"
    ]
    assert list(problems({"a": {"x": 1, "source": "s", "asOf": "last week"}})) == [
        ".a.asOf: asOf 'last week' is not a date (YYYY-MM or YYYY-MM-DD)"
    ]
    assert list(problems({"asOf": "2026-11-28", "source": "s", "a": {"x": 1}})) == []


def test_every_catalog_entry_has_a_source_and_a_date():
    c = catalog()
    for cloud, basis in c.pricing.items():
        assert basis.source and clock.as_of_date(basis.as_of), cloud
    for kind in c.gpu_names():
        gpu = c.gpu(kind)
        assert gpu.source and clock.as_of_date(gpu.as_of), kind
        for cloud in gpu.on:
            for shape in gpu.shapes_on(cloud):
                # A price's date: its own, else its cloud's price basis.
                assert shape.price_as_of or c.pricing[cloud].as_of, shape.name
                if shape.unverified:
                    assert shape.source, f"{shape.name}: unverified fields need the source that was read"
