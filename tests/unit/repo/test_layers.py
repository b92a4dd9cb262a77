"""The layers of the product (issue 32 (2)): each top-level package imports only the packages below it.

    trainplane_policies (policy/)   contract, components, infra, trainer
    infra                           contract, components, trainer
    components                      contract, trainer
    trainer                         contract
    controllers                     contract
    contract                        nothing of the project (and only the standard library)

Every import of every module counts: at the top, lazily inside a function, and under `if TYPE_CHECKING:`
(a layer must not name a module above it, even for its types); relative imports are resolved. The walker
is tests/helpers/imports.py (import_edges). KNOWN lists the edges against the table still there, by module
pair; the test asserts the violations found are exactly these, so a new one fails and a fixed one must
leave the list (the list ends empty). docs/architecture.md "The layers" says the same in prose.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.helpers.imports import ROOT, Edge, import_edges, imported_names, modules, write_tree

# Package -> the packages it may import (besides itself). Why each:
LAYERS: dict[str, frozenset[str]] = {
    # The names and pure rules every layer and every image shares: it stands on nothing.
    "contract": frozenset(),
    # The controller image carries controllers/ and contract/ only (images/controller/build.py APP_PACKAGES).
    "controllers": frozenset({"contract"}),
    # The training image carries the trainer without the library (trainer/Dockerfile: never Pulumi).
    "trainer": frozenset({"contract"}),
    # The library builds a job's pod from the trainer's contract with the platform (trainer/contract.py:
    # exit codes for the failure policy, the environment) and checks the stack's `trainer:` block with the
    # trainer's own schema (trainer.config); trainer/ never imports the library back.
    "components": frozenset({"contract", "trainer"}),
    # The program, plan, status and verify read the library; `trainplane nccl-test` runs the trainer's
    # collectives, `status` reads the trainer's exit meanings, verify the trainer's metric names.
    "infra": frozenset({"contract", "components", "trainer"}),
    # The policy pack (policy/trainplane_policies, run by `pulumi preview --policy-pack policy/`) sits on
    # top: it asks the catalog (components) and plans stacks offline (infra) to test itself.
    "trainplane_policies": frozenset({"contract", "components", "infra", "trainer"}),
}
# Where each package lives (the policy pack is imported as `trainplane_policies` from policy/).
ROOTS: dict[str, Path] = {name: ROOT for name in LAYERS} | {"trainplane_policies": ROOT / "policy"}

# Edges against the table still there, as (importer, imported) module pairs: none. The last ones (the cloud
# backends' verify hooks importing infra.verify) moved onto the verify floor (infra/verify/clouds/<cloud>/).
# A new edge fails the test; an entry here must name a real edge.
KNOWN: frozenset[tuple[str, str]] = frozenset()


def layer(module: str) -> str:
    return module.split(".")[0]


def violations(edges: Iterable[Edge], layers: Mapping[str, Iterable[str]]) -> list[Edge]:
    """The edges from one package to another that its row of `layers` does not allow."""
    return [
        e
        for e in edges
        if layer(e.importer) != layer(e.imported) and layer(e.imported) not in layers[layer(e.importer)]
    ]


def product_modules() -> dict[str, Path]:
    known: dict[str, Path] = {}
    for name, root in ROOTS.items():
        known |= modules(root, (name,))
    return known


def test_the_walker_counts_type_checking_lazy_and_relative_imports(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/a.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from high.c import C\n",
            "low/b.py": "import os\n\n\ndef f():\n    import high.d\n",
            "low/e.py": "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    from high import d\n",
            "high/__init__.py": "",
            "high/c.py": "from . import d\nfrom .d import x\nfrom low import a\n",
            "high/d.py": "x = 1\n",
        },
    )
    known = modules(root, ("low", "high"))
    edges = import_edges(known, type_checking=True)
    assert [str(e) for e in edges] == [
        "high.c -> high.d (line 1)",  # relative: `from . import d`
        "high.c -> high.d (line 2)",  # relative: `from .d import x`
        "high.c -> low.a (line 3)",
        "low.a -> high.c (line 4)",  # under TYPE_CHECKING
        "low.b -> high.d (line 5)",  # lazy, inside a function
        "low.e -> high.d (line 5)",  # the else of a TYPE_CHECKING test
    ]
    # The cycle walker's view (import_graph) still skips the TYPE_CHECKING body, and only it.
    assert [str(e) for e in import_edges(known)] == [
        "high.c -> high.d (line 1)",
        "high.c -> high.d (line 2)",
        "high.c -> low.a (line 3)",
        "low.b -> high.d (line 5)",
        "low.e -> high.d (line 5)",
    ]
    assert [str(e) for e in violations(edges, {"low": (), "high": ("low",)})] == [
        "low.a -> high.c (line 4)",
        "low.b -> high.d (line 5)",
        "low.e -> high.d (line 5)",
    ]


def test_every_package_of_the_product_has_a_row_and_the_rows_form_layers():
    tops = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - {"tests"}
    assert tops | {"trainplane_policies"} == set(LAYERS)
    assert (ROOTS["trainplane_policies"] / "trainplane_policies" / "__init__.py").is_file()
    # No package may import one that may import it back (directly or round a loop): an order exists.
    order: list[str] = []
    while len(order) < len(LAYERS):
        ready = sorted(n for n, below in LAYERS.items() if n not in order and below <= set(order))
        assert ready, f"the table has a loop among {sorted(set(LAYERS) - set(order))}"
        order += ready
    assert order[0] == "contract"


def test_the_contract_imports_only_the_standard_library():
    stdlib = sys.stdlib_module_names | {"__future__"}
    found = {
        str(p.relative_to(ROOT)): bad
        for p in sorted((ROOT / "contract").rglob("*.py"))
        if (
            bad := sorted({n for n in imported_names(p.read_text()) if layer(n) not in stdlib | {"contract"}})
        )
    }
    assert found == {}


def test_the_layers_hold_but_for_the_known_edges():
    found = violations(import_edges(product_modules(), type_checking=True), LAYERS)
    new = [str(e) for e in found if (e.importer, e.imported) not in KNOWN]
    assert not new, "imports against the layers (tests/unit/repo/test_layers.py LAYERS):\n" + "\n".join(new)
    fixed = sorted(KNOWN - {(e.importer, e.imported) for e in found})
    assert not fixed, "no longer imported, take them off KNOWN:\n" + "\n".join(
        f"{a} -> {b}" for a, b in fixed
    )
