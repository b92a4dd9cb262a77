"""Fixtures every tier shares. The helpers behind them live in tests/helpers/ (plans.py: `planned`,
`plan_object`, `one`, ...); tests import helpers from there, never from another test file."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import infra.mockcloud
from infra.mockcloud import RunResult, run_stack
from tests.helpers import procs, tiers
from tests.helpers.mockplan import Dumps
from tests.helpers.plans import ROOT, plan_object, share_plans
from tests.helpers.session import shared_dir

# Facts that age (price dates, the Kubernetes support calendar) are judged on one day in every test, the
# day the calendar was last read at its sources (components/<cloud>/data/k8s_support.yaml asOf): a test
# that moves the day sets TRAINPLANE_TODAY itself (monkeypatch).
os.environ.setdefault("TRAINPLANE_TODAY", "2026-11-28")

# Property tests judge behaviour, never speed: on a loaded 2-core CI machine a strategy's draw can take
# longer than Hypothesis' health check allows (test_gcp_config_errors failed so once, with nothing wrong).
settings.register_profile("trainplane", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("trainplane")


@pytest.fixture(scope="session", autouse=True)
def _plans_shared_between_workers(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The reference plans (tests/helpers/plans.py `planned`) are made once per session, not once per xdist
    worker: each is written beside the workers' folders by the first worker that needs it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        share_plans(shared_dir(tmp_path_factory.getbasetemp(), "plans"))


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


def _kill_groups_then_die(signum: int, _frame: Any) -> None:
    """SIGTERM/SIGHUP to pytest (a CI timeout, a closed terminal): what the tests started goes first."""
    procs.kill_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def pytest_configure(config: pytest.Config) -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _kill_groups_then_die)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every process group a test started and did not end (tests/helpers/procs.py) ends with the session."""
    procs.kill_all()


# The engine itself notes each run (tests/helpers/tiers.py), whoever calls it: run_program and run_stack
# reach it through this module attribute, and so does the CLI called as a function.
_run_function = infra.mockcloud.run_function


def _noted_run_function(*args: Any, **kwargs: Any) -> Any:
    tiers.note(tiers.PLANS)
    return _run_function(*args, **kwargs)


infra.mockcloud.run_function = _noted_run_function  # type: ignore[assignment]

INTEGRATION_DIR = ROOT / "tests" / "integration"
PLANS_MODULE = "pytestmark = pytest.mark.plans"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier alone (no marker): the plans and integration tiers' modules are not even imported",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With --fast, a module of the plans tier (its `pytestmark`) or under tests/integration/ is not
    collected: importing them (the cloud SDKs, torch, ...) would take most of the fast tier's time."""
    if not config.getoption("--fast"):
        return None
    if collection_path == INTEGRATION_DIR or INTEGRATION_DIR in collection_path.parents:
        return True
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return PLANS_MODULE in collection_path.read_text()
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/integration/ is in the integration tier (its marker), and runs first; with
    --fast, the tests of the other tiers in a fast module are deselected.

    First: xdist's worksteal gives each worker a contiguous half of this order and lets an idle worker steal
    from the end of the other's queue. The integration tier holds the long tests (launchers, servers,
    operators, the fault campaign); run last, as in collection order, the run ended on a worker finishing
    one of them alone. First, the run ends on short unit tests that the two workers share."""
    for item in items:
        if INTEGRATION_DIR in item.path.parents:
            item.add_marker(pytest.mark.integration)
    items.sort(key=lambda item: INTEGRATION_DIR not in item.path.parents)  # stable: each tier keeps its order
    if config.getoption("--fast"):
        fast, heavy = [], []
        for item in items:
            tiered = item.get_closest_marker("plans") or item.get_closest_marker("integration")
            (heavy if tiered else fast).append(item)
        if heavy:
            config.hook.pytest_deselected(items=heavy)
            items[:] = fast


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Any:
    """No plan and no process while the modules are imported (tests/helpers/tiers.py `collecting`)."""
    with tiers.collecting():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    tiers.begin()  # before the item's fixtures (a module's plan fixture counts for its first test)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A test that did more than its tier's marker allows fails, naming the marker it needs."""
    result = yield
    if problem := tiers.misplaced(m.name for m in item.iter_markers()):
        pytest.fail(problem, pytrace=False)
    return result
