"""Per-team tenancy: namespace, quota, limits, the job service account, RBAC and NetworkPolicies.

A team's jobs run in the namespace named after the team under service account `trainer`, which carries
the cloud identity annotation (IRSA role ARN / Workload Identity service account) when the cloud layer
made one. The Role grants only what running jobs need: read their own pods, logs, services and config;
no secrets and no exec. NetworkPolicies deny by default and open exactly: the team's own pods, DNS,
Prometheus scraping from the monitoring namespace, the cloud's identity endpoint (from the profile) and
object storage.

No policy opens the shared file systems: a volume is mounted by the node, never from the pod's network
namespace (the kubelet and the CSI node plugin in kube-system run the kernel's NFS or Lustre client; the
EFS, Filestore and GKE Lustre node plugins run on the host network: aws-efs-csi-driver
helm-chart-aws-efs-csi-driver-4.4.1 templates/node-daemonset.yaml, gcp-filestore-csi-driver@v1.13.1
deploy/kubernetes/base/node_linux/node.yaml, lustre-csi-driver@v0.6.11 deploy/base/node/node.yaml; FSx's
node plugin left the host network in chart 1.6.1 (aws-fsx-csi-driver commit 99266047) but its Lustre
client is the kernel's LNet, configured once per host ("LNet config is cached on the host",
lustre-csi-driver@v0.6.11 node.yaml), which talks from the node's interfaces). A team's policies select only the team's pods, so they neither carry nor can
block that traffic; the file system's security group or firewall admits the nodes instead (verify's
`storage` check), and pods get no direct line to file servers they are not meant to reach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import (
    COST_CENTER_LABEL,
    MONITORING_NAMESPACE,
    TEAM_SERVICE_ACCOUNT,
    ClusterBundle,
    NodePoolInfo,
    owner_labels,
    team_namespace,
)
from components.incluster.names import TRAINER_METRICS_PORT
from components.spec import TeamSpec

# Used where the GPU machines are unknown (existing clusters): a typical 8-GPU server has ~96-128 vCPUs
# and 1-2 TiB of memory.
DEFAULT_CPU_PER_GPU = 12
DEFAULT_MEMORY_GIB_PER_GPU = 120
# What a container gets when it asks for nothing (the quota requires requests on every pod).
DEFAULT_REQUEST = {"cpu": "500m", "memory": "1Gi"}
DEFAULT_LIMIT = {"memory": "2Gi"}
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
TEAM_LABEL = "trainplane.dev/team"
PSA_LABEL = "pod-security.kubernetes.io/{mode}"
# Capabilities Pod Security `baseline` lets a container add (Pod Security Standards, "Capabilities";
# kubernetes/pod-security-admission@v0.33.13:policy/check_capabilities_baseline.go capabilities_allowed_1_0).
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
        "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip

# Only what a running training job needs from the API (peer discovery, its own logs and config).
TRAINER_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": [""],
        "resources": ["pods", "services", "endpoints", "configmaps"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]


def fabric_beyond_baseline(pools: Sequence[NodePoolInfo]) -> list[str]:
    """What the pools' fabric pod wiring needs that Pod Security `baseline` refuses, one item per need.

    Baseline forbids every hostPath volume and any added capability outside BASELINE_CAPABILITIES, in
    init containers (native sidecars) too (Pod Security Standards: "HostPath Volumes", "Capabilities").
    GKE's GPUDirect pods mount the driver/NCCL plugin dir, /sys, /proc/sys and /dev/aperture_devices from
    the host and run RxDM with NET_ADMIN (components/gcp/fabric_table.py); EFA pods need neither.
    """
    needs: list[str] = []
    for pool in pools:
        fabric = pool.fabric
        if fabric is None:
            continue
        for v in fabric.volumes:
            if "hostPath" in v:
                needs.append(f"pool {pool.name}: hostPath {v['hostPath'].get('path')}")
        for c in fabric.sidecars:
            added = ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
            for cap in added:
                if cap not in BASELINE_CAPABILITIES:
                    needs.append(f"pool {pool.name}: {cap} on {c.get('name')}")
    return needs


def pod_security_labels(pools: Sequence[NodePoolInfo]) -> dict[str, str]:
    """A team namespace's Pod Security Admission labels.

    `baseline` (no host access; /dev/shm emptyDir is fine) unless a pool the team may run on has a fabric
    whose pods need more: teams are not tied to pools, so then every team namespace must admit them.
    Pod Security has no level between baseline and privileged and no per-path exception (Pod Security
    Standards, "Privileged": "purposely-open"; profiles are fixed), so those namespaces enforce
    `privileged` and keep `warn` and `audit` at baseline: every pod that uses more than baseline is still
    reported to the user who creates it and in the audit log. Why not a ValidatingAdmissionPolicy that
    allows only the fabric's paths and NET_ADMIN: its CEL cannot be compiled or tested here (no CEL
    library in the toolchain), and a wrong expression with failurePolicy Fail would refuse every pod.
    """
    if not fabric_beyond_baseline(pools):
        return {PSA_LABEL.format(mode="enforce"): "baseline"}
    return {
        PSA_LABEL.format(mode="enforce"): "privileged",
        PSA_LABEL.format(mode="warn"): "baseline",
        PSA_LABEL.format(mode="audit"): "baseline",
    }


def per_gpu_resources(pools: Sequence[NodePoolInfo]) -> tuple[int, int]:
    """vCPUs and GiB of memory per GPU on the platform's GPU machines (the largest share wins).

    A job pod asks for its GPUs' share of its own pool's machine (training_job.pod_resources), so the quota
    must admit the team's whole GPU quota on its richest pool: sizing by the smallest share left a team
    unable to run even one full L40S node on a platform that also has A10G pools (found by verify).
    The machine facts come with the pools (the cloud layer knows its machines; this layer does not).
    """
    shares = []
    for pool in pools:
        if pool.gpu and pool.gpus_per_node and pool.node_vcpus and pool.node_memory_gib:
            shares.append(
                (pool.node_vcpus // pool.gpus_per_node, int(pool.node_memory_gib // pool.gpus_per_node))
            )
    if not shares:
        return DEFAULT_CPU_PER_GPU, DEFAULT_MEMORY_GIB_PER_GPU
    return max(s[0] for s in shares), max(s[1] for s in shares)


def team_quota(pools: Sequence[NodePoolInfo], team: TeamSpec) -> dict[str, str]:
    cpu_per_gpu, mem_per_gpu = per_gpu_resources(pools)
    # A team with no GPUs still gets room for CPU work (data prep, evaluation).
    cpu = team.cpu_quota or max(cpu_per_gpu * team.gpu_quota, 8)
    memory = team.memory_quota_gib or max(mem_per_gpu * team.gpu_quota, 32)
    return {
        "requests.nvidia.com/gpu": str(team.gpu_quota),
        "requests.cpu": str(cpu),
        "requests.memory": f"{memory}Gi",
        "limits.memory": f"{memory}Gi",
    }


def limit_range(pools: Sequence[NodePoolInfo]) -> dict[str, Any]:
    largest_node = max((p.gpus_per_node for p in pools if p.gpu), default=0)
    item: dict[str, Any] = {"type": "Container", "defaultRequest": DEFAULT_REQUEST, "default": DEFAULT_LIMIT}
    if largest_node:
        # No container can use more GPUs than one node has; fail at admission, not Pending forever.
        item["max"] = {"nvidia.com/gpu": str(largest_node)}
    return {"limits": [item]}


def network_policies(
    bundle: ClusterBundle, team: TeamSpec
) -> dict[str, dict[str, Any] | pulumi.Output[dict[str, Any]]]:
    """NetworkPolicy specs by name for one team namespace."""
    everyone: dict[str, Any] = {}
    policies: dict[str, Any] = {
        "default-deny": {"podSelector": everyone, "policyTypes": ["Ingress", "Egress"]},
        "allow-same-namespace": {
            "podSelector": everyone,
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": everyone}]}],
            "egress": [{"to": [{"podSelector": everyone}]}],
        },
        "allow-dns": {
            "podSelector": everyone,
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [
                        {
                            "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "kube-system"}},
                            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                        }
                    ],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                }
            ],
        },
        "allow-metrics-scrape": {
            "podSelector": everyone,
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: MONITORING_NAMESPACE}}}],
                    "ports": [{"protocol": "TCP", "port": TRAINER_METRICS_PORT}],
                }
            ],
        },
    }
    if bundle.profile.identity_endpoints:
        # The node-local endpoint pods get cloud credentials from (a metadata server), exactly that.
        policies["allow-cloud-identity"] = {
            "podSelector": everyone,
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"ipBlock": {"cidr": ep.cidr}}],
                    "ports": [{"protocol": ep.protocol, "port": ep.port}],
                }
                for ep in bundle.profile.identity_endpoints
            ],
        }
    if bundle.profile.object_store:
        policies["allow-object-storage"] = {
            "podSelector": everyone,
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]}
            ],
        }
    return policies


@dataclass(frozen=True, kw_only=True)
class TeamTenancyArgs:
    team: TeamSpec
    bundle: ClusterBundle


@dataclass(frozen=True, kw_only=True)
class TeamTenancyResources:
    namespace: k8s.core.v1.Namespace
    service_account: k8s.core.v1.ServiceAccount
    quota: k8s.core.v1.ResourceQuota
    limits: k8s.core.v1.LimitRange
    role: k8s.rbac.v1.Role
    role_binding: k8s.rbac.v1.RoleBinding
    # The team admins' binding of the built-in `edit` role; None without admins.
    admins: k8s.rbac.v1.RoleBinding | None
    network_policies: Mapping[str, k8s.networking.v1.NetworkPolicy]


class TeamTenancy(pulumi.ComponentResource):
    """One team's namespace and everything that fences it."""

    namespace: k8s.core.v1.Namespace
    resources: TeamTenancyResources

    def __init__(self, name: str, args: TeamTenancyArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:TeamTenancy", name, None, opts)
        bundle, team = args.bundle, args.team
        child = pulumi.ResourceOptions(parent=self)
        ns_name = team_namespace(team)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={
                "name": ns_name,
                # Pod Security: baseline, or what the platform's GPU fabric needs (pod_security_labels).
                "labels": {
                    TEAM_LABEL: team.name,
                    **pod_security_labels(bundle.node_pools),
                    # The team owns its namespace; its cost center, else the platform's, pays for it.
                    **owner_labels(team.name, team.cost_center or bundle.owner_labels.get(COST_CENTER_LABEL)),
                },
            },
            opts=child,
        )
        ns = self.namespace.metadata["name"]

        def meta(obj_name: str, **extra: Any) -> dict[str, Any]:
            return {"name": obj_name, "namespace": ns, "labels": {TEAM_LABEL: team.name}, **extra}

        identity = bundle.team_identities.get(team.name)
        annotations = (
            {bundle.profile.identity_annotation: identity}
            if identity is not None and bundle.profile.identity_annotation
            else {}
        )
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sa", metadata=meta(TEAM_SERVICE_ACCOUNT, annotations=annotations), opts=child
        )
        quota = k8s.core.v1.ResourceQuota(
            f"{name}-quota",
            metadata=meta("team-quota"),
            spec={"hard": team_quota(bundle.node_pools, team)},
            opts=child,
        )
        limits = k8s.core.v1.LimitRange(
            f"{name}-limits", metadata=meta("team-limits"), spec=limit_range(bundle.node_pools), opts=child
        )
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=meta("trainer"), rules=TRAINER_RULES, opts=child)
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-rolebinding",
            metadata=meta("trainer"),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata["name"]},
            subjects=[{"kind": "ServiceAccount", "name": TEAM_SERVICE_ACCOUNT, "namespace": ns}],
            opts=child,
        )
        admins = None
        if team.admins:
            # Team admins manage their own namespace only (the built-in `edit` role, bound namespaced).
            admins = k8s.rbac.v1.RoleBinding(
                f"{name}-admins",
                metadata=meta("team-admins"),
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                subjects=[
                    {"kind": "User", "name": a, "apiGroup": "rbac.authorization.k8s.io"} for a in team.admins
                ],
                opts=child,
            )
        policies = {
            policy_name: k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy_name}", metadata=meta(policy_name), spec=policy, opts=child
            )
            for policy_name, policy in network_policies(bundle, team).items()
        }
        self.resources = TeamTenancyResources(
            namespace=self.namespace,
            service_account=self.service_account,
            quota=quota,
            limits=limits,
            role=role,
            role_binding=binding,
            admins=admins,
            network_policies=policies,
        )
        self.register_outputs({"namespace": ns})
