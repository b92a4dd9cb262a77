"""The tests mirror the product's layout (tests/README.md): a test module lives under
tests/<tier>/<the product folder it tests>/, so tests/unit/components/aws/ needs components/aws/; tests of the
repository as a whole (its layers, docs, test helpers and tiers) live under tests/<tier>/repo/. Tiers are
by marker, not by folder (tests/helpers/tiers.py)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.plans import ROOT

TIERS = ("unit", "integration")
CROSS_CUTTING = "repo"


def misplaced(root: Path) -> list[str]:
    """The test modules under root's tests/<tier>/ whose folder is not a product folder (nor the
    cross-cutting one); a module directly in tests/<tier>/ is misplaced too."""
    bad = []
    for tier in TIERS:
        base = root / "tests" / tier
        for path in sorted(base.rglob("test_*.py")):
            folder = path.parent.relative_to(base)
            if folder.parts[:1] == (CROSS_CUTTING,):
                continue
            if not folder.parts or not (root / folder).is_dir():
                bad.append(path.relative_to(root).as_posix())
    return bad


def _tree(root: Path, *files: str) -> None:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")


def test_every_test_module_sits_under_a_folder_of_the_product():
    assert misplaced(ROOT) == []


def test_the_cross_cutting_folder_is_no_folder_of_the_product():
    assert not (ROOT / CROSS_CUTTING).exists()


def test_a_module_at_a_tier_top_or_under_a_missing_folder_is_misplaced(tmp_path: Path):
    _tree(
        tmp_path,
        "components/aws/network.py",
        "tests/unit/test_x.py",
        "tests/unit/components/aws/test_network.py",
        "tests/unit/components/azure/test_network.py",
        "tests/unit/repo/test_docs.py",
        "tests/integration/components/aws/test_live.py",
        "tests/integration/test_y.py",
    )
    assert misplaced(tmp_path) == [
        "tests/unit/components/azure/test_network.py",
        "tests/unit/test_x.py",
        "tests/integration/test_y.py",
    ]
