"""The layering the design promises, checked on the source: the in-cluster layer never names a cloud,
never asks the catalog about machines, and no module or function outgrows the limits."""

from __future__ import annotations

import ast

from tests.helpers.plans import ROOT

KUBERNETES = ROOT / "components" / "incluster"
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


def test_the_check_finds_a_branch_on_a_cloud_name():
    assert cloud_branches('if bundle.profile.name == "gke":\n    pass') == ["line 1: compares with 'gke'"]
    assert cloud_branches('x = cloud in ("aws", "gcp")') == [
        "line 1: compares with 'aws'",
        "line 1: compares with 'gcp'",
    ]
    assert cloud_branches('GRACE = {"aws": 120, "gcp": 30}') == [
        "line 1: keyed by 'aws'",
        "line 1: keyed by 'gcp'",
    ]
    assert cloud_branches('providers = {"kubernetes": provider}') == ["line 1: keyed by 'kubernetes'"]
    assert cloud_branches('if name == "eks-ng":\n    pass') == []


def test_the_in_cluster_layer_never_names_a_cloud():
    found = {
        str(p.relative_to(ROOT)): hits
        for p in sorted(KUBERNETES.rglob("*.py"))
        if (hits := cloud_branches(p.read_text()))
    }
    assert found == {}


def test_the_in_cluster_layer_does_not_ask_the_catalog_or_a_cloud_sdk():
    imports = {}
    for p in sorted(KUBERNETES.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            bad = [
                n
                for n in names
                if n.startswith(
                    ("components.catalog", "components.aws", "components.gcp", "components.kubernetes")
                )
                or n.startswith(("pulumi_aws", "pulumi_gcp"))
            ]
            if bad:
                imports.setdefault(str(p.relative_to(ROOT)), []).extend(bad)
    assert imports == {}


def test_no_module_of_the_components_is_above_400_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "components").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert long == {}


# The cloud-neutral core a new cloud plugs into: the registry, the catalog, the spec and its rules, the
# regions check, the quickstart and the platform outputs ask the backends and never name a cloud.
NEUTRAL = [
    *(
        ROOT / "components" / n
        for n in ("backends.py", "catalog.py", "regions.py", "quickstart.py", "outputs.py")
    ),
    *sorted((ROOT / "components" / "spec").glob("*.py")),
]
BACKEND_PACKAGES = ("components.aws", "components.gcp", "components.kubernetes", "pulumi_aws", "pulumi_gcp")


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


def test_the_stricter_check_finds_a_loop_over_clouds():
    assert cloud_names('for c in ("aws", "gcp"):\n    pass') == ["line 1: 'aws'", "line 1: 'gcp'"]
    assert cloud_names("shapes = kind.aws + kind.gcp") == ["line 1: .aws", "line 1: .gcp"]
    assert cloud_names('"""On aws and gcp."""\nfrom components.aws import rules') == [
        "line 2: imports components.aws"
    ]


def test_the_catalog_spec_and_registry_never_name_a_cloud():
    found = {str(p.relative_to(ROOT)): hits for p in NEUTRAL if (hits := cloud_names(p.read_text()))}
    assert found == {}
