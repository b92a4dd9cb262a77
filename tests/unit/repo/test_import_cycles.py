"""No import cycles in the product (tests/helpers/imports.py PACKAGES): a module that imports another which
imports it back (directly or round a loop, lazily inside a function included) is one unit in disguise,
loads in an order-dependent way, and cannot be understood or moved alone. Imports under
`if TYPE_CHECKING:` do not count (only type checkers follow them).

The walker is tests/helpers/imports.py. KNOWN lists the cycles still there, each with the helper of issue 23
that owns it; the test asserts the cycles found are exactly these, so a new cycle fails and a fixed one
must leave the list (the list ends empty).
"""

from __future__ import annotations

from tests.helpers.imports import ROOT, cycle_path, cycles, import_graph, write_tree

# Cycles known and accepted: none (issue 23 removed the last seven). A new one fails the test.
KNOWN: dict[frozenset[str], str] = {}


def test_the_walker_finds_a_cycle_through_a_lazy_import_and_a_relative_one(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "def f():\n    from .c import x\n",
            "pkg/c.py": "import pkg.a\nx = 1\n",
            "pkg/d.py": "from pkg.a import thing\n",
        },
    )
    graph = import_graph(root, ("pkg",))
    assert graph["pkg.b"] == {"pkg.c"}
    assert graph["pkg.d"] == {"pkg.a"}
    assert cycles(graph) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]
    assert cycle_path(graph, cycles(graph)[0]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_the_walker_skips_type_checking_imports_but_not_their_else(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "import pkg.b\n",
            "pkg/b.py": (
                "import typing\nif typing.TYPE_CHECKING:\n    import pkg.a\n"
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\nelse:\n    import pkg.c\n"
            ),
            "pkg/c.py": "",
        },
    )
    graph = import_graph(root, ("pkg",))
    assert graph["pkg.b"] == {"pkg.c"}
    assert cycles(graph) == []


def test_the_products_import_cycles_are_only_the_known_ones():
    graph = import_graph(ROOT)
    found = set(cycles(graph))
    new = [" -> ".join(cycle_path(graph, c)) for c in found - set(KNOWN)]
    assert not new, f"import cycles: {new}"
    fixed = [sorted(c) for c in set(KNOWN) - found]
    assert not fixed, f"no longer cycles, take them off KNOWN: {fixed}"
