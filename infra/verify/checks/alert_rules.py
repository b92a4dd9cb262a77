"""The queries of the platform's alert and recording rules (PrometheusRule objects), and `promtool check
rules` on them where promtool is installed."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

from infra.verify.checks.promql_labels import Query
from infra.verify.context import Context
from infra.verify.report import CheckResult


def rule_queries(ctx: Context) -> Iterator[Query]:
    for pr in ctx.platform.objects("PrometheusRule"):
        for g in pr.spec.get("groups") or []:
            for r in g.get("rules") or []:
                name = r.get("alert") or r.get("record")
                yield Query(f"{pr.ref} rule {name}", str(r.get("expr", "")), pr.ref)


def promtool_check(ctx: Context, res: CheckResult) -> None:
    promtool = shutil.which("promtool") or (
        "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None
    )
    rules = ctx.platform.objects("PrometheusRule")
    if not rules:
        return
    if promtool is None:
        res.note("promtool not installed: alert rules not run through `promtool check rules`")
        return
    for pr in rules:
        with tempfile.NamedTemporaryFile("w", suffix=".rules.yaml", delete=False) as f:
            yaml.safe_dump({"groups": list(pr.spec.get("groups") or [])}, f)
            path = f.name
        try:
            proc = subprocess.run(
                [promtool, "check", "rules", path], capture_output=True, text=True, timeout=60
            )
        finally:
            Path(path).unlink(missing_ok=True)
        if proc.returncode != 0:
            detail = " ".join((proc.stderr or proc.stdout).split())[:300]
            res.fail(f"{pr.ref}: promtool check rules failed: {detail}", pr.ref)
        else:
            res.examined.append(f"promtool check rules {pr.ref}")
