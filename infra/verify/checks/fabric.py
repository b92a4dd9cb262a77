"""fabric: does a pool with a GPU fabric get it end to end?

For every GPU pool whose outputs carry a `fabric` (set by the cloud backend):
- cluster side (GKE): every pod network the fabric's interface annotation names is a `Network` object of
  type Device whose `GKENetworkParamSet` names a VPC and subnet the plan creates, with the MTU the cloud's
  facts give for the fabric kind (verify_facts.yaml `fabrics`); the pool's node pool has one extra NIC on
  each of those VPCs; the cluster has multi-networking on Dataplane V2; the fabric's DaemonSets
  (facts `fabrics.<kind>.daemonSets`) run on the pool's machine type; a fabric whose machines boot only
  up to a GKE minor (facts `newestMinor`, TCPX) has a cluster at or below it, held there by a maintenance
  exclusion of the facts' scope that lasts (an end time, or until the end of support);
- pod side: each training pod on the pool carries the fabric's annotations, its native sidecars
  (init containers with restartPolicy Always), volumes, and in the trainer container the mounts and the
  pool's `podEnv`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from infra.verify import facts as F
from infra.verify.context import Context
from infra.verify.jobs import TrainingPod
from infra.verify.model import Plan
from infra.verify.report import CheckResult

INTERFACES = "networking.gke.io/interfaces"
GCP_NETWORK = "gcp:compute/network:Network"
GCP_SUBNET = "gcp:compute/subnetwork:Subnetwork"
GKE_POOL = "gcp:container/nodePool:NodePool"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def _pod_networks(fabric: Mapping[str, Any]) -> list[str]:
    raw = (fabric.get("annotations") or {}).get(INTERFACES)
    nics = json.loads(raw) if raw else []
    return [n["network"] for n in nics if n.get("network") != "default"]


def _by_name(plan: Plan, type_: str) -> dict[str, Mapping[str, Any]]:
    return {str(r.inputs.get("name", r.name)): r.inputs for r in plan.of_type(type_)}


def _check_networks(
    ctx: Context, res: CheckResult, pool: Mapping[str, Any], facts: Mapping[str, Any]
) -> None:
    plan, fabric, name = ctx.platform, pool["fabric"], pool["name"]
    networks = _pod_networks(fabric)
    if not networks:
        res.fail(
            f"pool {name}: fabric {fabric['kind']} names no pod networks in {INTERFACES}", f"pool {name}"
        )
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
                f"pool {name}: VPC {vpc} has MTU {vpcs[vpc].get('mtu')}, {fabric['kind']} needs {facts['mtu']}",
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
    ctx: Context, res: CheckResult, pool: Mapping[str, Any], facts: Mapping[str, Any]
) -> None:
    newest, scope = facts.get("newestMinor"), facts.get("upgradeExclusion")
    cluster = next(iter(ctx.platform.of_type(GKE_CLUSTER)), None)
    if not newest or cluster is None:
        return
    kind, name = pool["fabric"].get("kind"), pool["name"]
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


def _check_daemonsets(
    ctx: Context, res: CheckResult, pool: Mapping[str, Any], facts: Mapping[str, Any]
) -> None:
    machines = set(pool.get("machineTypes") or [])
    for ref in facts.get("daemonSets") or []:
        ns, ds_name = ref.split("/")
        ds = ctx.object("DaemonSet", ns, ds_name)
        spec = ((ds.spec.get("template") or {}).get("spec") or {}) if ds else {}
        terms = (
            ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms") or []
        on = {
            v
            for t in terms
            for e in t.get("matchExpressions") or []
            if e.get("key") == INSTANCE_TYPE
            for v in e.get("values") or []
        }
        if ds is None or not machines <= on:
            res.fail(f"pool {pool['name']}: DaemonSet {ref} does not run on {sorted(machines)}", ref)


def _trainer(pod: TrainingPod) -> Mapping[str, Any]:
    containers = pod.pod_spec.get("containers") or [{}]
    gpu = [c for c in containers if ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")]
    return (gpu or containers)[0]


def _pod_problems(pod: TrainingPod, pool: Mapping[str, Any]) -> list[str]:
    fabric, out = pool["fabric"], []
    annotations = (pod.template.get("metadata") or {}).get("annotations") or {}
    out += [
        f"annotation {k}" for k, v in (fabric.get("annotations") or {}).items() if annotations.get(k) != v
    ]
    inits = {c.get("name"): c for c in pod.pod_spec.get("initContainers") or []}
    for sc in fabric.get("sidecars") or []:
        got = inits.get(sc.get("name"))
        if got is None or got.get("restartPolicy") != "Always" or got.get("image") != sc.get("image"):
            out.append(f"native sidecar {sc.get('name')}")
    volumes = {v.get("name") for v in pod.pod_spec.get("volumes") or []}
    out += [f"volume {v['name']}" for v in fabric.get("volumes") or [] if v.get("name") not in volumes]
    trainer = _trainer(pod)
    mounts = {(m.get("name"), m.get("mountPath")) for m in trainer.get("volumeMounts") or []}
    out += [
        f"mount {m['mountPath']}"
        for m in fabric.get("volumeMounts") or []
        if (m.get("name"), m.get("mountPath")) not in mounts
    ]
    env = {e.get("name"): e.get("value") for e in trainer.get("env") or []}
    out += [f"env {k}" for k, v in (pool.get("podEnv") or {}).items() if env.get(k) != v]
    return out


def run(ctx: Context) -> CheckResult:
    res = CheckResult("fabric")
    pools = [p for p in ctx.gpu_pools() if p.get("fabric")]
    if not pools:
        res.skipped = "no pool with a GPU fabric"
        return res
    known = F.cloud(ctx.platform.cloud).get("fabrics") or {}
    for pool in pools:
        kind = pool["fabric"].get("kind")
        facts = known.get(kind)
        if not ctx.job_only and facts is not None and ctx.platform.cloud == "gcp":
            _check_networks(ctx, res, pool, facts)
            _check_daemonsets(ctx, res, pool, facts)
            _check_upgrade_hold(ctx, res, pool, facts)
        elif facts is None:
            res.note(f"pool {pool['name']}: no cluster-side facts for fabric {kind} on {ctx.platform.cloud}")
        for pod in (p for p in ctx.pods if p.pool == pool["name"]):
            missing = _pod_problems(pod, pool)
            if missing:
                res.fail(
                    f"team {pod.team} pod on pool {pool['name']} lacks its {kind} fabric: {', '.join(missing)}",
                    f"pool {pool['name']}",
                )
            res.examined.append(f"pod {pod.team}/{pool['name']}")
    return res
