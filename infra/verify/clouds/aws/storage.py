"""verify `storage` on AWS: the EKS CSI add-ons' controllers have an IAM identity
(AwsVerifier.verify_csi_controller_identity), and a pool's nodes reach the file systems its pods mount
(AwsVerifier.verify_storage_path): the kubelet mounts from the node, so the file system's security groups
must admit the pool's nodes (network.py reads the groups from the plan)."""

from __future__ import annotations

from typing import Any

from infra.verify import facts as F
from infra.verify.clouds.aws.network import admitted, node_groups_sgs, storage_groups
from infra.verify.clouds.aws.nodes import eks_addons
from infra.verify.context import Context
from infra.verify.report import CheckResult

POD_IDENTITY_ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def controller_identity(ctx: Context, res: CheckResult, driver: str) -> None:
    """An EKS CSI add-on needs an IAM identity for its controller (IRSA role or pod identity)."""
    how = (F.cloud(ctx.platform.cloud)["csiDrivers"] or {}).get(driver) or {}
    addon_name, sa = how.get("addon"), how.get("controllerServiceAccount")
    addon = eks_addons(ctx.platform).get(addon_name or "")
    if addon is None or not sa:
        return
    ns, name = sa.split("/")
    pia = [
        r
        for r in ctx.platform.of_type(POD_IDENTITY_ASSOCIATION)
        if r.inputs.get("namespace") == ns and r.inputs.get("serviceAccount") == name
    ]
    if not addon.inputs.get("serviceAccountRoleArn") and not pia:
        res.fail(
            f"EKS add-on {addon_name} ({driver}) has no IAM role for {sa} (serviceAccountRoleArn or a "
            "pod identity association): its controller cannot create volumes",
            f"EKS add-on {addon_name}",
        )


def storage_path(ctx: Context, res: CheckResult, pod: Any, pv: Any, driver: str | None) -> None:
    """The ports of the volume's driver (facts `storagePorts`) are open from the pool's nodes."""
    ports = (F.facts()["storagePorts"].get(driver or "") or {}).get("ports") or []
    node_reachability(ctx, res, pod, pv, ports)


def node_reachability(ctx: Context, res: CheckResult, pod: Any, pv: Any, ports: list[int]) -> None:
    """The kubelet mounts a file system from the node: the file system's security groups must admit the
    pool's nodes on its ports (FSx: TCP 988, 1018-1023; EFS: 2049)."""
    plan = ctx.platform
    fs_groups = storage_groups(plan, pv.resource)
    if not fs_groups:
        return
    groups = next(
        (
            node_groups_sgs(plan, ng)
            for ng in plan.of_type(NODE_GROUP)
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
