"""The GPU health controller's XID signal (contract.recovery.XID_QUERY) on a real Prometheus: it shows a GPU's
XID while it is recent and clears afterwards, however long DCGM's last-XID gauge keeps the number
(NVIDIA/dcgm-exporter#500: DCGM_FI_DEV_XID_ERRORS stays at the last XID until the exporter restarts).

The series are what dcgm-exporter 4.5.3-4.8.2 writes: DCGM_FI_DEV_XID_ERRORS, the last XID's number, and
DCGM_EXP_XID_ERRORS_COUNT, the number of each XID's events within its window (5 minutes by default), one row
per XID with label `xid`, or one row without it valued 0 when there was none (collector/expcollector.go)."""

from __future__ import annotations

import shutil

import pytest

from components.incluster.gpu_health import XID_QUERY
from controllers.gpu_health_agent import xids_by_node
from tests.helpers.prometheus import backfilled, hour_start, instant

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="prometheus/promtool not on PATH (CI installs Debian's prometheus)",
)

MINUTES = 121
WINDOW = 5  # the exporter's --xid-count-window-size, minutes


def xid_series(node: str, last_xid: list[int], events: dict[int, list[int]] | None) -> dict[str, list]:
    """One GPU's series, per minute: the gauge, and unless `events` is None (an exporter without the count)
    the windowed count of the XID events at the given minutes. {metric: [(labels, minute, value)]}."""
    gpu = f'node="{node}",gpu="3"'
    out: dict[str, list] = {"DCGM_FI_DEV_XID_ERRORS": [(gpu, m, v) for m, v in enumerate(last_xid)]}
    if events is None:
        return out
    counts = out["DCGM_EXP_XID_ERRORS_COUNT"] = []
    for m in range(MINUTES):
        recent = {x: sum(1 for e in at if m - WINDOW < e <= m) for x, at in events.items()}
        rows = [(f'{gpu},xid="{x}"', m, n) for x, n in recent.items() if n] or [(gpu, m, 0)]
        counts.extend(rows)
    return out


def openmetrics(start: int) -> str:
    nodes = [
        # An XID 79 from before minute 0: the gauge keeps it for ever, no event since.
        xid_series("stale", [79] * MINUTES, {}),
        # A first XID 79 at minute 60.
        xid_series("fresh", [0] * 60 + [79] * (MINUTES - 60), {79: [60]}),
        # The same XID 79 again at minute 90: the gauge cannot show it (same value), the count does.
        xid_series("repeat", [79] * MINUTES, {79: [90]}),
        # An exporter without the count: a new, different XID (48) at minute 100 changes the gauge.
        xid_series("no-count", [79] * 100 + [48] * (MINUTES - 100), None),
    ]
    out = []
    for name in ("DCGM_FI_DEV_XID_ERRORS", "DCGM_EXP_XID_ERRORS_COUNT"):
        out.append(f"# TYPE {name} gauge")
        rows = [row for series in nodes for row in series.get(name, [])]
        # Each series' samples together, in time order.
        for labels, minute, value in sorted(rows, key=lambda r: (r[0], r[1])):
            out.append(f"{name}{{{labels}}} {value} {start + 60 * minute}")
    return "\n".join([*out, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xid-prometheus")
    start = hour_start(3)
    with backfilled(tmp, openmetrics(start)) as url:
        yield url, start


@pytest.mark.parametrize(
    ("minute", "expected"),
    [
        (30, {}),  # the stale gauges of `stale` and `repeat` are no signal
        (61, {"fresh": [79]}),
        (64, {"fresh": [79]}),
        (72, {}),  # the XID is older than the window: cleared, without any restart
        (91, {"repeat": [79]}),  # a new XID with the number the gauge already showed
        (101, {"no-count": [48]}),
        (120, {}),
    ],
)
def test_an_xid_counts_while_it_is_recent_and_clears_after(prom, minute, expected):
    url, start = prom
    got = xids_by_node(instant(url, XID_QUERY, start + 60 * minute))
    assert {node: sorted(set(x)) for node, x in got.items()} == expected
