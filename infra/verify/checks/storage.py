"""storage: every claim binds, and every team volume mounts on the pools its jobs use.

- Each PersistentVolumeClaim the platform asks for (its own objects and those its charts make from the
  values sent) names a StorageClass that exists (created by the plan, or by the cloud per facts.yaml)
  whose provisioner is installed; a claim with no class needs a default class; a claim with class ""
  needs its pre-bound PersistentVolume.
- Each volume a training pod mounts is a claim of its namespace, bound to a volume whose CSI driver is
  installed, whose node plugin tolerates the pool's taints, and whose file system admits the pool's nodes.
  The node mounts it (the kubelet and the CSI node plugin, through the kernel's NFS or Lustre client), not
  the pod, so what must admit it is node-level, and the cloud's verifier checks it
  (`CloudVerifier.verify_storage_path`: security groups, firewall rules, export ranges).
  The team's NetworkPolicies select only its pods: they neither need to open the file servers nor can they
  block the mount.
"""

from __future__ import annotations

from typing import Any

from infra.verify.charts import Claim, tolerates
from infra.verify.context import Context
from infra.verify.report import CheckResult
from infra.verify.view import ClusterView, PlanView, driver_of


def _check_static_claim(ctx: Context, res: CheckResult, claim: Claim, where: str) -> None:
    """A claim bound to a PersistentVolume by name (storageClassName ""): that PV exists, is reserved for
    it, offers its access modes, and its CSI driver is installed."""
    if not claim.volume_name:
        res.fail(f'{where} has storageClassName "" and no volumeName: nothing can bind it', claim.owner)
        return
    pv = ctx.object("PersistentVolume", None, claim.volume_name)
    if pv is None:
        res.fail(
            f"{where} is pre-bound to PersistentVolume {claim.volume_name}, which the plan does not create",
            claim.owner,
        )
        return
    ref = pv.spec.get("claimRef") or {}
    if ref and (ref.get("namespace"), ref.get("name")) != (claim.namespace, claim.name):
        res.fail(
            f"{where}: {pv.ref} is reserved for {ref.get('namespace')}/{ref.get('name')}",
            claim.owner,
            pv.ref,
        )
    if pv.spec.get("storageClassName") not in (None, ""):
        res.fail(
            f'{where}: {pv.ref} has storageClassName {pv.spec["storageClassName"]!r}, the claim ""',
            pv.ref,
        )
    modes = set(pv.spec.get("accessModes") or [])
    if not set(claim.access_modes) <= modes:
        res.fail(f"{where} asks {sorted(claim.access_modes)}, {pv.ref} offers {sorted(modes)}", pv.ref)
    driver = (pv.spec.get("csi") or {}).get("driver")
    if driver and driver not in ctx.charts.csi_drivers:
        res.fail(f"{where}: {pv.ref} needs CSI driver {driver}, which nothing in the plan installs", pv.ref)


def check_claim(ctx: Context, res: CheckResult, claim: Claim, view: ClusterView) -> None:
    """One claim against the classes and CSI drivers of a cluster view: offline (a plan) or live."""
    where = f"PVC {claim.namespace}/{claim.name} ({claim.owner})"
    classes, cloud_known = view.storage_classes(), view.classes_known
    if claim.storage_class == "":
        _check_static_claim(ctx, res, claim, where)
        return
    unknown_default = claim.storage_class is None and not any(c["default"] for c in classes.values())
    unknown_named = claim.storage_class is not None and claim.storage_class not in classes
    if not cloud_known and (unknown_default or unknown_named):
        res.note(
            f"{where}: {'the default class' if claim.storage_class is None else repr(claim.storage_class)} "
            "of an existing cluster is unknown offline; run verify with --kubeconfig"
        )
        return
    if claim.storage_class is None:
        defaults = [n for n, c in classes.items() if c["default"]]
        if not defaults:
            res.fail(
                f"{where} names no StorageClass and {view.place} has no default StorageClass: it stays Pending",
                claim.owner,
            )
            return
        name = defaults[-1]
    else:
        name = claim.storage_class
        if name not in classes:
            res.fail(
                f"{where} asks for StorageClass {name!r}{view.missing_class(sorted(classes))}", claim.owner
            )
            return
    sc = classes[name]
    installed = view.provisioner_installed(str(sc["provisioner"]))
    if installed is None and not cloud_known:
        res.note(
            f"{where}: whether provisioner {sc['provisioner']} runs on this existing cluster is checked live"
        )
    elif installed is None:
        driver = driver_of(str(sc["provisioner"]), ctx.platform.cloud)
        res.fail(
            f"{where} binds to StorageClass {name} ({sc['by']}) whose provisioner {sc['provisioner']} "
            f"needs CSI driver {driver}, {view.missing_driver}",
            claim.owner,
        )


def _driver_of_volume(pv_spec: dict[str, Any]) -> str | None:
    """The CSI driver a volume's node mounts it with ("nfs" for an in-tree NFS volume)."""
    csi = pv_spec.get("csi") or {}
    return csi.get("driver") or ("nfs" if pv_spec.get("nfs") else None)


def _check_pod_volume(ctx: Context, res: CheckResult, pod: Any, taints: list, vol: dict) -> None:
    """One claim a training pod mounts: it exists, fits the pod's spread, its node plugin runs on the
    pool and the file system admits the pool's nodes."""
    pvc_ref = vol.get("persistentVolumeClaim")
    if not pvc_ref:
        return
    claim_name = pvc_ref.get("claimName")
    pvc = ctx.object("PersistentVolumeClaim", pod.namespace, claim_name)
    if pvc is None:
        res.fail(
            f"{pod.ref} mounts claim {pod.namespace}/{claim_name}, which the platform does not create",
            pod.ref,
        )
        return
    pv = ctx.object("PersistentVolume", None, pvc.spec.get("volumeName") or "")
    if pv is None:
        return  # dynamic claims are checked above
    modes = set(pvc.spec.get("accessModes") or [])
    if pod.pods > 1 and not modes & {"ReadWriteMany", "ReadOnlyMany"}:
        res.fail(
            f"{pod.ref}: {pod.pods} pods on different nodes share {pvc.ref}, which is {sorted(modes)}",
            pod.ref,
            pvc.ref,
        )
    driver = _driver_of_volume(dict(pv.spec))
    if driver and driver != "nfs":
        plugins = [d for d in ctx.charts.daemon_sets if d.csi_driver == driver]
        if not plugins:
            res.fail(
                f"{pod.ref} mounts {pv.ref}: no node plugin of CSI driver {driver} is installed",
                pod.ref,
                pv.ref,
            )
        for d in plugins:
            for t in taints:
                if not tolerates(d.tolerations, t):
                    res.fail(
                        f"{pod.ref} mounts {pv.ref}, but {d.name} ({d.role}, {d.owner}) does not tolerate "
                        f"taint {t['key']}={t.get('value', '')}:{t['effect']} of pool {pod.pool}",
                        pod.ref,
                        d.name,
                    )
    ctx.verifier.verify_storage_path(ctx, res, pod, pv, driver)
    res.examined.append(f"{pod.namespace}/{claim_name} on {pod.pool}")


def check_pod_volumes(ctx: Context, res: CheckResult) -> None:
    for pod in ctx.pods:
        taints = ctx.pool_taints(ctx.pool(pod.pool))
        for vol in pod.pod_spec.get("volumes") or []:
            if vol.get("persistentVolumeClaim"):
                _check_pod_volume(ctx, res, pod, taints, vol)


def run(ctx: Context) -> CheckResult:
    res = CheckResult("storage")
    view = PlanView(ctx)
    claims = ctx.charts.claims
    if ctx.job_only:
        mounted = {
            (p.namespace, (v.get("persistentVolumeClaim") or {}).get("claimName"))
            for p in ctx.pods
            for v in p.pod_spec.get("volumes") or []
        }
        claims = [c for c in claims if (c.namespace, c.name) in mounted]
    else:
        for u in ctx.charts.unknown:
            res.fail(u)
    for claim in claims:
        check_claim(ctx, res, claim, view)
        res.examined.append(f"{claim.namespace}/{claim.name}")
    if not ctx.job_only:
        for driver in sorted(set(ctx.charts.csi_drivers)):
            ctx.verifier.verify_csi_controller_identity(ctx, res, driver)
    check_pod_volumes(ctx, res)
    return res
