"""verify `storage` on GKE (GcpVerifier.verify_storage_path): what must let a pool's nodes mount a team's volume.

A CSI volume is mounted by the node, never from the pod's network namespace (the Filestore and Lustre CSI
node plugins run on the host network: gcp-filestore-csi-driver@v1.13.1 deploy/kubernetes/base/node_linux/
node.yaml and lustre-csi-driver@v0.6.11 deploy/base/node/node.yaml, `hostNetwork: true`), so the rules
that count are the file system's own and the VPC firewall to the nodes, not the team's NetworkPolicies:
- Managed Lustre serves LNet on TCP 988, or 6988 on an instance made with `gke_support_enabled` (GKE
  before 1.33.2-gke.4780000, whose metadata server holds 988 on every node). The port is read from the
  plan's `lustre.Instance`, so a dumped plan and the stack reach the same verdict. The GKE Lustre CSI
  add-on must use the same port (`enable_legacy_lustre_port`), and a firewall rule must admit that port
  from the private services range the instance lives in to the pool's node tag (Managed Lustre docs,
  "Configure a VPC network": the ingress rule on 988, or 6988 with GKE support). Firewall rules are not
  evaluated beyond that: GCP's implied rules allow egress and deny other ingress.
- Filestore exports to the address ranges in `nfs_export_options`: when it lists any, the node subnet
  must be among them (the kubelet mounts from the node's address; the pod range need not be).
On a brought network the firewall is its owner's: a note names what to open.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from infra.verify import facts as F
from infra.verify.context import Context
from infra.verify.model import Plan, PlanResource
from infra.verify.report import CheckResult

LUSTRE_INSTANCE = "gcp:lustre/instance:Instance"
FILESTORE_INSTANCE = "gcp:filestore/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"
NETWORK = "gcp:compute/network:Network"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
GLOBAL_ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
NODE_POOL = "gcp:container/nodePool:NodePool"
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
FILESTORE_DRIVER = "filestore.csi.storage.gke.io"


def _instance(plan: Plan, pv: Any, type_: str, handle_of: Any) -> PlanResource | None:
    """The instance behind a PersistentVolume: the one it depends on, else the one its handle names."""
    by_urn = plan.by_urn()
    for d in pv.resource.deps:
        if d in by_urn and by_urn[d].type == type_:
            return by_urn[d]
    handle = ((pv.spec.get("csi") or {}).get("volumeHandle")) or ""
    return next((r for r in plan.of_type(type_) if handle_of(r) == handle), None)


def lustre_port(instance: PlanResource) -> int:
    """The LNet port a Managed Lustre instance serves (facts: 988, 6988 with GKE support)."""
    fact = F.facts()["storagePorts"][LUSTRE_DRIVER]
    return int(fact["gkeSupportPort"] if instance.inputs.get("gkeSupportEnabled") else fact["ports"][0])


def _pool_tags(plan: Plan, pool: str) -> set[str]:
    for np in plan.of_type(NODE_POOL):
        if np.inputs.get("name") == pool:
            return set((np.inputs.get("nodeConfig") or {}).get("tags") or [])
    return set()


def _ports_cover(allow: dict[str, Any], port: int) -> bool:
    if str(allow.get("protocol", "")).lower() not in ("tcp", "all", "6"):
        return False
    ports = allow.get("ports") or []
    for p in ports:
        lo, _, hi = str(p).partition("-")
        if int(lo) <= port <= int(hi or lo):
            return True
    return not ports  # no ports: every port of the protocol


Net = ipaddress.IPv4Network | ipaddress.IPv6Network


def _networks(ranges: list[str]) -> list[Net]:
    return [ipaddress.ip_network(r, strict=False) for r in ranges]


def admits(plan: Plan, port: int, tags: set[str], sources: list[str]) -> bool:
    """Whether some ingress allow rule admits TCP `port` to nodes with `tags` from a range overlapping
    one of `sources` (any source when none is known)."""
    want = _networks(sources)
    for fw in plan.of_type(FIREWALL):
        i = fw.inputs
        if str(i.get("direction") or "INGRESS") != "INGRESS" or i.get("disabled"):
            continue
        targets = set(i.get("targetTags") or [])
        if targets and not targets & tags:
            continue
        if not any(_ports_cover(a, port) for a in i.get("allows") or []):
            continue
        got = _networks(list(i.get("sourceRanges") or []))
        if not want or any(g.overlaps(w) for g in got for w in want if g.version == w.version):
            return True
    return False


def _private_services_ranges(plan: Plan) -> list[str]:
    return [
        f"{a.inputs['address']}/{a.inputs['prefixLength']}"
        for a in plan.of_type(GLOBAL_ADDRESS)
        if a.inputs.get("purpose") == "VPC_PEERING"
        and a.inputs.get("address")
        and a.inputs.get("prefixLength")
    ]


def check_lustre(ctx: Context, res: CheckResult, pod: Any, pv: Any) -> None:
    plan = ctx.platform
    inst = _instance(
        plan,
        pv,
        LUSTRE_INSTANCE,
        lambda r: f"{r.inputs.get('project')}/{r.inputs.get('location')}/{r.inputs.get('instanceId')}",
    )
    if inst is None:
        return
    port = lustre_port(inst)
    name = f"Managed Lustre {inst.inputs.get('instanceId', inst.name)}"
    cluster = plan.cluster_resource()
    addon = ((cluster.inputs.get("addonsConfig") or {}).get("lustreCsiDriverConfig") or {}) if cluster else {}
    legacy = bool(addon.get("enableLegacyLustrePort"))
    if addon.get("enabled") and legacy != bool(inst.inputs.get("gkeSupportEnabled")):
        res.fail(
            f"{pod.ref} mounts {pv.ref}: {name} serves LNet on TCP {port} (gkeSupportEnabled "
            f"{bool(inst.inputs.get('gkeSupportEnabled'))}), but the GKE Lustre CSI add-on has "
            f"enableLegacyLustrePort {legacy}: the mount fails",
            pod.ref,
            pv.ref,
        )
    if not plan.of_type(NETWORK):
        res.note(
            f"{pod.ref} mounts {pv.ref}: the brought network's owner must admit TCP {port} from {name}'s "
            f"private services range to pool {pod.pool}'s nodes"
        )
        return
    tags, sources = _pool_tags(plan, pod.pool), _private_services_ranges(plan)
    if not admits(plan, port, tags, sources):
        res.fail(
            f"{pod.ref} mounts {pv.ref} ({name} on TCP {port}), but no ingress firewall rule admits TCP {port} "
            f"from {', '.join(sources) or 'its range'} to pool {pod.pool}'s nodes (tags "
            f"{', '.join(sorted(tags)) or 'none'}): the mount times out",
            pod.ref,
            pv.ref,
        )


def check_filestore(ctx: Context, res: CheckResult, pod: Any, pv: Any) -> None:
    plan = ctx.platform

    def handle(r: PlanResource) -> str:
        share = (r.inputs.get("fileShares") or {}).get("name")
        return f"modeInstance/{r.inputs.get('location')}/{r.inputs.get('name')}/{share}"

    inst = _instance(plan, pv, FILESTORE_INSTANCE, handle)
    if inst is None:
        return
    options = (inst.inputs.get("fileShares") or {}).get("nfsExportOptions") or []
    exported = _networks([r for o in options for r in o.get("ipRanges") or []])
    if not exported:
        return  # no export options: the whole VPC may mount
    node_subnet = _node_subnet(plan)
    if node_subnet is None:
        return  # a brought subnet: its range is not in the plan
    if not any(_within(node_subnet, e) for e in exported):
        res.fail(
            f"{pod.ref} mounts {pv.ref}, but Filestore {inst.inputs.get('name', inst.name)} exports only to "
            f"{', '.join(map(str, exported))}, not the node subnet {node_subnet}: the kubelet's mount is refused",
            pod.ref,
            pv.ref,
        )


def _within(inner: Net, outer: Net) -> bool:
    return inner.version == outer.version and (
        int(outer.network_address) <= int(inner.network_address)
        and int(inner.broadcast_address) <= int(outer.broadcast_address)
    )


def _node_subnet(plan: Plan) -> Net | None:
    """The primary range of the subnet the cluster's nodes take their addresses from."""
    cluster = plan.cluster_resource()
    name = str((cluster.inputs.get("subnetwork") if cluster else "") or "").rsplit("/", 1)[-1]
    for s in plan.of_type(SUBNETWORK):
        if name and s.inputs.get("name") == name and s.inputs.get("ipCidrRange"):
            return ipaddress.ip_network(s.inputs["ipCidrRange"])
    return None


def node_reachability(ctx: Context, res: CheckResult, pod: Any, pv: Any, driver: str | None) -> None:
    if driver == LUSTRE_DRIVER:
        check_lustre(ctx, res, pod, pv)
    elif driver == FILESTORE_DRIVER:
        check_filestore(ctx, res, pod, pv)
