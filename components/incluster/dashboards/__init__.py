"""Grafana dashboards shipped as JSON files beside this module, provisioned as ConfigMaps."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def dashboards() -> dict[str, dict]:
    """file name -> parsed dashboard, for every *.json here."""
    return {p.name: json.loads(p.read_text()) for p in sorted(HERE.glob("*.json"))}
