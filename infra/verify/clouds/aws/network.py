"""verify on AWS: whether the cluster enforces NetworkPolicy and its API can be reached
(AwsVerifier.verify_network_enforcement), and security-group reachability, read from the plan through
resource dependencies (also for the node-level storage path, storage.py, and the creation order's
`tcpPorts` selector, AwsVerifier.verify_rule_admits_tcp).

Security group ids are outputs (unknown offline, and named differently by every mock), so a rule, a
launch template or a file system is tied to its groups by the dependencies the engine records: a rule
depends on the group it belongs to and the group it references; a launch template on the groups its nodes
join; a file system on its groups; a PersistentVolume on the file system whose id is its volume handle.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from infra.verify import facts as F
from infra.verify.clouds.aws.nodes import eks_addons
from infra.verify.context import Context
from infra.verify.model import Plan, PlanResource
from infra.verify.report import CheckResult

SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = (
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:ec2/securityGroupRule:SecurityGroupRule",
)
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
FILE_SYSTEMS = ("aws:fsx/lustreFileSystem:LustreFileSystem", "aws:efs/fileSystem:FileSystem")
EFS_MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"


def _deps_of_type(plan: Plan, r: PlanResource, types: Iterable[str]) -> set[str]:
    by_urn = plan.by_urn()
    wanted = set(types)
    return {d for d in r.deps if d in by_urn and by_urn[d].type in wanted}


def covers(rule: PlanResource, port: int) -> bool:
    """Whether an ingress security-group rule admits TCP `port` (any protocol, or TCP over a range)."""
    i = rule.inputs
    if i.get("type") not in (None, "ingress"):
        return False
    proto = str(i.get("ipProtocol") or i.get("protocol") or "")
    if proto in ("-1", "all"):
        return True
    lo, hi = i.get("fromPort"), i.get("toPort")
    return proto.lower() in ("tcp", "6") and lo is not None and hi is not None and int(lo) <= port <= int(hi)


def admitted(plan: Plan, group: str, port: int) -> tuple[set[str], bool]:
    """Groups (URNs) that `group` admits on TCP `port`, and whether some CIDR rule admits it too."""
    groups: set[str] = set()
    cidr = False
    for rule in (r for r in plan.resources if r.type in INGRESS):
        sgs = _deps_of_type(plan, rule, [SG, "aws:eks/cluster:Cluster"])
        if group not in sgs or not covers(rule, port):
            continue
        if rule.inputs.get("cidrIpv4") or rule.inputs.get("cidrBlocks"):
            cidr = True
        others = sgs - {group}
        groups |= others or {group}  # a rule with only its own group references itself
    return groups, cidr


def storage_groups(plan: Plan, pv: PlanResource) -> set[str]:
    """Security groups of the file system behind a PersistentVolume (FSx: the file system's; EFS: its
    mount targets')."""
    by_urn = plan.by_urn()
    out: set[str] = set()
    for fs_urn in _deps_of_type(plan, pv, FILE_SYSTEMS):
        fs = by_urn[fs_urn]
        out |= _deps_of_type(plan, fs, [SG])
        for mt in plan.of_type(EFS_MOUNT_TARGET):
            if fs_urn in mt.deps:
                out |= _deps_of_type(plan, mt, [SG])
    return out


def node_groups_sgs(plan: Plan, node_group: PlanResource) -> set[str]:
    """Security groups the nodes of an EKS node group join (its launch template's, plus the cluster's)."""
    by_urn = plan.by_urn()
    out: set[str] = set()
    for lt in _deps_of_type(plan, node_group, [LAUNCH_TEMPLATE]):
        out |= _deps_of_type(plan, by_urn[lt], [SG, "aws:eks/cluster:Cluster"])
    return out


def control_plane(ctx: Context, res: CheckResult) -> None:
    """A private-only EKS endpoint answers only what its cluster security group admits on 443 (the
    group admits its own members by default): someone outside the nodes must be let in, or nothing
    (pulumi, kubectl, verify --kubeconfig) reaches the API. (EKS user guide, 'Cluster API server
    endpoint': private access is governed by the cluster security group.)"""
    cluster = ctx.platform.cluster_resource()
    vpc = (cluster.inputs.get("vpcConfig") or {}) if cluster else {}
    if cluster is None or vpc.get("endpointPublicAccess", True) is not False:
        return
    groups, cidr = admitted(ctx.platform, cluster.urn, 443)
    if not cidr and not (groups - {cluster.urn}):
        res.fail(
            f"EKS cluster {cluster.inputs.get('name', cluster.name)} has a private-only API endpoint and no rule "
            "admits TCP 443 to its cluster security group from outside it: pulumi, kubectl and verify "
            "--kubeconfig cannot reach the API",
            cluster.name,
        )


def enforcement(ctx: Context, res: CheckResult) -> None:
    """The API is reachable, and the VPC CNI add-on's network policy agent is turned on (facts
    `networkPolicy`)."""
    plan = ctx.platform
    facts: Any = F.cloud(plan.cloud).get("networkPolicy")
    control_plane(ctx, res)
    addon = eks_addons(plan).get(facts["addon"])
    config: Any = {}
    if addon is not None and addon.inputs.get("configurationValues"):
        try:
            config = json.loads(addon.inputs["configurationValues"])
        except (TypeError, json.JSONDecodeError):
            config = {}
    value = str(config.get(facts["configurationKey"], "")).lower() if isinstance(config, dict) else ""
    if addon is None or value != facts["value"]:
        res.fail(
            f'EKS add-on {facts["addon"]} has no configuration {facts["configurationKey"]}: "true": '
            "the VPC CNI accepts every NetworkPolicy and enforces none",
            f"EKS add-on {facts['addon']}",
        )
