"""Dumps of ../shared/checks/mockplan.py, the independent mock runner (a process of its own), made once per
test session and shared by the xdist workers (tests/conftest.py's `mockplan` fixture).

A dump is a function of the checkout alone (stack file, program, checker), and each costs 10 to 50 s of a
CPU; test_program.py, test_verify_stacks.py and test_verify_dump.py used to run the same ones again (a job
stack's platform once more for its reference). Treat a dump as read-only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from infra import stackfile
from tests.helpers import procs
from tests.helpers.checkers import SHARED_CHECKS
from tests.helpers.plans import ROOT
from tests.helpers.session import exclusive

MOCKPLAN = SHARED_CHECKS / "mockplan.py"


def platform_refs(stack: str) -> list[tuple[str, str]]:
    """The stacks a stack reads through StackReferences, as written in it, with each one's stack name: a job
    stack's platform (or fleet), a fleet stack's manager and workers; [] for a platform stack."""
    sf = stackfile.load(stack, ROOT)
    job, fleet = sf.object("trainplane:job"), sf.object("trainplane:fleet")
    if job is not None and job.get("fleetStack"):
        # A job on a fleet reads the fleet's platforms (to check itself against every worker), then the fleet.
        fleet_ref = job["fleetStack"]
        return [*platform_refs(fleet_ref.split("/")[-1]), (fleet_ref, fleet_ref.split("/")[-1])]
    if job is not None:
        refs = [job["platformStack"]]
    elif fleet is not None:
        refs = [fleet["manager"]["platformStack"], *(w["platformStack"] for w in fleet["workers"])]
    else:
        return []
    return [(ref, ref.split("/")[-1]) for ref in refs]


class Dumps:
    """mockplan.py's dump of each reference stack, once per session: in `cache` (shared by the workers;
    a lock per stack, so a second worker waits for the first one's dump instead of making its own)."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache

    def __call__(self, stack: str) -> Path:
        """The dump of stacks/Pulumi.<stack>.yaml; each stack it references is fed as that stack's dump."""
        extra: list[str] = []
        for ref, name in platform_refs(stack):  # before this stack's lock: the locks never nest the other way
            extra += ["--ref", f"{ref}={self(name)}"]
        path = self.cache / f"{stack}.json"
        with exclusive(self.cache / f"{stack}.lock"):
            if not path.exists():
                proc = procs.run(
                    [sys.executable, str(MOCKPLAN), f"stacks/Pulumi.{stack}.yaml", *extra],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                try:
                    error = json.loads(proc.stdout).get("error")
                except ValueError:
                    error = proc.stderr[-2000:]
                assert proc.returncode == 0, f"mockplan.py {stack}: {error}"
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(proc.stdout)
                tmp.replace(path)
        return path
