"""`trainplane render`: write a planned stack's Kubernetes objects and Helm values as YAML, offline.

Every Kubernetes object goes to `<out>/<namespace or _cluster>/<Kind>-<name>.yaml` (one object per file);
a stack that writes to several clusters (a fleet: its manager and workers) gets a folder per cluster first,
named after the cluster's provider resource (`<out>/<provider>/<namespace>/...`).
and every Helm release's values to `<out>/helm/<namespace>/<release>.values.yaml`, headed by the chart,
version and repository, for review and GitOps. The input is a mock-engine plan (infra.mockcloud.RunResult).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infra.mockcloud import RunResult
from infra.resources import HELM_RELEASE, normal

CLUSTER_SCOPED_DIR = "_cluster"
# A manifest's head, in the order people write it; every other key (and every nested one) is sorted.
HEAD_KEYS = ("apiVersion", "kind", "metadata")


def kubernetes_objects(result: RunResult) -> list[dict[str, Any]]:
    """The manifests the stack would apply, as plain dicts (apiVersion, kind, metadata, ...)."""
    return [normal(dict(r.inputs)) for r in result.resources if r.is_kubernetes_object]


def helm_releases(result: RunResult) -> list[dict[str, Any]]:
    return [normal(dict(r.inputs)) for r in result.of_type(HELM_RELEASE)]


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def canonical_yaml(obj: dict[str, Any], head: tuple[str, ...] = ()) -> str:
    """YAML whose bytes depend only on the content: the engine's key order differs from one process to
    the next (its inputs pass through protobuf Structs), and a GitOps diff must show only real changes."""
    ordered = {k: obj[k] for k in head if k in obj} | {k: obj[k] for k in sorted(obj) if k not in head}
    return yaml.safe_dump({k: _sorted(v) for k, v in ordered.items()}, sort_keys=False)


def _safe(part: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in part)


def render(result: RunResult, out_dir: Path) -> list[Path]:
    """Write the objects and release values of `result` under `out_dir`; return the files written."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    objects = [r for r in result.resources if r.is_kubernetes_object]
    several = len({r.provider for r in objects}) > 1
    for res in objects:
        obj = normal(dict(res.inputs))
        meta = obj.get("metadata") or {}
        # A provider reference is `<provider URN>::<id>`; the provider's resource name names the cluster.
        base = out_dir / _safe(str(res.provider).split("::")[-2]) if several else out_dir
        folder = base / _safe(meta.get("namespace") or CLUSTER_SCOPED_DIR)
        path = folder / f"{_safe(obj['kind'])}-{_safe(meta['name'])}.yaml"
        if path in written:
            raise ValueError(f"two objects render to {path}")
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(canonical_yaml(obj, HEAD_KEYS))
        written.append(path)
    for rel in helm_releases(result):
        folder = out_dir / "helm" / _safe(rel.get("namespace") or "default")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{_safe(rel['name'])}.values.yaml"
        repo = (rel.get("repositoryOpts") or {}).get("repo", "")
        header = f"# chart: {rel['chart']}  version: {rel.get('version')}" + (
            f"  repo: {repo}" if repo else ""
        )
        path.write_text(header + "\n" + canonical_yaml(rel.get("values") or {}))
        written.append(path)
    return written
