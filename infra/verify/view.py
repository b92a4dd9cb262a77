"""One cluster view, two sources: what a check reads about the cluster, from a plan (offline: the plan's
objects over what the cloud creates by itself, per the facts) or from a running cluster (live: the lists
the API server serves, infra/verify/live.py). A check written against `ClusterView` runs on both; its
findings differ only where the view says where its answer comes from (`place`, `missing_class`,
`missing_driver`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from infra.verify import facts as F
from infra.verify.context import Context

DEFAULT_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)

Key = tuple[str, str]  # (namespace, name)


@dataclass
class ClusterState:
    """What verify reads from a cluster: plain dicts, as the API serves them."""

    storage_classes: list[dict[str, Any]] = field(default_factory=list)
    csi_drivers: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pvcs: list[dict[str, Any]] = field(default_factory=list)
    daemon_sets: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    service_accounts: list[dict[str, Any]] = field(default_factory=list)


class ClusterView(Protocol):
    ctx: Context
    mode: Literal["offline", "live"]
    source: str  # for the report's heading: "offline plan", "kubeconfig ..."
    place: str  # what findings call the cluster: "aws 1.33", "the cluster"
    classes_known: bool  # False: the cluster's own StorageClasses are unknown (existing cluster, offline)
    missing_driver: str  # how a finding ends when a provisioner's CSI driver is missing

    def storage_classes(self) -> dict[str, dict[str, Any]]:
        """name -> {provisioner, default, by}: the classes a claim can bind to."""
        ...

    def missing_class(self, known: Sequence[str]) -> str:
        """How a finding ends when a claim names a class not in `known`."""
        ...

    def provisioner_installed(self, provisioner: str) -> str | None:
        """What installs the CSI driver behind `provisioner` (None: nothing)."""
        ...

    def csi_drivers(self) -> set[str]: ...

    def nodes(self) -> list[dict[str, Any]] | None:
        """The nodes as the API serves them; None offline (no node exists before the deploy)."""
        ...

    def daemon_sets(self) -> dict[Key, dict[str, Any]]: ...

    def service_accounts(self) -> dict[Key, dict[str, Any]]: ...

    def claims(self) -> dict[Key, dict[str, Any]] | None:
        """PersistentVolumeClaims with their status; None offline (nothing is bound before the deploy)."""
        ...

    def pods(self) -> list[dict[str, Any]] | None:
        """Running pods; None offline."""
        ...


def driver_of(provisioner: str, cloud: str) -> str:
    """The CSI driver behind a provisioner: in-tree ones the cloud migrated count as their CSI driver."""
    return (F.cloud(cloud).get("csiMigration") or {}).get(provisioner, provisioner)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: dict[str, Any]) -> Key:
    return (str(_meta(obj).get("namespace") or ""), str(_meta(obj).get("name")))


def _is_default(annotations: dict[str, Any]) -> bool:
    return any(str(annotations.get(a)).lower() == "true" for a in DEFAULT_ANNOTATIONS)


class PlanView:
    """The cluster a plan would make: its objects, over the cloud's own (facts) where they are known."""

    mode: Literal["offline", "live"] = "offline"
    missing_driver = "which the plan does not install"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        plan = ctx.platform
        self.source = ctx.plan.source
        self.place = f"{plan.cloud} {plan.kubernetes_version or '(version unknown)'}"
        self._cloud_classes = F.storage_classes(plan.cloud, plan.minor)
        self.classes_known = self._cloud_classes is not None

    def storage_classes(self) -> dict[str, dict[str, Any]]:
        plan = self.ctx.platform
        out = {
            c["name"]: {
                "provisioner": c["provisioner"],
                "default": c["default"],
                "by": f"{plan.cloud} (facts)",
            }
            for c in self._cloud_classes or []
        }
        for sc in plan.objects("StorageClass"):
            out[sc.name] = {
                "provisioner": sc.body.get("provisioner"),
                "default": _is_default(dict(sc.annotations)),
                "by": sc.ref,
            }
        return out

    def missing_class(self, known: Sequence[str]) -> str:
        return f", which neither the plan nor {self.place} creates (known: {', '.join(known) or 'none'})"

    def provisioner_installed(self, provisioner: str) -> str | None:
        return self.ctx.charts.csi_drivers.get(driver_of(provisioner, self.ctx.platform.cloud))

    def csi_drivers(self) -> set[str]:
        return set(self.ctx.charts.csi_drivers)

    def nodes(self) -> list[dict[str, Any]] | None:
        return None

    def daemon_sets(self) -> dict[Key, dict[str, Any]]:
        """The plan's DaemonSets, then those its charts make (modelled: name and namespace only)."""
        out = {_key(dict(o.body)): dict(o.body) for o in self._objects("DaemonSet")}
        for d in self.ctx.charts.daemon_sets:
            ns, _, name = d.name.partition("/")
            out.setdefault((ns, name), {"metadata": {"namespace": ns, "name": name}})
        return out

    def service_accounts(self) -> dict[Key, dict[str, Any]]:
        return {_key(dict(o.body)): dict(o.body) for o in self._objects("ServiceAccount")}

    def claims(self) -> dict[Key, dict[str, Any]] | None:
        return None

    def pods(self) -> list[dict[str, Any]] | None:
        return None

    def _objects(self, kind: str) -> list[Any]:
        plans = {id(self.ctx.platform): self.ctx.platform, id(self.ctx.plan): self.ctx.plan}
        return [o for p in plans.values() for o in p.objects(kind)]


class LiveView:
    """A running cluster, as read once (`ClusterState`, by infra/verify/live.py read_cluster)."""

    mode: Literal["offline", "live"] = "live"
    place = "the cluster"
    classes_known = True
    missing_driver = "which the cluster does not have (no CSIDriver object)"

    def __init__(self, ctx: Context, state: ClusterState, source: str = "cluster") -> None:
        self.ctx, self.state, self.source = ctx, state, source

    def storage_classes(self) -> dict[str, dict[str, Any]]:
        return {
            str(_meta(c)["name"]): {
                "provisioner": c.get("provisioner"),
                "default": _is_default(_meta(c).get("annotations") or {}),
                "by": "in the cluster",
            }
            for c in self.state.storage_classes
        }

    def missing_class(self, known: Sequence[str]) -> str:
        return f"; the cluster has {', '.join(known) or 'none'}"

    def provisioner_installed(self, provisioner: str) -> str | None:
        """An in-tree provisioner the cloud did not migrate to CSI needs no CSIDriver object."""
        migrated = F.cloud(self.ctx.platform.cloud).get("csiMigration") or {}
        if provisioner.startswith("kubernetes.io/") and provisioner not in migrated:
            return "in-tree"
        driver = driver_of(provisioner, self.ctx.platform.cloud)
        return f"CSIDriver {driver}" if driver in self.csi_drivers() else None

    def csi_drivers(self) -> set[str]:
        return {str(_meta(d)["name"]) for d in self.state.csi_drivers}

    def nodes(self) -> list[dict[str, Any]] | None:
        return list(self.state.nodes)

    def daemon_sets(self) -> dict[Key, dict[str, Any]]:
        return {_key(d): d for d in self.state.daemon_sets}

    def service_accounts(self) -> dict[Key, dict[str, Any]]:
        return {_key(s): s for s in self.state.service_accounts}

    def claims(self) -> dict[Key, dict[str, Any]] | None:
        return {_key(p): p for p in self.state.pvcs}

    def pods(self) -> list[dict[str, Any]] | None:
        return list(self.state.pods)
