"""`trainplane --version`: the version of the installed distribution, else of the checkout it runs from.

An installed trainplane (pip, an editable install) knows its version from its metadata; a checkout run
with PYTHONPATH and no install reads `[project] version` from the pyproject.toml beside the packages.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "trainplane"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def version(pyproject: Path = PYPROJECT) -> str:
    """The distribution's version; raises LookupError naming both places when neither has one."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    try:
        found = tomllib.loads(pyproject.read_text()).get("project", {}).get("version")
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise LookupError(f"{DISTRIBUTION} is not installed and {pyproject} cannot be read ({e})") from None
    if not found:
        raise LookupError(f"{DISTRIBUTION} is not installed and {pyproject} has no [project] version")
    return str(found)
