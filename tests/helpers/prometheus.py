"""A real Prometheus (Debian's package) on backfilled data: the series are written as OpenMetrics, turned
into TSDB blocks with `promtool tsdb create-blocks-from openmetrics` and served by a fresh `prometheus`."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import procs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hour_start(hours_ago: int = 4) -> int:
    """Minute 0 `hours_ago` hours ago on a whole hour: inside the default retention, and whole minutes as
    rules' samples fall."""
    return (int(time.time()) // 3600 - hours_ago) * 3600


@contextmanager
def serve(tmp: Path, config: dict[str, Any] | None = None, lookback: str | None = None) -> Iterator[str]:
    """A Prometheus on tmp/tsdb with `config` (prometheus.yml; default: nothing scraped) until exit: its URL
    once it is ready."""
    config = config or {"global": {"scrape_interval": "1m"}}
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp / "prometheus.log", "ab") as log:
        proc = procs.spawn(
            [
                "prometheus",
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                *([f"--query.lookback-delta={lookback}"] if lookback else []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise AssertionError((tmp / "prometheus.log").read_text()[-2000:])
        yield url
    finally:
        procs.stop(proc, 30)


def _run(args: list[str], cwd: Path) -> None:
    got = procs.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr


@contextmanager
def backfilled(
    tmp: Path,
    openmetrics: str,
    rule_passes: Sequence[list[dict[str, Any]]] = (),
    span: tuple[int, int] | None = None,
    lookback: str | None = None,
) -> Iterator[str]:
    """Prometheus' URL, serving `openmetrics` (a `# EOF`-terminated OpenMetrics text) until exit.

    `rule_passes`: recording rule groups whose history is backfilled too (`promtool tsdb create-blocks-from
    rules`, evaluated from `span`'s start to its end, Unix seconds, every group interval (60s unless the
    group says) against the data so far), one pass after the other: rules that read other recorded series
    come in a later pass than those (promtool does not evaluate rules against what it backfills itself).
    `lookback`: Prometheus' --query.lookback-delta (5m by default), for every Prometheus started here."""
    (tmp / "data.om").write_text(openmetrics)
    _run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "data.om", "tsdb"], tmp)
    for i, groups in enumerate(rule_passes):
        assert span is not None, "backfilling rules needs the span to evaluate them over"
        # One file name for every pass: a group's evaluation offset into each interval hashes its name and
        # file (prometheus rules.Group.hash, EvalTimestamp), and the passes are one group split in two.
        (tmp / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
        with serve(tmp, lookback=lookback) as url:
            _run(
                [
                    "promtool",
                    "tsdb",
                    "create-blocks-from",
                    "rules",
                    f"--url={url}",
                    f"--start={span[0]}",
                    f"--end={span[1]}",
                    f"--output-dir=rules-{i}",
                    "rules.yaml",
                ],
                tmp,
            )
        # Prometheus opens the blocks of its data directory at start (overlapping blocks are merged at
        # query time since Prometheus 2.39).
        for block in (tmp / f"rules-{i}").iterdir():
            block.rename(tmp / "tsdb" / block.name)
    with serve(tmp, lookback=lookback) as url:
        yield url


def instant(url: str, query: str, at: float) -> list[dict[str, Any]]:
    """An instant query's vector result ({"metric": {...}, "value": [t, "v"]} rows) at `at` (Unix s)."""
    data = urllib.parse.urlencode({"query": query, "time": str(at)}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=data, timeout=30) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    result = body["data"]["result"]
    if body["data"]["resultType"] == "scalar":
        return [{"metric": {}, "value": result}]
    return result
