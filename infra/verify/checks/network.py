"""network: the flows a training pod needs are allowed, cross-team flows are denied, and the cluster
enforces NetworkPolicy at all.

The flow table, per training pod (team x GPU pool): DNS over UDP and TCP to kube-dns; rendezvous and
NCCL between the pods of the job; the cloud's identity endpoint (when the team has a cloud identity);
object storage on 443 (when the platform has buckets); Prometheus in the monitoring namespace scraping the
metrics port. Every other team's pods must neither reach the job nor be reached by it. Policies are
evaluated with infra.verify.netpol.

The team's file systems are not a pod flow: the node mounts them (kubelet and CSI node plugin, the kernel's
NFS or Lustre client), so no pod NetworkPolicy is needed for them or can block them; `storage` checks the
node-level rules instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.verify import facts as F
from infra.verify.context import Context
from infra.verify.jobs import TrainingPod
from infra.verify.netpol import Peer, allowed
from infra.verify.report import CheckResult

# Stand-ins for addresses that are "somewhere on the internet" (TEST-NET-2, RFC 5737): a policy that
# admits a public endpoint admits this address only if it admits the public internet on that port.
PUBLIC_ADDRESS = "198.51.100.7"
# NCCL's socket transport and bootstrap listen on ephemeral ports between the job's pods.
NCCL_SAMPLE_PORT = 43123
PROMETHEUS = {"app.kubernetes.io/name": "prometheus", "prometheus": "kube-prometheus-stack-prometheus"}
MONITORING_NAMESPACE = "monitoring"


@dataclass(frozen=True)
class Flow:
    why: str
    src: Peer
    dst: Peer
    port: int
    proto: str
    want: bool

    def line(self) -> str:
        verb = "must be allowed" if self.want else "must be denied"
        return f"{self.why}: {self.src.describe()} -> {self.dst.describe()}:{self.port}/{self.proto} {verb}"


def enforcement(ctx: Context, res: CheckResult) -> None:
    """Whether the cluster enforces NetworkPolicy at all: the cloud's verifier reads it from the plan."""
    ctx.verifier.verify_network_enforcement(ctx, res)


def _ports(pod: TrainingPod) -> list[int]:
    ports = []
    for c in pod.pod_spec.get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("containerPort"):
                ports.append(int(p["containerPort"]))
    return ports


def _metrics_port(pod: TrainingPod) -> int | None:
    monitors = pod.plan.objects("PodMonitor")
    names = {e.get("port") for m in monitors for e in m.spec.get("podMetricsEndpoints") or []}
    for c in pod.pod_spec.get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") in names:
                return int(p["containerPort"])
    return None


def flows(ctx: Context, pod: TrainingPod) -> list[Flow]:
    plan = ctx.platform
    me = Peer(pod.namespace, pod.labels)
    peer = Peer(pod.namespace, {**pod.labels})  # another pod of the same job
    dns_facts = F.facts()["dns"]
    dns = Peer(dns_facts["namespace"], dns_facts["podLabels"])
    out: list[Flow] = [Flow("DNS", me, dns, p["port"], p["protocol"], True) for p in dns_facts["ports"]]
    for port in _ports(pod):
        out.append(Flow(f"job pods to each other (port {port})", me, peer, port, "TCP", True))
    out.append(Flow("NCCL between the job's pods (ephemeral port)", me, peer, NCCL_SAMPLE_PORT, "TCP", True))
    cloud = F.cloud(plan.cloud)
    team = ctx.team(pod.team)
    if team is not None and team.identity:
        for ep in cloud.get("identityEndpoints") or []:
            addr = PUBLIC_ADDRESS if ep["address"] == "public" else ep["address"]
            out.append(
                Flow(
                    f"cloud identity ({ep['name']})",
                    me,
                    Peer(None, ip=addr),
                    ep["port"],
                    ep["protocol"],
                    True,
                )
            )
    store = cloud.get("objectStore")
    if plan.platform_outputs is not None and plan.platform_outputs.object_store and store:
        out.append(
            Flow(
                f"object storage ({store['name']})",
                me,
                Peer(None, ip=PUBLIC_ADDRESS),
                store["port"],
                "TCP",
                True,
            )
        )
    metrics = _metrics_port(pod)
    if metrics:
        prom = Peer(MONITORING_NAMESPACE, PROMETHEUS)
        out.append(Flow("Prometheus scrape", prom, me, metrics, "TCP", True))
    for other in plan.teams:
        ns = other.namespace
        if not ns or ns == pod.namespace:
            continue
        them = Peer(ns, {**pod.labels, "trainplane.dev/team": other.name})
        for port in [*_ports(pod)[:1], NCCL_SAMPLE_PORT]:
            out.append(Flow(f"team {other.name} into team {pod.team}", them, me, port, "TCP", False))
            out.append(Flow(f"team {pod.team} into team {other.name}", me, them, port, "TCP", False))
    return out


def run(ctx: Context) -> CheckResult:
    res = CheckResult("network")
    enforcement(ctx, res)
    policies = ctx.network_policies
    for pod in ctx.pods:
        for flow in flows(ctx, pod):
            if allowed(policies, flow.src, flow.dst, flow.port, flow.proto) != flow.want:
                res.fail(f"{pod.ref}: {flow.line()}", pod.ref, f"NetworkPolicies of {pod.namespace}")
            res.examined.append(flow.line())
    if not ctx.pods:
        res.note("no training pod to evaluate (no team with GPU quota on a GPU pool)")
    return res
