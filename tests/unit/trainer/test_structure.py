"""The trainer's shape: state is declared in __init__, modules stay small."""

from __future__ import annotations

import ast

import pytest

from tests.helpers.trainer import ROOT

TRAINER = ROOT / "trainer"


def _self_assignments(fn: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for t in targets:
            for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) and el.value.id == "self":
                    names.add(el.attr)
    return names


@pytest.mark.parametrize(
    ("module", "cls"),
    [
        ("train.py", "Trainer"),
        ("checkpoint/manager.py", "Checkpointer"),
        ("checkpoint/store.py", "CheckpointStore"),
    ],
)
def test_no_attribute_is_first_assigned_outside_init(module, cls):
    (node,) = [
        n
        for n in ast.parse((TRAINER / module).read_text()).body
        if isinstance(n, ast.ClassDef) and n.name == cls
    ]
    methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
    declared = _self_assignments(methods["__init__"])
    late = {
        f"{name}: self.{attr}"
        for name, fn in methods.items()
        if name != "__init__"
        for attr in _self_assignments(fn) - declared
    }
    assert late == set()


def test_no_trainer_module_is_above_400_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in TRAINER.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > 400} == {}
