"""storage: every claim binds, and every team volume mounts on the pools its jobs use.

- Each PersistentVolumeClaim the platform asks for (its own objects and those its charts make from the
  values sent) names a StorageClass that exists (created by the plan, or by the cloud per facts.yaml)
  whose provisioner is installed; a claim with no class needs a default class; a claim with class ""
  needs its pre-bound PersistentVolume.
- Each volume a training pod mounts is a claim of its namespace, bound to a volume whose CSI driver is
  installed, whose node plugin tolerates the pool's taints, and whose file system admits the pool's nodes.
  The node mounts it (the kubelet and the CSI node plugin, through the kernel's NFS or Lustre client), not
  the pod, so what must admit it is node-level: the file system's security groups on AWS
  (checks/aws_network.py), the firewall to the nodes and the export ranges on GCP (checks/gcp_storage.py).
  The team's NetworkPolicies select only its pods: they neither need to open the file servers nor can they
  block the mount.
"""

from __future__ import annotations

from typing import Any

from infra.verify import facts as F
from infra.verify.charts import Claim, tolerates
from infra.verify.checks import gcp_storage
from infra.verify.context import Context
from infra.verify.report import CheckResult
from infra.verify.view import ClusterView, PlanView, driver_of


def _check_controller_identity(ctx: Context, res: CheckResult, driver: str) -> None:
    """An EKS CSI add-on needs an IAM identity for its controller (IRSA role or pod identity)."""
    if ctx.platform.cloud != "aws":
        return
    how = (F.cloud("aws")["csiDrivers"] or {}).get(driver) or {}
    addon_name, sa = how.get("addon"), how.get("controllerServiceAccount")
    addon = ctx.platform.eks_addons().get(addon_name or "")
    if addon is None or not sa:
        return
    ns, name = sa.split("/")
    pia = [
        r
        for r in ctx.platform.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.inputs.get("namespace") == ns and r.inputs.get("serviceAccount") == name
    ]
    if not addon.inputs.get("serviceAccountRoleArn") and not pia:
        res.fail(
            f"EKS add-on {addon_name} ({driver}) has no IAM role for {sa} (serviceAccountRoleArn or a "
            "pod identity association): its controller cannot create volumes",
            f"EKS add-on {addon_name}",
        )


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


def storage_endpoint(ctx: Context, pv_spec: dict[str, Any]) -> tuple[str, str | None]:
    """(address, driver) a volume's clients connect to. A DNS name stands as an address in the VPC."""
    import ipaddress

    csi = pv_spec.get("csi") or {}
    attrs = csi.get("volumeAttributes") or {}
    host = attrs.get("ip") or attrs.get("dnsname") or (pv_spec.get("nfs") or {}).get("server") or ""
    driver = csi.get("driver") or ("nfs" if pv_spec.get("nfs") else None)
    try:
        return str(ipaddress.ip_address(host)), driver
    except ValueError:
        return representative_private_address(ctx), driver


def representative_private_address(ctx: Context) -> str:
    """An address a private DNS name of the platform's network resolves to (unknown offline)."""
    import ipaddress

    for r in ctx.platform.of_type("aws:ec2/vpc:Vpc"):
        if r.inputs.get("cidrBlock"):
            return str(ipaddress.ip_network(r.inputs["cidrBlock"]).network_address + 10)
    # TEST-NET-1 (RFC 5737) stands for "whatever the name resolves to" when no network is known.
    return "192.0.2.10"


def node_reachability(ctx: Context, res: CheckResult, pod: Any, pv: Any, ports: list[int]) -> None:
    """The kubelet mounts a file system from the node: the file system's security groups must admit the
    pool's nodes on its ports (FSx: TCP 988, 1018-1023; EFS: 2049)."""
    from infra.verify.checks.aws_network import admitted, node_groups_sgs, storage_groups

    plan = ctx.platform
    fs_groups = storage_groups(plan, pv.resource)
    if not fs_groups:
        return
    groups = next(
        (
            node_groups_sgs(plan, ng)
            for ng in plan.of_type("aws:eks/nodeGroup:NodeGroup")
            if (ng.inputs.get("labels") or {}).get("trainplane.dev/pool") == pod.pool
        ),
        set(),
    )
    if not groups:
        return
    closed = []
    for port in ports:
        reach = set()
        cidr = False
        for g in fs_groups:
            got, by_cidr = admitted(plan, g, port)
            reach |= got
            cidr = cidr or by_cidr
        if not cidr and not reach & groups:
            closed.append(port)
    if closed:
        res.fail(
            f"{pod.ref} mounts {pv.ref}, but the file system's security groups admit no security group of "
            f"pool {pod.pool}'s nodes on TCP {', '.join(map(str, closed))}: the mount times out",
            pod.ref,
            pv.ref,
        )


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
    _, driver = storage_endpoint(ctx, dict(pv.spec))
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
    if ctx.platform.cloud == "aws":
        ports = (F.facts()["storagePorts"].get(driver or "") or {}).get("ports") or []
        node_reachability(ctx, res, pod, pv, ports)
    elif ctx.platform.cloud == "gcp":
        gcp_storage.node_reachability(ctx, res, pod, pv, driver)
    res.examined.append(f"{pod.namespace}/{claim_name} on {pod.pool}")


def check_pod_volumes(ctx: Context, res: CheckResult) -> None:
    for pod in ctx.pods:
        pool = ctx.pool(pod.pool) or {}
        taints = ctx.pool_taints(pool)
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
            _check_controller_identity(ctx, res, driver)
    check_pod_volumes(ctx, res)
    return res
