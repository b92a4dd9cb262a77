"""`trainplane render`: write a planned stack's Kubernetes objects and Helm values as YAML, offline.

Every Kubernetes object goes to `<out>/<namespace or _cluster>/<Kind>-<name>.yaml` (one object per file)
and every Helm release's values to `<out>/helm/<namespace>/<release>.values.yaml`, headed by the chart,
version and repository, for review and GitOps. The input is a mock-engine plan (infra.mockcloud.RunResult).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infra.mockcloud import Resource, RunResult

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CLUSTER_SCOPED_DIR = "_cluster"


def _normal(value: Any) -> Any:
    """Undo the mock engine's number encoding (every number arrives as a float)."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def is_kubernetes_object(r: Resource) -> bool:
    return r.custom and r.type.startswith("kubernetes:") and r.type != HELM_RELEASE


def kubernetes_objects(result: RunResult) -> list[dict[str, Any]]:
    """The manifests the stack would apply, as plain dicts (apiVersion, kind, metadata, ...)."""
    return [_normal(r.inputs) for r in result.resources if is_kubernetes_object(r)]


def helm_releases(result: RunResult) -> list[dict[str, Any]]:
    return [_normal(r.inputs) for r in result.of_type(HELM_RELEASE)]


def _safe(part: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in part)


def render(result: RunResult, out_dir: Path) -> list[Path]:
    """Write the objects and release values of `result` under `out_dir`; return the files written."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    for obj in kubernetes_objects(result):
        meta = obj.get("metadata") or {}
        folder = out_dir / _safe(meta.get("namespace") or CLUSTER_SCOPED_DIR)
        path = folder / f"{_safe(obj['kind'])}-{_safe(meta['name'])}.yaml"
        if path in written:
            raise ValueError(f"two objects render to {path}")
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        written.append(path)
    for rel in helm_releases(result):
        folder = out_dir / "helm" / _safe(rel.get("namespace") or "default")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{_safe(rel['name'])}.values.yaml"
        repo = (rel.get("repositoryOpts") or {}).get("repo", "")
        header = f"# chart: {rel['chart']}  version: {rel.get('version')}" + (
            f"  repo: {repo}" if repo else ""
        )
        path.write_text(header + "\n" + yaml.safe_dump(rel.get("values") or {}, sort_keys=False))
        written.append(path)
    return written
