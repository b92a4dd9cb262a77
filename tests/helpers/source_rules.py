"""Detectors of a cloud's name in source code, for the architecture tests: outside the backends' own
packages no code compares with, branches on, looks up by or imports a cloud."""

from __future__ import annotations

import ast
import re

CLOUD_NAMES = {"aws", "gcp", "kubernetes", "eks", "gke", "azure", "existing"}


def _cloud_names_in(node: ast.AST) -> list[str]:
    """Cloud names among the constants of `node` (a constant, or one inside a tuple/list/set)."""
    elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [e.value for e in elts if isinstance(e, ast.Constant) and e.value in CLOUD_NAMES]


def cloud_branches(source: str) -> list[str]:
    """Places that compare against, branch on or look up by a cloud or profile name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                found += [f"line {node.lineno}: compares with {n!r}" for n in _cloud_names_in(operand)]
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            found += [f"line {node.lineno}: keyed by {n!r}" for k in keys for n in _cloud_names_in(k)]
        elif isinstance(node, ast.MatchValue):
            found += [f"line {node.lineno}: matches {n!r}" for n in _cloud_names_in(node.value)]
    return found


BACKEND_PACKAGES = ("components.aws", "components.gcp", "components.kubernetes", "pulumi_aws", "pulumi_gcp")
# A resource type token of a cloud's provider ("aws:eks/cluster:Cluster"): the backend's to know.
CLOUD_TOKEN = re.compile(r"""["'](aws|gcp):""")


def cloud_names(source: str) -> list[str]:
    """Any use of a cloud's name in code (docstrings and comments aside): a string constant that is one
    (in a loop's tuple too, which `cloud_branches` does not see), a `.aws`/`.gcp` attribute, an import of
    a backend's package or a cloud SDK."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and id(node) not in docstrings
            and node.value in CLOUD_NAMES | {"s3", "gs"}
        ):
            found.append(f"line {node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr in CLOUD_NAMES:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )
            found += [f"line {node.lineno}: imports {n}" for n in names if n.startswith(BACKEND_PACKAGES)]
    return found
