"""verify is one set of checks: one registry drives the report, the runners, `verify --help` and
docs/verify.md; the live checks ask the offline questions through the same functions over a cluster view;
the library never imports the CLI."""

from __future__ import annotations

import ast
import re

import pytest

from infra.verify import registry
from infra.verify.live import ClusterState, verify_state
from tests.conftest import ROOT
from tests.helpers.verify_plans import edit, kind, plan, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

DOC = ROOT / "docs" / "verify.md"


def _checks_table_names() -> list[str]:
    """The bold check names of the "| check | fails when |" table of docs/verify.md, in order."""
    text = DOC.read_text()
    table = text[text.index("| check | fails when |") :].split("\n\n")[0]
    return re.findall(r"^\| \*\*([a-z0-9-]+)\*\* \|", table, flags=re.M)


def test_docs_verify_lists_exactly_the_registry():
    assert registry.markdown_table() in DOC.read_text()
    assert _checks_table_names() == list(registry.CHECKS)


def test_report_cli_choices_and_help_come_from_the_registry():
    from infra.cli import build_parser
    from infra.verify.report import CHECKS

    assert CHECKS == registry.CHECKS == tuple(c.name for c in registry.REGISTRY)
    verify = build_parser()._subparsers._group_actions[0].choices["verify"]  # type: ignore[union-attr]
    (check_flag,) = [a for a in verify._actions if "--check" in a.option_strings]
    assert tuple(check_flag.choices) == registry.CHECKS
    text = verify.format_help()
    for c in registry.REGISTRY:
        assert c.summary in " ".join(text.split()), c.name


def test_every_registered_runner_resolves():
    for c in registry.REGISTRY:
        assert callable(c.offline_runner()), c.name
        assert c.live is None or callable(c.live_runner()), c.name
    assert [c.name for c in registry.REGISTRY if c.live] == [
        "storage",
        "network",
        "scheduling",
        "identity",
        "fleet-queues",
        "fleet-access",
    ]


def test_the_library_never_imports_the_cli():
    """No module of the library names the CLI, lazy imports included (a fresh process that loads the
    library: tests/integration/repo/test_imports.py)."""
    offenders = []
    for path in sorted((ROOT / "infra").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] == "commands" or rel.name == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{rel}: {n}" for n in names if n == "infra.cli" or n.startswith("infra.commands")]
    assert offenders == []


def _missing_class_findings(report) -> set[tuple[str, tuple[str, ...], str]]:
    """(check, objects, the finding up to where the view names its source) of each missing-class finding."""
    out = set()
    for f in report.findings:
        m = re.match(r"(.* asks for StorageClass '[^']*')[,;] ", f.message)
        if m:
            out.add((f.check, f.objects, m.group(1)))
    return out


def test_a_live_check_and_its_offline_twin_give_the_same_finding():
    # The defect: the platform's claims ask for StorageClass gp3-encrypted, which does not exist (here the
    # plan creates the class under another name; live, the cluster has only that other class).
    broken = edit(
        plan("aws-dev"),
        kind("StorageClass", "gp3-encrypted"),
        lambda i: i["metadata"].update(name="gp3-renamed"),
    )
    offline = run(broken, "storage")
    state = ClusterState(
        storage_classes=[
            {"metadata": {"name": "gp3-renamed"}, "provisioner": "ebs.csi.aws.com"},
        ],
        csi_drivers=[{"metadata": {"name": "ebs.csi.aws.com"}}],
    )
    live = verify_state(broken, state, ["storage"])
    want = {
        (
            "storage",
            ("helm release monitoring/loki (loki 18.11.0)",),
            "PVC monitoring/storage-loki-0 (helm release monitoring/loki (loki 18.11.0)) asks for "
            "StorageClass 'gp3-encrypted'",
        ),
        (
            "storage",
            ("helm release monitoring/kube-prometheus-stack (kube-prometheus-stack 88.5.3)",),
            "PVC monitoring/prometheus-kube-prometheus-stack-prometheus-db (helm release "
            "monitoring/kube-prometheus-stack (kube-prometheus-stack 88.5.3)) asks for StorageClass "
            "'gp3-encrypted'",
        ),
    }
    assert _missing_class_findings(offline) == want
    assert _missing_class_findings(live) == want
    # Each view names where its answer comes from.
    assert any("which neither the plan nor aws 1.35 creates" in f.message for f in offline.findings)
    assert any("; the cluster has gp3-renamed" in f.message for f in live.findings)


def test_live_network_finds_any_agent_the_facts_name():
    from infra.verify import facts as F

    p = plan("aws-dev")
    for agent in F.network_policy_agents():
        if agent.get("container"):
            continue  # an agent turned on by an argument: test_verify_live.py
        ds = {"metadata": {"name": agent["daemonSet"], "namespace": "kube-system"}}
        report = verify_state(p, ClusterState(daemon_sets=[ds]), ["network"])
        assert report.ok and report.check("network").examined == [agent["what"]], agent
    assert verify_state(p, ClusterState(), ["network"]).failed() == ["network"]


def test_stacks_are_loaded_by_the_library_and_the_cli_maps_its_errors():
    import pytest

    from infra import cli, stacks
    from infra.verify import plan_from_stack

    assert cli.UsageError is stacks.UsageError  # what the library raises is what the CLI turns into exit 2
    with pytest.raises(stacks.UsageError, match="no-such-stack"):
        plan_from_stack("no-such-stack")


def test_the_cli_and_verify_modules_stay_under_400_lines():
    paths = [ROOT / "infra" / "cli.py", ROOT / "infra" / "stacks.py"]
    paths += sorted((ROOT / "infra" / "commands").glob("*.py")) + sorted(
        (ROOT / "infra" / "verify").rglob("*.py")
    )
    long = [f"{p.relative_to(ROOT)}: {n}" for p in paths if (n := len(p.read_text().splitlines())) > 400]
    assert long == []
