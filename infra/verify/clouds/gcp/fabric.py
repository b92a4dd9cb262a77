"""What `trainplane verify`'s fabric check asks the GCP verifier about a pool's GPU fabric, cluster side:
every pod network the fabric's interface annotation names is a `Network` object of type Device whose
`GKENetworkParamSet` names a VPC and subnet the plan creates, with the MTU the cloud's facts give for the
fabric kind (its facts.yaml `fabrics`); the pool's node pool has one extra NIC on each of those VPCs;
the cluster has multi-networking on Dataplane V2; the fabric's DaemonSets (facts
`fabrics.<kind>.daemonSets`) run on the pool's machine type; a fabric whose machines boot only up to a GKE
minor (facts `newestMinor`, TCPX) has a cluster at or below it, held there by a maintenance exclusion of
the facts' scope that lasts (an end time, or until the end of support) on the EXTENDED channel (elsewhere
"until the end of support" is the end of standard support: components/gcp/maintenance.py).

Imported by the verifier's hook method (verifier.py) only when verify asks.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from components.gcp.maintenance import HELD_RELEASE_CHANNEL
from infra.verify.checks.fabric import check_fabric_daemonsets
from infra.verify.clouds.gcp.nodes import GKE_CLUSTER, GKE_POOL

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo, PodFabric
    from infra.verify.context import Context
    from infra.verify.model import Plan
    from infra.verify.report import CheckResult

INTERFACES = "networking.gke.io/interfaces"
GCP_NETWORK = "gcp:compute/network:Network"
GCP_SUBNET = "gcp:compute/subnetwork:Subnetwork"


def _pod_networks(fabric: PodFabric) -> list[str]:
    raw = fabric.annotations.get(INTERFACES)
    nics = json.loads(raw) if raw else []
    return [n["network"] for n in nics if n.get("network") != "default"]


def _by_name(plan: Plan, type_: str) -> dict[str, Mapping[str, Any]]:
    return {str(r.inputs.get("name", r.name)): r.inputs for r in plan.of_type(type_)}


def _check_networks(
    ctx: Context, res: CheckResult, pool: NodePoolInfo, fabric: PodFabric, facts: Mapping[str, Any]
) -> None:
    plan, name = ctx.platform, pool.name
    networks = _pod_networks(fabric)
    if not networks:
        res.fail(f"pool {name}: fabric {fabric.kind} names no pod networks in {INTERFACES}", f"pool {name}")
        return
    vpcs, subnets = _by_name(plan, GCP_NETWORK), _by_name(plan, GCP_SUBNET)
    attached: list[str] = []
    for net in networks:
        obj = ctx.object("Network", None, net)
        params = ctx.object("GKENetworkParamSet", None, net)
        ref = (obj.spec.get("parametersRef") or {}).get("name") if obj else None
        if obj is None or obj.spec.get("type") != "Device" or params is None or ref != params.name:
            res.fail(f"pool {name}: pod network {net} has no Device Network with its GKENetworkParamSet", net)
            continue
        vpc, subnet = str(params.spec.get("vpc")), str(params.spec.get("vpcSubnet"))
        if vpc not in vpcs or subnet not in subnets:
            res.fail(f"pool {name}: {net} names VPC {vpc}/{subnet}, which the plan does not create", net)
            continue
        if vpcs[vpc].get("mtu") not in (facts.get("mtu"), facts.get("rdmaMtu")):
            res.fail(
                f"pool {name}: VPC {vpc} has MTU {vpcs[vpc].get('mtu')}, {fabric.kind} needs {facts['mtu']}",
                vpc,
            )
        attached.append(vpc)
        res.examined.append(net)
    pools = [p for p in plan.of_type(GKE_POOL) if p.inputs.get("name") == name]
    nics = [
        c.get("network")
        for p in pools
        for c in ((p.inputs.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or [])
    ]
    missing = Counter(attached) - Counter(nics)
    if missing:
        res.fail(
            f"pool {name}: nodes get NICs on {sorted(nics)}, the fabric's pod networks need {sorted(attached)}",
            f"pool {name}",
        )
    cluster = next(iter(plan.of_type(GKE_CLUSTER)), None)
    if (
        cluster is None
        or not cluster.inputs.get("enableMultiNetworking")
        or cluster.inputs.get("datapathProvider") != "ADVANCED_DATAPATH"
    ):
        res.fail(
            "the cluster needs multi-networking on Dataplane V2 (ADVANCED_DATAPATH) for its fabric pools"
        )


def _minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) >= 2 and parts[1].isdigit() else None


def _check_upgrade_hold(
    ctx: Context, res: CheckResult, pool: NodePoolInfo, fabric: PodFabric, facts: Mapping[str, Any]
) -> None:
    newest, scope = facts.get("newestMinor"), facts.get("upgradeExclusion")
    cluster = next(iter(ctx.platform.of_type(GKE_CLUSTER)), None)
    if not newest or cluster is None:
        return
    kind, name = fabric.kind, pool.name
    version = str(cluster.inputs.get("minMasterVersion") or "")
    have = _minor(version)
    if have is not None and have > (_minor(str(newest)) or have):
        res.fail(
            f"pool {name}: GKE {version} is newer than {newest}, the last minor whose node image fabric {kind}'s "
            "machines boot: its nodes cannot be created",
            f"pool {name}",
        )
    exclusions = (cluster.inputs.get("maintenancePolicy") or {}).get("maintenanceExclusions") or []
    held = [
        e
        for e in exclusions
        if (e.get("exclusionOptions") or {}).get("scope") == scope
        and (
            e.get("endTime")
            or (e.get("exclusionOptions") or {}).get("endTimeBehavior") == "UNTIL_END_OF_SUPPORT"
        )
    ]
    if not held:
        res.fail(
            f"pool {name}: the cluster has no {scope} maintenance exclusion: its release channel upgrades it past "
            f"{newest} and fabric {kind}'s nodes can no longer be created",
            f"pool {name}",
        )
    channel = (cluster.inputs.get("releaseChannel") or {}).get("channel")
    if held and channel != HELD_RELEASE_CHANNEL:
        # UNTIL_END_OF_SUPPORT ends at the minor's end of standard support except on EXTENDED (maintenance.py).
        res.fail(
            f"pool {name}: the cluster is on release channel {channel}, where its {scope} exclusion ends at the "
            f"minor's end of standard support and GKE then upgrades it past {newest}: fabric {kind}'s nodes can no "
            f"longer be created; use {HELD_RELEASE_CHANNEL}",
            f"pool {name}",
        )


def check_fabric(ctx: Context, res: CheckResult, pool: NodePoolInfo, facts: Mapping[str, Any]) -> None:
    """The cluster side of a pool's GKE fabric: pod networks and NICs, its DaemonSets, the upgrade hold."""
    if pool.fabric is None:
        return
    _check_networks(ctx, res, pool, pool.fabric, facts)
    check_fabric_daemonsets(ctx, res, pool, facts)
    _check_upgrade_hold(ctx, res, pool, pool.fabric, facts)
