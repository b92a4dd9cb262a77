"""The CLI for tests: in-process (`cli(...)`, the fast tier), as a real process (`trainplane(...)`, the
smoke tests of the integration tier), and the JSON key check of --json output."""

from __future__ import annotations

import re
from typing import Any

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")


# Maps whose keys are data (resource types, Kubernetes labels and annotations, environment variables),
# not fields of the output: docs/cli.md names them.
DATA_MAPS = {"counts", "labels", "workloadAnnotations", "annotations", "extendedResources", "podEnv"}


def _bad_keys(value: Any, path: str = "") -> list[str]:
    bad: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if not CAMEL.match(k):
                bad.append(f"{path}.{k}")
            if k not in DATA_MAPS:
                bad += _bad_keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            bad += _bad_keys(v, f"{path}[{i}]")
    return bad
