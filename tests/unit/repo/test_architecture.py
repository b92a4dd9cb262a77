"""The layering the design promises, checked on the source (issue 23): a cloud is one package (and its
verifier's folder on the verify floor), so no code outside them names a cloud; the library (components/)
imports nothing of the CLI (infra/); the in-cluster layer does not ask the catalog; no module of the
product outgrows 400 lines. (No import cycle: test_import_cycles.py.)"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from components.backends import backend, backend_names
from infra.verify.verifiers import has_verifier, verifier
from tests.helpers.imports import imported_names
from tests.helpers.plans import ROOT, planned
from tests.helpers.source_rules import CLOUD_TOKEN, cloud_branches, cloud_names

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

IN_CLUSTER = ROOT / "components" / "incluster"
PRODUCT = ("components", "contract", "controllers", "infra", "trainer")


def backend_packages() -> set[Path]:
    """The folder of each installed backend, from the registry (the module its entry point names)."""
    return {ROOT.joinpath(*type(backend(n)).__module__.split(".")[:-1]) for n in backend_names()}


def verifier_packages() -> set[Path]:
    """The folder of each installed backend's verifier (infra/verify/clouds/<cloud>/), from its registry."""
    return {
        ROOT.joinpath(*type(verifier(n)).__module__.split(".")[:-1])
        for n in backend_names()
        if has_verifier(n)
    }


def outside_the_backends() -> list[Path]:
    """Every module of the library, the program, the offline engine and verify that is no backend's and
    no verifier's."""
    packages = backend_packages() | verifier_packages()
    return [
        p
        for top in ("components", "infra")
        for p in sorted((ROOT / top).rglob("*.py"))
        if not any(p.is_relative_to(pkg) for pkg in packages)
    ]


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


def test_the_stricter_check_finds_a_loop_over_clouds_an_attribute_and_an_import():
    assert cloud_names('for c in ("aws", "gcp"):\n    pass') == ["line 1: 'aws'", "line 1: 'gcp'"]
    assert cloud_names("shapes = kind.aws + kind.gcp") == ["line 1: .aws", "line 1: .gcp"]
    assert cloud_names('"""On aws and gcp."""\nfrom components.aws import rules') == [
        "line 2: imports components.aws"
    ]
    assert CLOUD_TOKEN.findall('CLUSTER = "aws:eks/cluster:Cluster"') == ["aws"]


def test_the_backends_are_found_from_the_registry():
    assert {p.relative_to(ROOT).as_posix() for p in backend_packages()} >= {
        "components/aws",
        "components/gcp",
        "components/kubernetes",
    }
    assert {p.relative_to(ROOT).as_posix() for p in verifier_packages()} >= {
        "infra/verify/clouds/aws",
        "infra/verify/clouds/gcp",
        "infra/verify/clouds/kubernetes",
    }
    modules = {p.relative_to(ROOT).as_posix() for p in outside_the_backends()}
    assert "infra/plan.py" in modules and "components/aws/backend.py" not in modules
    assert {"infra/verify/verifiers.py", "infra/verify/clouds/__init__.py"} <= modules
    assert "infra/verify/clouds/gcp/nodes.py" not in modules


def test_no_cloud_is_named_outside_the_backends():
    """Adding a cloud is a package and an entry point: the spec, catalog, registry, plan/cost, offline
    engine, verify, CLI and in-cluster layer ask the backend instead of naming one (docstrings and comments
    may mention them)."""
    found = {
        str(p.relative_to(ROOT)): hits
        for p in outside_the_backends()
        if (
            hits := cloud_names(p.read_text())
            + [f"type token {t}:" for t in CLOUD_TOKEN.findall(p.read_text())]
        )
    }
    assert found == {}


def imports_of_infra(source: str) -> list[str]:
    """Every module of infra/ that `source` imports: any Import/ImportFrom node anywhere in it (a lazy
    import, one under TYPE_CHECKING)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return [n for n in names if n == "infra" or n.startswith("infra.")]


def test_the_library_imports_nothing_of_infra():
    """components/ is the lowest layer: the CLI, plan and verify (infra/) build on it, never the reverse;
    a cloud's verify checks live on verify's floor (infra/verify/clouds/<cloud>/)."""
    assert imports_of_infra("if TYPE_CHECKING:\n    from infra.verify.model import Plan\n") == [
        "infra.verify.model"
    ]
    assert imports_of_infra("def f():\n    import infra.verify\n    from infrastructure import x\n") == [
        "infra.verify"
    ]
    found = {
        str(p.relative_to(ROOT)): bad
        for p in sorted((ROOT / "components").rglob("*.py"))
        if (bad := imports_of_infra(p.read_text()))
    }
    assert found == {}


def test_the_in_cluster_layer_does_not_ask_the_catalog_or_a_cloud_sdk():
    forbidden = (
        "components.catalog",
        "pulumi_aws",
        "pulumi_gcp",
        *(".".join(p.relative_to(ROOT).parts) for p in backend_packages()),
    )
    found = {
        str(p.relative_to(ROOT)): bad
        for p in sorted(IN_CLUSTER.rglob("*.py"))
        if (bad := sorted({n for n in imported_names(p.read_text()) if n.startswith(forbidden)}))
    }
    assert found == {}


def test_no_module_of_the_product_is_above_400_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for top in PRODUCT
        for p in (ROOT / top).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert long == {}


# ---- the controllers: one package in one image (issue 32) --------------------------------------------

CONTROLLERS = ROOT / "controllers"


def _catches_import_error(source: str) -> list[int]:
    """Lines of `except ImportError` / `ModuleNotFoundError` handlers (alone or in a tuple)."""
    names = {"ImportError", "ModuleNotFoundError"}
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            if any(isinstance(c, ast.Name) and c.id in names for c in caught):
                lines.append(node.lineno)
    return lines


def test_the_check_finds_an_import_fallback():
    assert _catches_import_error("try:\n    import a\nexcept ImportError:\n    import b\n") == [3]
    assert _catches_import_error("try:\n    pass\nexcept (OSError, ModuleNotFoundError):\n    pass\n") == [3]
    assert _catches_import_error("try:\n    pass\nexcept OSError:\n    pass\n") == []


def test_no_controller_module_falls_back_to_another_import():
    """The package is installed in its image as it is in the venv: one way to import each module."""
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted(CONTROLLERS.rglob("*.py"))
        if (lines := _catches_import_error(p.read_text()))
    }
    assert found == {}


def test_the_controllers_import_only_themselves_the_contract_the_stdlib_kopf_and_the_kubernetes_client():
    """The image carries the package, the contract (contract/: images/controller/build.py APP_PACKAGES),
    kopf, kubernetes and prometheus-client (images/controller/requirements.txt), nothing of the library,
    the CLI or the trainer; lazy and type-checking imports count."""
    allowed = ("controllers", "contract", "kopf", "kubernetes", "urllib3", "prometheus_client")
    stdlib = sys.stdlib_module_names | {"__future__"}
    found = {
        str(p.relative_to(ROOT)): bad
        for p in sorted(CONTROLLERS.rglob("*.py"))
        if (
            bad := sorted(
                n
                for n in imported_names(p.read_text())
                if n.split(".")[0] not in stdlib and not n.startswith(allowed)
            )
        )
    }
    assert found == {}


def test_nothing_of_the_product_imports_the_controllers_or_kopf():
    """The controllers ship as an image: the library names them by image and `trainplane-controller
    <agent>` command only, and what it shares with them is in contract/ (the layers: test_layers.py)."""
    found = {
        str(p.relative_to(ROOT)): bad
        for top in ("components", "contract", "infra", "trainer", "policy")
        for p in sorted((ROOT / top).rglob("*.py"))
        if (
            bad := sorted(
                {n for n in imported_names(p.read_text()) if n.split(".")[0] in ("controllers", "kopf")}
            )
        )
    }
    assert found == {}


@pytest.mark.parametrize("stack", ["aws-h100-reserved", "gcp-dev", "onprem-dev"])
def test_no_config_map_carries_source(stack):
    """Code ships in images, by digest; a ConfigMap carries configuration only (no module is shipped as
    source next to a stock interpreter)."""
    carrying = {
        f"{r.inputs['metadata']['name']}/{key}": key
        for r in planned(stack).of_type("kubernetes:core/v1:ConfigMap")
        for key, value in (r.inputs.get("data") or {}).items()
        if key.endswith(".py") or (isinstance(value, str) and _is_python_module(value))
    }
    assert carrying == {}


def _is_python_module(text: str) -> bool:
    """Python source: it parses and defines or imports something (a JSON or YAML document does not)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef) for n in tree.body)


# The calls that start a process outside tests/helpers/procs.py, which puts each in a group of its own and
# kills the group at the test's end, at the session's, and when pytest itself is killed.
PROCESS_STARTERS = {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}


def process_starts(source: str) -> list[str]:
    """`subprocess.X(...)` calls (and names imported from subprocess) that start a process."""
    tree = ast.parse(source)
    found = []
    direct = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "subprocess"
        for alias in node.names
        if alias.name in PROCESS_STARTERS
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "subprocess":
            if f.attr in PROCESS_STARTERS:
                found.append(f"subprocess.{f.attr} (line {node.lineno})")
        elif isinstance(f, ast.Name) and f.id in direct:
            found.append(f"{f.id} (line {node.lineno})")
    return found


def test_the_check_finds_a_process_started_outside_procs():
    assert process_starts("import subprocess\nsubprocess.run(['x'])\n") == ["subprocess.run (line 2)"]
    assert process_starts("from subprocess import Popen\nPopen(['x'])\n") == ["Popen (line 2)"]
    assert process_starts("from tests.helpers import procs\nprocs.run(['x'])\n") == []


def test_every_process_a_test_starts_goes_through_procs():
    tests = ROOT / "tests"
    offenders = {
        str(p.relative_to(ROOT)): starts
        for p in sorted(tests.rglob("*.py"))
        if p != tests / "helpers" / "procs.py"
        and "benchmarks" not in p.parts  # benchmarks are run by hand (make bench), not by pytest
        and (starts := process_starts(p.read_text()))
    }
    assert not offenders, f"start processes with tests/helpers/procs.py: {offenders}"


def test_no_test_module_imports_another():
    """A helper two test files share lives in tests/helpers/: a test module that imports another runs the
    other's module-level fixtures and marks too, and moves when that file moves."""
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for name in imported_names(path.read_text())
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert found == []
