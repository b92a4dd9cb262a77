"""What the plan creates without sending it: objects charts and cloud add-ons make from the values sent.

A Helm release is one resource in the plan, but on the cluster it becomes claims (kube-prometheus-stack's
Prometheus volumeClaimTemplate, Loki's single-binary volume), DaemonSets with tolerations (node exporter,
DCGM exporter, device plugin, Alloy, CSI node plugins, EFA plugin) and scrape configurations
(ServiceMonitors with honorLabels). Managed add-ons (EKS add-ons, GKE cluster add-ons) run DaemonSets
too. The knowledge of what each chart version renders lives in facts.yaml; this module applies it to
the values each release sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.verify import facts as F
from infra.verify.model import HelmRelease, Plan
from infra.verify.verifiers import cloud_verifier


@dataclass(frozen=True)
class Claim:
    """A PersistentVolumeClaim the platform asks for, sent as an object or made by a chart."""

    owner: str
    namespace: str
    name: str
    # None: no storageClassName (the cluster's default class); "": none (static binding only).
    storage_class: str | None
    access_modes: tuple[str, ...] = ()
    volume_name: str | None = None
    size: str | None = None


@dataclass(frozen=True)
class DaemonSetModel:
    """A DaemonSet that must reach some nodes, with what it tolerates."""

    owner: str
    name: str
    role: str
    tolerations: tuple[Mapping[str, Any], ...]
    # Which nodes it must run on: "gpu" (every GPU node), "efa" (EFA nodes), "storage" (nodes of pools
    # whose jobs mount its CSI driver's volumes), "spot" (nodes of spot pools), "all".
    scope: str
    csi_driver: str | None = None


@dataclass(frozen=True)
class Scrape:
    """How Prometheus scrapes one exporter: the monitor kind, honorLabels and relabelings."""

    exporter: str
    owner: str
    kind: str
    honor_labels: bool
    relabelings: tuple[Mapping[str, Any], ...] = ()
    namespace: str | None = None


@dataclass
class ChartModel:
    claims: list[Claim] = field(default_factory=list)
    daemon_sets: list[DaemonSetModel] = field(default_factory=list)
    scrapes: list[Scrape] = field(default_factory=list)
    # Releases of charts (or versions) facts.yaml does not know: reported, not guessed.
    unknown: list[str] = field(default_factory=list)
    # CSI drivers installed by the plan: driver -> what installs it.
    csi_drivers: dict[str, str] = field(default_factory=dict)


def _enabled(chart: str, values: Any, path: str | None) -> bool:
    return True if path is None else bool(F.chart_value(chart, values, path))


def _known_version(rel: HelmRelease, cf: Mapping[str, Any]) -> bool:
    if "versions" in cf:
        return str(rel.version) in cf["versions"]
    return str(rel.version) == str(cf.get("version"))


def _class_of(value: Any) -> str | None:
    """A chart's storageClass value as the claim's storageClassName ("-" means none at all)."""
    if value is None or value == "":
        return None
    return "" if value == "-" else str(value)


def release_objects(plan: Plan, rel: HelmRelease, out: ChartModel) -> None:
    cf = F.chart(rel.chart)
    if cf is None:
        return  # a chart with nothing modelled (kueue, cluster-autoscaler: Deployments only)
    if not _known_version(rel, cf):
        known = ", ".join(sorted(cf.get("versions") or [cf.get("version")]))
        out.unknown.append(
            f"{rel.ref}: facts.yaml models {rel.chart} {known}, not {rel.version}; "
            "read the chart's templates at that version and add it"
        )
        return
    _release_claims(rel, cf, out)
    _release_daemon_sets(rel, cf, out)
    _release_scrapes(rel, cf, out)


def _release_claims(rel: HelmRelease, cf: Mapping[str, Any], out: ChartModel) -> None:
    """The volume claims the chart's templates render from these values."""
    values = rel.values
    for c in cf.get("claims") or []:
        if not _enabled(rel.chart, values, c.get("enabledBy")):
            continue
        if c.get("modes") and F.chart_value(rel.chart, values, "deploymentMode") not in c["modes"]:
            continue
        if "spec" in c:
            spec = F.dig(values, c["spec"])
            if not spec:
                continue  # no volumeClaimTemplate: the chart uses an emptyDir
            out.claims.append(
                Claim(
                    owner=rel.ref,
                    namespace=rel.namespace,
                    name=c["name"],
                    storage_class=spec.get("storageClassName"),
                    access_modes=tuple(spec.get("accessModes") or ()),
                    size=str(F.dig(spec, "resources.requests.storage") or ""),
                )
            )
        else:
            out.claims.append(
                Claim(
                    owner=rel.ref,
                    namespace=rel.namespace,
                    name=c["name"],
                    storage_class=_class_of(F.chart_value(rel.chart, values, c["storageClass"])),
                    size=str(F.chart_value(rel.chart, values, c.get("size", "")) or ""),
                )
            )


def _release_daemon_sets(rel: HelmRelease, cf: Mapping[str, Any], out: ChartModel) -> None:
    """The DaemonSets the chart renders, with the tolerations these values give them."""
    values = rel.values
    for d in cf.get("daemonSets") or []:
        if not _enabled(rel.chart, values, d.get("enabledBy")):
            continue
        if any(F.chart_value(rel.chart, values, k) != v for k, v in (d.get("enabledWhen") or {}).items()):
            continue
        if d.get("tolerateAll") and F.chart_value(rel.chart, values, d["tolerateAll"]):
            tolerations: list[Any] = [{"operator": "Exists"}]
        else:
            tolerations = list(cf.get("fixedTolerations") or []) + list(
                F.chart_value(rel.chart, values, d["tolerations"]) or []
            )
        out.daemon_sets.append(
            DaemonSetModel(
                owner=rel.ref,
                name=f"{rel.namespace}/{d['name']}",
                role=d["role"],
                tolerations=tuple(tolerations),
                scope={True: "gpu", "efa": "efa", "storage": "storage", "spot": "spot"}.get(
                    d.get("gpuNodes"), "all"
                ),
                csi_driver=d.get("csiDriver"),
            )
        )
        if d.get("csiDriver"):
            out.csi_drivers[d["csiDriver"]] = rel.ref


def _release_scrapes(rel: HelmRelease, cf: Mapping[str, Any], out: ChartModel) -> None:
    """The scrape configurations (ServiceMonitors) the chart renders."""
    values = rel.values
    for s in cf.get("scrape") or []:
        if s.get("enabledBy") and not F.chart_value(rel.chart, values, s["enabledBy"]):
            continue
        out.scrapes.append(
            Scrape(
                exporter=s["exporter"],
                owner=rel.ref,
                kind=s["kind"],
                honor_labels=bool(F.chart_value(rel.chart, values, s["honorLabels"])),
                relabelings=tuple(F.chart_value(rel.chart, values, s["relabelings"]) or ()),
                namespace=rel.namespace,
            )
        )


def addon_objects(plan: Plan, out: ChartModel) -> None:
    """DaemonSets and CSI drivers of the cloud's managed add-ons that the plan turns on (the verifier's
    `addon_objects` hook: EKS add-ons, GKE cluster add-ons)."""
    cloud_verifier(plan).addon_objects(plan, out)


def plan_objects(plan: Plan, out: ChartModel) -> None:
    """Claims and DaemonSets the plan sends as objects (PVCs, StatefulSet templates, DaemonSets)."""
    for pvc in plan.objects("PersistentVolumeClaim"):
        spec = pvc.spec
        out.claims.append(
            Claim(
                owner=pvc.ref,
                namespace=pvc.namespace or "default",
                name=pvc.name,
                storage_class=spec.get("storageClassName"),
                access_modes=tuple(spec.get("accessModes") or ()),
                volume_name=spec.get("volumeName"),
                size=str(F.dig(spec, "resources.requests.storage") or ""),
            )
        )
    for sts in plan.objects("StatefulSet"):
        for t in sts.spec.get("volumeClaimTemplates") or []:
            spec = t.get("spec") or {}
            out.claims.append(
                Claim(
                    owner=sts.ref,
                    namespace=sts.namespace or "default",
                    name=f"{(t.get('metadata') or {}).get('name')}-{sts.name}-0",
                    storage_class=spec.get("storageClassName"),
                    access_modes=tuple(spec.get("accessModes") or ()),
                )
            )
    for ds in plan.objects("DaemonSet"):
        pod = F.dig(ds.body, "spec.template.spec") or {}
        out.daemon_sets.append(
            DaemonSetModel(
                ds.ref, f"{ds.namespace}/{ds.name}", ds.name, tuple(pod.get("tolerations") or ()), "selected"
            )
        )


def model(plan: Plan) -> ChartModel:
    out = ChartModel()
    plan_objects(plan, out)
    for rel in plan.releases():
        release_objects(plan, rel, out)
    addon_objects(plan, out)
    return out


def tolerates(tolerations: tuple[Mapping[str, Any], ...] | list, taint: Mapping[str, Any]) -> bool:
    """Kubernetes toleration matching (core/v1 Toleration.ToleratesTaint)."""
    for t in tolerations:
        effect = t.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        key = t.get("key")
        if op == "Exists":
            if not key or key == taint.get("key"):
                return True
            continue
        if key == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False
