"""Fixtures every tier shares. The helpers behind them live in tests/helpers/ (plans.py: `planned`,
`plan_object`, `one`, ...); tests import helpers from there, never from another test file."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from infra.mockcloud import RunResult, run_stack
from tests.helpers.mockplan import Dumps
from tests.helpers.plans import ROOT, plan_object
from tests.helpers.session import shared_dir

# Facts that age (price dates, the Kubernetes support calendar) are judged on one day in every test, the
# day the calendar was last read at its sources (components/data/k8s_support.yaml asOf): a test that moves
# the day sets TRAINPLANE_TODAY itself (monkeypatch).
os.environ.setdefault("TRAINPLANE_TODAY", "2026-11-28")


@pytest.fixture
def plan_stack() -> Callable[..., RunResult]:
    def _plan(stack: str, stack_refs: dict[str, Any] | None = None) -> RunResult:
        return run_stack(stack, stack_refs, ROOT)

    return _plan


@pytest.fixture
def plan_platform() -> Callable[..., RunResult]:
    return plan_object


@pytest.fixture(scope="session")
def mockplan(tmp_path_factory: pytest.TempPathFactory) -> Dumps:
    """../shared/checks/mockplan.py's dump of a reference stack (a path; read-only), made once per session
    and shared by the xdist workers (tests/helpers/mockplan.py)."""
    return Dumps(shared_dir(tmp_path_factory.getbasetemp(), "mockplan-dumps"))
