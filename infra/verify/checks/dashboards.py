"""The queries of the platform's Grafana dashboards (ConfigMaps labelled grafana_dashboard): each panel's
targets and each `label_values` variable."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from infra.verify.checks.promql_labels import Query
from infra.verify.context import Context


def _panels(panels: list[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for p in panels or []:
        yield p
        yield from _panels(p.get("panels") or [])


LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$")


def dashboard_queries(ctx: Context) -> Iterator[Query]:
    for cm in ctx.platform.objects("ConfigMap"):
        if cm.labels.get("grafana_dashboard") is None:
            continue
        for file_name, text in (cm.body.get("data") or {}).items():
            try:
                board = json.loads(text)
            except (TypeError, json.JSONDecodeError):
                continue
            title = board.get("title", file_name)
            for p in _panels(board.get("panels") or []):
                for t in p.get("targets") or []:
                    if t.get("expr"):
                        yield Query(f"dashboard {title!r} panel {p.get('title')!r}", str(t["expr"]), cm.ref)
            for v in (board.get("templating") or {}).get("list") or []:
                q = v.get("query")
                q = q.get("query") if isinstance(q, dict) else q
                m = LABEL_VALUES.match(str(q or ""))
                if m:
                    # label_values(sel, label): the label must exist on the selector's series.
                    yield Query(
                        f"dashboard {title!r} variable {v.get('name')!r}",
                        f"count by ({m.group(2)}) ({m.group(1)})",
                        cm.ref,
                    )
