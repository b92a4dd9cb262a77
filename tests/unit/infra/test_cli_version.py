"""`trainplane --version`: one line, exit 0, from the installed metadata or the checkout's pyproject."""

from __future__ import annotations

import tomllib
from importlib import metadata

import pytest

from tests.helpers.cli import cli
from tests.helpers.plans import ROOT


def _project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_version_prints_trainplane_and_the_version():
    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout == f"trainplane {metadata.version('trainplane')}\n"
    assert proc.stderr == ""


def test_an_uninstalled_checkout_reads_its_pyproject(monkeypatch):
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    proc = cli("--version")
    assert (proc.returncode, proc.stdout) == (0, f"trainplane {_project_version()}\n")


def test_no_metadata_and_no_pyproject_is_one_line(monkeypatch, tmp_path):
    from infra import version

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(LookupError, match=r"is not installed and .*pyproject\.toml cannot be read"):
        version.version(tmp_path / "pyproject.toml")
