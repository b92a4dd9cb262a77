"""The independent checkers in ../shared/checks, run in the test process.

Each one is a script with a ``main``; run as a process of its own, provider_inputs.py spends about 7 of its
8 s importing the provider SDKs, which a test process that has planned a stack has imported already. The
checkers read only their arguments and the references beside them, so calling ``main`` here gives the same
answer and output. mockplan.py stays a process of its own: its independence from our runner is its point.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
from functools import cache
from types import ModuleType

from tests.helpers.plans import ROOT

SHARED_CHECKS = ROOT.parent / "shared" / "checks"


@cache
def checker_module(script: str) -> ModuleType:
    """The checker ``script`` imported once per process (its functions, for a test that needs one part)."""
    path = SHARED_CHECKS / script
    spec = importlib.util.spec_from_file_location(f"shared_checks_{path.stem}", path)
    assert spec is not None and spec.loader is not None, f"cannot load {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_checker(script: str, *args: str) -> tuple[int, str]:
    """(exit code, stdout) of ``script ARGS`` as its ``__main__`` would give them."""
    main = checker_module(script).main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            # helm_values_keys.py's __main__ passes sys.argv[1], the others sys.argv[1:]
            code = main(args[0]) if script == "helm_values_keys.py" else main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return int(code or 0), out.getvalue()
