"""The fault campaign, scaled down (issue 19 point 3; the full day is `make campaign`): real launcher and
trainer processes on the job builder's JobSet, the failure simulator deciding every restart, the node model
placing every pod by the template's tolerations and selectors.

A node with XID 79 is quarantined and its pod evicted (restart not counted; no pod lands there again), a
straggler raises the alert and nothing else, a checkpoint write fails and training goes on, a lost node's
peer exits 75 first (restart not counted) and redoes the steps back to the save before the failed one; the
final weights equal an uninterrupted run's bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.recovery import (
    EVENT_EVICTED,
    EVENT_QUARANTINED,
    EVENT_STRAGGLER,
    QUARANTINE_CONDITION,
    QUARANTINE_TAINT,
)
from tests.campaign.day import run, table
from tests.campaign.harness import STEP_S, Fault

FAULTS = (
    Fault("xid79", "xid", 17, 1),
    Fault("straggler", "straggler", 20, 1, until=36),
    Fault("ckpt-write", "save_failure", 40, 0),
    Fault("lost-node", "lost_node", 44, 0),
)


@pytest.mark.slow
def test_a_scaled_down_day_of_faults_loses_nothing_and_counts_no_restart_wrongly(tmp_path: Path) -> None:
    # run() asserts the kinds (EXPECTED), no placement on a quarantined node, and the bitwise final state
    c, led = run(tmp_path, 60, FAULTS, goodput_floor=None)
    print(table(c, led))

    xid = c.outcomes["xid79"]
    node = c.cluster.nodes[xid.node]
    assert node.unschedulable and any(
        t["key"] == QUARANTINE_TAINT and t["effect"] == "NoSchedule" for t in node.taints
    )
    assert node.conditions[QUARANTINE_CONDITION]["reason"] == "Xid79"
    # every later attempt was placed while the node was quarantined, and elsewhere
    later = [at.placement for at in c.attempts[1:]]
    assert later and all(xid.node not in p.values() for p in later)
    assert c.quarantined_seen >= len(later)
    reasons = [r for r, _, _ in c.cluster.events]
    assert reasons.count(EVENT_QUARANTINED) == 1 and reasons.count(EVENT_EVICTED) == 1
    assert reasons.count(EVENT_STRAGGLER) == 1

    # the simulator's decisions: both restarts uncounted, through the rules the job builder wrote
    assert (c.state.restarts, c.state.restarts_count_towards_max) == (2, 0)
    assert xid.rule.startswith("PreemptionRestartsUncounted") and xid.codes == [137]
    lost = c.outcomes["lost-node"]
    assert lost.rule.startswith("PeerLossRestartsWithoutCounting") and lost.codes == [75]

    # steps redone: back to the newest commit; the failed save at 40 sends the lost node back to 30
    assert dict(led.redone) == {"xid79": 17 - 10, "lost-node": 44 - 30}
    assert led.productive == 60 * STEP_S and 0 < led.productive / led.wall < 1
