"""suspects.py: node suspects from firing straggler alerts (per team policy) and from repeated trainer hangs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from components.incluster.job_pod import CONTAINER
from components.incluster.names import JOB_LABEL
from contract import exits as exit_codes
from contract.recovery import (
    ALERT_STRAGGLER,
    EVENT_STRAGGLER,
    QUARANTINED_AT_ANNOTATION,
    RETURNED_AT_ANNOTATION,
)
from controllers import suspects as sx
from controllers.node_return import rfc3339
from tests.helpers import procs
from trainer import contract

T0 = 1_800_000_000.0
MIN = 60.0


def alert(
    node: str | None = "gpu-1", ns: str = "team-a", *, state: str = "firing", name: str = ALERT_STRAGGLER
):
    labels = {"alertname": name, "alertstate": state, "namespace": ns, "job": "llm", "rank": "3"}
    if node:
        labels["node"] = node
    return {"metric": labels, "value": [T0, "1"]}


POLICY = {"team-a": "alert", "team-q": "quarantine"}

# (case, rows, expected [(node, action)])
STRAGGLER_CASES = [
    ("team default alert: an Event only", [alert()], [("gpu-1", "event")]),
    ("team opted in: quarantine", [alert(ns="team-q")], [("gpu-1", "quarantine")]),
    ("a namespace that is no team's: the default, alert", [alert(ns="elsewhere")], [("gpu-1", "event")]),
    ("pending (for not yet elapsed): nothing", [alert(state="pending")], []),
    ("another alert: nothing", [alert(name="TrainplaneJobHung")], []),
    ("no node label: nothing to point at", [alert(node=None)], []),
    (
        "two teams on one node, one opted in: quarantine",
        [alert(), alert(ns="team-q")],
        [("gpu-1", "quarantine")],
    ),
    (
        "two nodes, each by its own team",
        [alert("gpu-2", "team-q"), alert("gpu-1")],
        [("gpu-1", "event"), ("gpu-2", "quarantine")],
    ),
]


@pytest.mark.parametrize(("case", "rows", "want"), STRAGGLER_CASES, ids=[c[0] for c in STRAGGLER_CASES])
def test_straggler_rules(case, rows, want):
    got = sx.straggler_suspects(rows, POLICY)
    assert [(s.node, s.action) for s in got] == want
    for s in got:
        assert s.reason == sx.STRAGGLER_REASON
        assert s.event_reason == (EVENT_STRAGGLER if s.action == "event" else "")
        assert "team-" in s.message or "elsewhere" in s.message  # the evidence is named


def test_the_query_asks_for_the_firing_straggler_alerts_only():
    assert sx.STRAGGLER_QUERY == 'ALERTS{alertname="TrainplaneStragglerNode",alertstate="firing"}'


def test_straggler_suspects_are_stable_across_rounds():
    """The same firing rows give the same keys, so the caller says each once."""
    rows = [alert(), alert("gpu-2", "team-q")]
    assert [s.key for s in sx.straggler_suspects(rows, POLICY)] == [
        s.key for s in sx.straggler_suspects(list(reversed(rows)), POLICY)
    ]


def pod(
    node: str, code: int, finished: float, *, job: str = "llm", name: str = "llm-0", last: bool = False
) -> dict[str, Any]:
    term = {"terminated": {"exitCode": code, "finishedAt": rfc3339(finished)}}
    status = {"name": CONTAINER, "state": {} if last else term, "lastState": term if last else {}}
    return {
        "metadata": {"name": name, "namespace": "team-a", "labels": {JOB_LABEL: job}},
        "spec": {"nodeName": node},
        "status": {"containerStatuses": [status, {"name": "sidecar", "state": term}]},
    }


def exits(*pods: dict[str, Any]) -> list[sx.HangExit]:
    return [e for p in pods for e in sx.hang_exits(p, container=CONTAINER, job_label=JOB_LABEL)]


NOW = T0 + 3 * 3600
# (case, pods, expected suspect nodes)
HANG_CASES = [
    ("one hang: no suspect", [pod("a", 124, T0)], []),
    (
        "two hangs of one job an hour apart on a node: suspect",
        [pod("a", 124, T0), pod("a", 124, T0 + 3600, name="llm-1")],
        ["a"],
    ),
    (
        "two exits of one incident (same job, minutes apart): one incident",
        [pod("a", 124, T0), pod("a", 124, T0 + 5 * MIN, name="llm-1")],
        [],
    ),
    (
        "two jobs hanging on one node at once: two incidents",
        [pod("a", 124, T0), pod("a", 124, T0, job="other")],
        ["a"],
    ),
    (
        "a gang hang then a restart elsewhere hanging again: only the common node",
        [
            pod("a", 124, T0),
            pod("b", 124, T0),
            pod("a", 124, T0 + 3600, name="r1"),
            pod("c", 124, T0 + 3600, name="r2"),
        ],
        ["a"],
    ),
    (
        "exit 75 (peer lost) is no evidence against its own node",
        [pod("a", 75, T0), pod("a", 75, T0 + 3600, name="x")],
        [],
    ),
    (
        "a hang and a peer-lost exit: one incident only",
        [pod("a", 124, T0), pod("a", 75, T0 + 3600, name="x")],
        [],
    ),
    ("a crash (1) is no hang", [pod("a", 1, T0), pod("a", 1, T0 + 3600, name="x")], []),
    (
        "outside the window: forgotten",
        [pod("a", 124, NOW - 7 * 3600), pod("a", 124, NOW - 3600, name="x")],
        [],
    ),
    (
        "the last termination counts too (a restarted container)",
        [pod("a", 124, T0, last=True), pod("a", 124, T0 + 3600, name="x")],
        ["a"],
    ),
]


@pytest.mark.parametrize(("case", "pods", "want"), HANG_CASES, ids=[c[0] for c in HANG_CASES])
def test_hang_rules(case, pods, want):
    got = sx.hang_suspects(exits(*pods), NOW)
    assert [s.node for s in got] == want
    assert all((s.reason, s.action) == (sx.HANG_REASON, "quarantine") for s in got)


def test_hang_suspects_are_idempotent_and_spent_by_the_quarantine():
    seen = exits(pod("a", 124, T0), pod("a", 124, T0 + 3600, name="x"))
    assert sx.hang_suspects(seen + seen, NOW) == sx.hang_suspects(seen, NOW)  # the same exit seen twice
    quarantined = {"metadata": {"annotations": {QUARANTINED_AT_ANNOTATION: rfc3339(T0 + 3601)}}}
    assert sx.hang_suspects(seen, NOW, {"a": sx.spent_until(quarantined)}) == []
    returned = {"metadata": {"annotations": {RETURNED_AT_ANNOTATION: rfc3339(T0 + 2 * 3600)}}}
    later = seen + exits(pod("a", 124, T0 + 2.5 * 3600, name="y"))
    assert sx.hang_suspects(later, NOW, {"a": sx.spent_until(returned)}) == []  # one new hang is not two
    assert sx.spent_until({"metadata": {}}) is None


def test_a_pod_without_a_node_or_trainer_container_shows_no_hang():
    assert exits({"metadata": {"name": "p"}, "spec": {}, "status": {}}) == []
    p = pod("a", 124, T0)
    p["status"]["containerStatuses"][0]["name"] = "other"
    assert exits(p) == []


def test_the_controller_and_the_trainer_read_one_set_of_exit_codes():
    """The codes have one home, contract/exits.py (the controller image carries it, not the trainer): a code
    redefined in the trainer's contract or the controller would drift from what the other reads."""
    codes = {n: v for n, v in vars(exit_codes).items() if n.startswith("EXIT_") and isinstance(v, int)}
    assert {n: v for n, v in vars(contract).items() if n.startswith("EXIT_") and isinstance(v, int)} == codes
    assert sx.EXIT_HANG == codes["EXIT_HANG"] != codes["EXIT_PEER_LOST"]
    for module in (contract, sx):
        defined = re.findall(r"^(EXIT_\w+)\s*(?::[^=]*)?=", Path(str(module.__file__)).read_text(), re.M)
        assert not set(defined) & set(codes), module


@pytest.mark.integration  # starts a process (tests/helpers/tiers.py)
def test_the_decision_modules_run_on_the_standard_library_alone(tmp_path):
    """The decisions need neither kopf nor the `kubernetes` client: the standard library and the contract."""
    import shutil
    import sys

    import contract
    import controllers
    from contract import exits, recovery
    from controllers import node_return

    for package, modules in (
        (controllers, (controllers, sx, node_return)),
        (contract, (contract, recovery, exits)),
    ):
        (tmp_path / package.__name__).mkdir()
        for module in modules:
            shutil.copy(module.__file__, tmp_path / package.__name__)
    # -I -S: no site-packages (nothing but the standard library), no project on the path.
    code = (
        "import sys; sys.path.insert(0, '.'); from controllers import suspects; print(suspects.HANG_REASON)"
    )
    done = procs.run([sys.executable, "-I", "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, sx.HANG_REASON), done.stderr
