"""The docs hang together: an index lists every page, every link and anchor resolves, and every
`trainplane` flag the docs quote is one the command accepts (its --help)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tests.helpers.cli import cli
from tests.helpers.plans import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "README.md")
MARKDOWN = [
    ROOT / "README.md",
    DOCS / "README.md",
    *PAGES,
    *sorted((ROOT / "stacks").glob("templates/*/README.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMANDS = ("plan", "render", "verify", "nccl-test", "status")


def _links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(page.read_text())]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # a '#' in a code block is no heading
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_the_readme_links_the_docs_index_and_the_index_links_every_page():
    assert "docs/README.md" in _links(ROOT / "README.md")
    linked = {link.split("#")[0] for link in _links(DOCS / "README.md")}
    assert [p.name for p in PAGES if p.name not in linked] == []


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for link in _links(page):
        if re.match(r"[a-z]+:", link):
            continue  # https:, mailto:
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading with anchor #{anchor} in {target.name}")
    assert broken == []


@functools.cache
def _help(command: str) -> str:
    out = cli(*([command] if command else []), "--help")
    assert out.returncode == 0, out.stderr
    return out.stdout


def _quoted_flags() -> list[tuple[str, str, str]]:
    """(page, command, flag) for each `--flag` after `trainplane <command>` on a line of the docs, up to
    a shell comment or the end of the inline code."""
    found = []
    for page in MARKDOWN:
        for line in page.read_text().splitlines():
            for m in re.finditer(r"trainplane (plan|render|verify|nccl-test|status)\b([^#`|]*)", line):
                for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", m.group(2)):
                    found.append((str(page.relative_to(ROOT)), m.group(1), flag))
    return found


def test_the_docs_quote_flags_of_every_command():
    quoted = {(cmd, flag) for _, cmd, flag in _quoted_flags()}
    assert {cmd for cmd, _ in quoted} == set(COMMANDS)  # the extraction below finds something to check
    assert ("verify", "--kubeconfig") in quoted and ("plan", "--json") in quoted


def test_every_flag_quoted_in_the_docs_is_in_the_commands_help():
    unknown = [
        f"{page}: trainplane {cmd} {flag}"
        for page, cmd, flag in _quoted_flags()
        if not re.search(rf"(?<![\w-]){flag}\b", _help(cmd) + _help(""))
    ]
    assert unknown == []
