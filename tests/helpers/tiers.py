"""The tiers of the suite, by marker (pyproject.toml [tool.pytest.ini_options] markers):

- no marker: in-process logic only (`make test-fast`, the inner loop);
- `plans`: runs the Pulumi program under the mock engine in the test process (a module says so with
  `pytestmark = pytest.mark.plans`);
- `integration`: starts processes or servers (every test under tests/integration/ has it; a test elsewhere
  says so with `@pytest.mark.integration`).

A test's tier is its marker, and what it does must fit: the helpers that run the engine (tests/helpers/
plans.py, infra.mockcloud.run_function) and start processes (tests/helpers/procs.py) note it here, and
tests/conftest.py fails a test that did more than its marker allows, so `make test-fast` cannot quietly
grow slow.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

PLANS = "plans"
INTEGRATION = "integration"

# What the running test did: PLANS (the mock engine ran, or a cached plan was read) and/or INTEGRATION
# (a process started).
_used: set[str] = set()


# Whether pytest is collecting (tests/conftest.py sets it): a module that plans or starts a process at
# import makes every xdist worker pay for it before any test runs, and `--fast` too (found: two modules
# planned eleven stacks at import, 17 s of each worker's collection).
_collecting: list[bool] = [False]


class CollectionWork(RuntimeError):
    """A plan or a process while the tests are being collected."""


def note(kind: str) -> None:
    """The running test did `kind` (PLANS or INTEGRATION); while collecting, that is an error."""
    if _collecting[0]:
        raise CollectionWork(
            f"a test module did {kind} work at import: do it in a test or a fixture (parametrize from the "
            "stack files, not from plans)"
        )
    _used.add(kind)


@contextmanager
def collecting() -> Iterator[None]:
    """pytest's collection: `note` refuses work inside it."""
    _collecting[0] = True
    try:
        yield
    finally:
        _collecting[0] = False


def begin() -> None:
    """A test's setup starts: nothing done yet."""
    _used.clear()


def misplaced(markers: Iterable[str]) -> str | None:
    """Why the running test, with `markers`, is in the wrong tier for what it did; None when it fits."""
    have = set(markers)
    if INTEGRATION in _used and INTEGRATION not in have:
        return "this test starts a process: mark it `@pytest.mark.integration` (tests/helpers/tiers.py)"
    if PLANS in _used and not have & {PLANS, INTEGRATION}:
        return (
            "this test runs the Pulumi program under the mock engine: mark its module "
            "`pytestmark = pytest.mark.plans` (tests/helpers/tiers.py)"
        )
    return None


@contextmanager
def scratch() -> Iterator[None]:
    """What is noted inside the block is forgotten after it (tests/unit/repo/test_tiers.py notes on purpose)."""
    kept = set(_used)
    _used.clear()
    try:
        yield
    finally:
        _used.clear()
        _used.update(kept)
