"""What scripts rely on: one JSON key style for every command, plans that diff, one exit-code table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra import cli
from tests.helpers.cli import _bad_keys
from tests.helpers.plans import ROOT

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _json_of(argv: list[str], capsys) -> tuple[int, Any]:
    code = cli.main(argv)
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "aws-h100-reserved", "--json"],  # reserved pools: every cost key
        ["plan", "gcp-h100-mega", "--json"],  # a GPUDirect fabric: pod env, annotations
        ["plan", "gpt-small-aws-dev", "--json"],  # a job stack
        ["verify", "aws-dev", "--json"],
        ["verify", "gcp-h100-dws", "--cloud", "--json"],
    ],
)
def test_every_json_key_is_camel_case(argv, capsys):
    # `plan --json` used to mix `criticalPath` with `min_hourly`, `on_demand_hourly`, `price_source`.
    code, data = _json_of(argv, capsys)
    assert code in (0, 1, 2)
    assert _bad_keys(data) == []


def test_the_json_keys_docs_cli_md_names_are_the_ones_printed(capsys):
    _, data = _json_of(["plan", "aws-h100-reserved", "--json"], capsys)
    doc = (ROOT / "docs" / "cli.md").read_text()
    for key in [*data, *data["cost"], *data["cost"]["pools"][0], *data["criticalPath"]]:
        assert f"`{key}`" in doc, key


def test_verify_cloud_prints_the_json_of_verify_and_docs_cli_md_names_its_keys(capsys):
    # `--cloud` used to print a JSON of its own (`ran`, `findings` with `subject`, `notChecked`).
    code, cloud = _json_of(["verify", "gcp-h100-dws", "--cloud", "--json"], capsys)
    _, offline = _json_of(["verify", "gcp-h100-dws", "--json"], capsys)
    assert code == 2 and (cloud["mode"], offline["mode"]) == ("cloud", "offline")
    assert list(cloud) == list(offline)
    assert list(cloud["checks"][0]) == [*offline["checks"][0], "skipped"]
    doc = (ROOT / "docs" / "cli.md").read_text()
    for key in [*cloud, *cloud["checks"][0]]:
        assert f"`{key}`" in doc, key
    for gone in ("ran", "notChecked", "subject"):
        assert f"`{gone}`" not in doc, gone


# ---- determinism ------------------------------------------------------------------------------------
STACK = "aws-h100-reserved"  # its critical path's third step used to change between runs


def test_plan_json_is_the_same_twice_in_one_process(capsys):
    _, first = _json_of(["plan", STACK, "--json"], capsys)
    _, second = _json_of(["plan", STACK, "--json"], capsys)
    assert json.dumps(first) == json.dumps(second)
    # siblings by type then name, whatever order the program registered them in
    for node in _nodes(first["tree"]):
        kids = [(c["type"], c["name"]) for c in node["children"]]
        assert kids == sorted(kids)


def _nodes(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for node in tree for n in (node, *_nodes(node["children"]))]


def test_critical_path_ties_are_broken_by_urn_not_by_order():
    from infra.mockcloud import Resource
    from infra.plan import critical_path

    def res(name: str, deps: tuple[str, ...] = ()) -> Resource:
        return Resource(
            urn=f"urn:{name}",
            type="aws:eks/addon:Addon",
            name=name,
            parent=None,
            custom=True,
            deps=deps,
            inputs={},
            provider=None,
        )

    # b and a take as long; the node group waits for both: the path goes through "a" in any order.
    for order in ([res("b"), res("a")], [res("a"), res("b")]):
        path = critical_path([*order, res("ng", ("urn:b", "urn:a"))])
        assert [s.name for s in path] == ["a", "ng"]
    ends = critical_path([res("z"), res("y")])
    assert [s.name for s in ends] == ["y"]


# ---- exit codes: one table -----------------------------------------------------------------------


def _table(text: str) -> list[str]:
    start = text.index("| code | meaning |")
    return [line for line in text[start:].splitlines() if line.startswith("|")][:6]


def test_readme_and_docs_give_the_exit_code_table_help_prints():
    readme, doc = (ROOT / "README.md").read_text(), (ROOT / "docs" / "cli.md").read_text()
    assert _table(readme) == _table(doc)
    codes = [row.split("|")[1].strip() for row in _table(doc)[2:]]
    assert codes == ["0", "1", "2", "3"]
    assert [cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_INPUT, cli.EXIT_INTERNAL] == [0, 1, 2, 3]
    for code in codes:
        assert f"\n  {code}  " in cli.EXIT_CODES
