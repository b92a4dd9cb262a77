"""The project's import graph, read from source (no module is imported), and its cycles.

An edge A -> B is any `import B` / `from B import x` / `from . import B` in module A: at module level and
inside functions alike (a lazy import is still a dependency of A's code), except under
`if TYPE_CHECKING:` (only type checkers follow those). `from pkg import name` counts as an edge to
`pkg.name` when that is a module of the project, else to `pkg`. Only modules of the project are nodes.

import_edges lists the same edges one import at a time, with its line, and with `type_checking=True` the
imports under `if TYPE_CHECKING:` too: what the layering test counts (tests/unit/repo/test_layers.py), since a
layer must not name a module above it even for its types.

Example:
    >>> graph = import_graph(ROOT, ("trainer",))
    >>> "trainer.contract" in graph
    True
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The product's packages: what the import-cycle test walks.
PACKAGES = ("components", "contract", "controllers", "infra", "trainer")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of `packages` under `root`, by dotted name."""
    return {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements anywhere in `tree` except the body of an `if TYPE_CHECKING:` (its else counts)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports_in(child)
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    elif not (isinstance(node, ast.If) and _is_type_checking(node.test)):
        yield from _imports(node)
    else:
        for child in node.orelse:
            yield from _imports_in(child)


def imported_names(source: str) -> list[str]:
    """Every module name `source` imports, the type-checking-only imports included (a layer that must
    not know a module must not name it for its types either): `import a.b` gives a.b, `from a import b`
    gives a and a.b."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return names


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names (relative levels resolved against `module`)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    package = parts if is_package else parts[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
        return
    base = _base(module, is_package, node)
    yield base
    yield from (f"{base}.{a.name}" for a in node.names)


def _owner(name: str, known: Mapping[str, Path]) -> str | None:
    """The project module `name` refers to: itself, or the closest package above it."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


@dataclass(frozen=True, order=True)
class Edge:
    """One import of a project module by another: `importer -> imported (line N)`."""

    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} (line {self.line})"


def _all_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in `tree`: at the top, inside functions and classes, under TYPE_CHECKING."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def import_edges(known: Mapping[str, Path], *, type_checking: bool = False) -> list[Edge]:
    """Every import in the modules of `known` (dotted name -> file, as `modules` gives) of another of them,
    one Edge per import statement and module it names, sorted. With `type_checking`, the imports under
    `if TYPE_CHECKING:` count as well."""
    found: set[Edge] = set()
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node in _all_imports(tree) if type_checking else _imports(tree):
            targets = list(_targets(name, is_package, node))
            if isinstance(node, ast.ImportFrom):
                # `from pkg import mod` depends on pkg.mod when it is a module, else on pkg (names in it).
                base, names = targets[0], targets[1:]
                subs = [t for t in names if t in known]
                targets = subs if len(subs) == len(names) else [*subs, base]
            found.update(
                Edge(name, owner, node.lineno)
                for t in targets
                if (owner := _owner(t, known)) and owner != name
            )
    return sorted(found)


def import_graph(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project modules it imports (self-edges dropped; TYPE_CHECKING imports skipped)."""
    known = modules(root, packages)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for edge in import_edges(known):
        graph[edge.importer].add(edge.imported)
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def cycle_path(graph: Mapping[str, Iterable[str]], component: frozenset[str]) -> list[str]:
    """One concrete cycle through the component's first module, for messages: [a, b, ..., a]."""
    start = min(component)
    paths = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return [*paths[node], start]
            if nxt in component and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                todo.append(nxt)
    return [start]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (relative path -> text) under `root`, a source tree for the walker's own tests."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
