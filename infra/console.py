"""Where the CLI's human output goes, and tables that never cut a name or a number short.

Off a terminal (a pipe, a file, CI logs) rich assumes 80 columns and shortens what does not fit with
`…`: pool names, prices and headers came out as `h100-b…`, `$24.77…`, `capaci…`. Piped output is
therefore laid out as wide as its content needs (tables are not expanded, so they take their natural
width), and every column folds instead of shortening, so a narrow terminal wraps a cell rather than
cutting it. Machines read `--json`, not these tables.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.table import Table

# Width of output that does not go to a terminal: wider than any line the CLI prints, so rich never has
# to shorten one (tables take their natural width, not this one).
PIPE_WIDTH = 4096
# A heading rule off a terminal: as wide as a classic terminal, or its title.
PIPE_RULE_WIDTH = 80


def make_console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that adapts to the terminal, or lays out at full width off one."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH)


def heading(console: Console, title: str) -> None:
    """A rule with a title: the terminal's width on one, 80 columns (or the title's width) off one."""
    if console.is_terminal:
        console.rule(title)
        return
    width = max(PIPE_RULE_WIDTH, len(title) + 8)  # markup counted too: a little wider, never cut
    console.print(Rule(title), width=min(width, console.width))


def table(title: str | None = None, *columns: str, right: tuple[str, ...] = (), **kw: Any) -> Table:
    """A table whose columns fold (wrap inside a word) instead of ending in `…` when space runs out."""
    t = Table(title=title, show_edge=False, **kw)
    for col in columns:
        t.add_column(col, justify="right" if col in right else "left", overflow="fold")
    return t
