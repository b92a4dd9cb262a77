"""The reference plans are made once per test session, not once per xdist worker (tests/helpers/plans.py):
the first worker to need a plan writes it to the session's shared folder, the others read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.mockcloud import RunResult
from tests.helpers import plans

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


@pytest.fixture
def shared(tmp_path: Path):
    before = plans._SHARED
    plans.share_plans(tmp_path)
    yield tmp_path
    plans.share_plans(before)


def test_a_plan_made_by_one_worker_is_read_by_the_next(shared: Path):
    made: list[str] = []

    def run() -> RunResult:
        made.append("planned")
        return RunResult(stack="s", resources=[], outputs={"kubeconfig": "k"})

    first = plans._shared_run("key-1", run)
    # Another worker: its own process cache is empty, the shared file answers.
    second = plans._shared_run("key-1", run)
    assert made == ["planned"]
    assert second.outputs == first.outputs == {"kubeconfig": "k"}
    assert len(list(shared.glob("*.pickle"))) == 1


def test_a_plan_that_fails_writes_nothing_so_every_worker_sees_the_error(shared: Path):
    def broken() -> RunResult:
        raise RuntimeError("invalid platform")

    for _ in range(2):
        with pytest.raises(RuntimeError, match="invalid platform"):
            plans._shared_run("key-2", broken)
    assert list(shared.glob("*.pickle")) == []
