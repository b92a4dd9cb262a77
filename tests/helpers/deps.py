"""Which modules a fresh interpreter loads: the one runtime dependency walker of the tests.

A check such as "planning an AWS stack never imports the GCP SDK" must run in a new process: the test
process has long imported every SDK. `modules_after(code)` runs `code` in `python -c` from the repository
root and returns every module name in its sys.modules afterwards.

The static walker (import statements, for the cycle and layering tests) is tests/helpers/imports.py;
this module is for what only a real process can show.
"""

from __future__ import annotations

import json
import sys

from tests.helpers import procs
from tests.helpers.plans import ROOT

_PRINT = "\nimport json as _j, sys as _s\nprint(_j.dumps(sorted(_s.modules)))\n"


def modules_after(code: str, env: dict[str, str] | None = None, timeout: float = 300) -> set[str]:
    """The module names loaded once `code` has run in a fresh interpreter (its last stdout line)."""
    proc = procs.run(
        [sys.executable, "-c", code + _PRINT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def top_level(modules: set[str]) -> set[str]:
    """The packages of `modules` (pulumi_aws.eks -> pulumi_aws)."""
    return {m.split(".")[0] for m in modules}
