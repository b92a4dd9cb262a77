"""Tenancy: quotas, limits, identity-wired service account, least-privilege RBAC and NetworkPolicies,
the latter checked by evaluating them on a table of connections."""

from __future__ import annotations

import functools

import pytest

from components.spec import ConfigError, PlatformSpec
from infra.verify.netpol import Peer, allowed
from tests.helpers.plans import plan_object, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


@functools.cache
def plan(stack: str):
    obj = platform_object(stack)
    obj["teams"].append({"name": "vision", "gpuQuota": 8, "cpuQuota": 64, "memoryQuotaGiB": 512})
    return plan_object(obj, stack)


def objects(result, type_: str, namespace: str | None = None) -> list[dict]:
    return [
        r.inputs
        for r in result.of_type(type_)
        if namespace is None or r.inputs["metadata"].get("namespace") == namespace
    ]


# ---- quota, limits, identity, RBAC ------------------------------------------------------------


def test_quota_derived_from_the_gpu_machines_or_given():
    (aws,) = objects(plan("aws-dev"), "kubernetes:core/v1:ResourceQuota", "research")
    # aws-dev: H100 x8 -> p5.48xlarge, 192 vCPU and 2048 GiB: 24 vCPU and 256 GiB per GPU, 16 GPUs.
    assert aws["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "16",
        "requests.cpu": "384",
        "requests.memory": "4096Gi",
        "limits.memory": "4096Gi",
    }
    (given,) = objects(plan("aws-dev"), "kubernetes:core/v1:ResourceQuota", "vision")
    assert given["spec"]["hard"]["requests.cpu"] == "64"
    assert given["spec"]["hard"]["requests.memory"] == "512Gi"
    assert given["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"


def test_limit_range_defaults_requests_and_caps_gpus_at_one_node():
    (lr,) = objects(plan("onprem-dev"), "kubernetes:core/v1:LimitRange", "research")
    (item,) = lr["spec"]["limits"]
    assert item["type"] == "Container"
    assert item["defaultRequest"] == {"cpu": "500m", "memory": "1Gi"}
    assert item["max"] == {"nvidia.com/gpu": "8"}


@pytest.mark.parametrize(
    ("stack", "annotation", "value"),
    [
        (
            "aws-dev",
            "eks.amazonaws.com/role-arn",
            "arn:aws:iam::123456789012:role/ml-dev-identity-team-research-role",
        ),
        (
            "gcp-dev",
            "iam.gke.io/gcp-service-account",
            "ml-dev-research@example-ml-dev.iam.gserviceaccount.com",
        ),
    ],
)
def test_service_account_carries_the_cloud_identity(stack, annotation, value):
    (sa,) = objects(plan(stack), "kubernetes:core/v1:ServiceAccount", "research")
    assert sa["metadata"]["name"] == "trainer"
    assert sa["metadata"]["annotations"] == {annotation: value}


def test_existing_cluster_service_account_has_no_identity():
    (sa,) = objects(plan("onprem-dev"), "kubernetes:core/v1:ServiceAccount", "research")
    assert sa["metadata"]["name"] == "trainer"
    assert not sa["metadata"].get("annotations")


def test_trainer_role_cannot_read_secrets_or_exec():
    result = plan("aws-dev")
    (role,) = objects(result, "kubernetes:rbac.authorization.k8s.io/v1:Role", "research")
    granted = {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert ("", "pods", "get") in granted and ("", "pods/log", "get") in granted
    assert not any(r in ("secrets", "pods/exec", "pods/attach", "*") for _, r, _ in granted)
    assert not any(v in ("*", "escalate", "bind", "impersonate") for _, _, v in granted)
    (binding,) = objects(result, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "research")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "trainer"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "trainer", "namespace": "research"}]


def test_quota_above_capacity_is_a_config_error():
    obj = platform_object("aws-dev")
    obj["teams"][0]["gpuQuota"] = 40  # 4 nodes x 8 H100 = 32
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert e.value.problems == [
        "platform.teams[0].gpuQuota: 40 GPUs is more than the platform's maximum of 32 "
        "(sum of gpusPerNode x maxNodes over GPU pools)"
    ]


# ---- NetworkPolicy evaluation (the evaluator lives in infra/verify/netpol.py) ---------------------


TRAINER = Peer("research", {"app": "trainer", "trainplane.dev/job": "llm"})
TRAINER2 = Peer("research", {"app": "trainer", "trainplane.dev/job": "llm2"})
VISION = Peer("vision", {"app": "trainer"})
DNS = Peer("kube-system", {"k8s-app": "kube-dns"})
KUBE_PROXY = Peer("kube-system", {"k8s-app": "kube-proxy"})
PROMETHEUS = Peer("monitoring", {"app.kubernetes.io/name": "prometheus"})
DEFAULT_NS = Peer("default", {"app": "x"})
INTERNET = Peer(None, ip="52.216.8.1")
METADATA = Peer(None, ip="169.254.169.254")
METADATA_DAEMON = Peer(None, ip="169.254.169.252")

COMMON_CASES = [
    (TRAINER, TRAINER2, 29500, "TCP", True, "rendezvous within the namespace"),
    (TRAINER, DNS, 53, "UDP", True, "DNS over UDP"),
    (TRAINER, DNS, 53, "TCP", True, "DNS over TCP"),
    (TRAINER, KUBE_PROXY, 53, "UDP", False, "port 53 only to kube-dns"),
    (TRAINER, DNS, 8080, "TCP", False, "only port 53 on kube-dns"),
    (PROMETHEUS, TRAINER, 9090, "TCP", True, "Prometheus scrape on the metrics port"),
    (PROMETHEUS, TRAINER, 29500, "TCP", False, "monitoring reaches only the metrics port"),
    (VISION, TRAINER, 29500, "TCP", False, "other team in"),
    (TRAINER, VISION, 29500, "TCP", False, "other team out"),
    (VISION, TRAINER, 9090, "TCP", False, "other team on the metrics port"),
    (DEFAULT_NS, TRAINER, 9090, "TCP", False, "default namespace in"),
    (INTERNET, TRAINER, 443, "TCP", False, "nothing from outside"),
    (TRAINER, INTERNET, 80, "TCP", False, "no plain HTTP out"),
    (TRAINER, METADATA_DAEMON, 988, "TCP", False, "never the node's metadata daemon directly"),
]
CLOUD_CASES = {
    "aws-dev": [
        # The node mounts FSx (kernel Lustre client); a team's pods get no line to the file servers.
        (TRAINER, Peer(None, ip="10.40.16.10"), 988, "TCP", False, "FSx Lustre is the node's"),
        (TRAINER, Peer(None, ip="10.40.16.10"), 1021, "TCP", False, "FSx Lustre 1018-1023 is the node's"),
        (TRAINER, Peer(None, ip="10.41.0.10"), 988, "TCP", False, "only the VPC of the file system"),
        (TRAINER, Peer(None, ip="10.40.16.10"), 22, "TCP", False, "only Lustre ports"),
        (TRAINER, INTERNET, 443, "TCP", True, "S3 over HTTPS"),
        # IRSA: STS over HTTPS, like S3; the node's instance metadata stays closed.
        (TRAINER, METADATA, 80, "TCP", False, "no instance metadata on EKS"),
    ],
    "gcp-dev": [
        (TRAINER, Peer(None, ip="10.50.8.2"), 2049, "TCP", False, "Filestore NFS is the node's"),
        (TRAINER, Peer(None, ip="10.50.8.9"), 2049, "TCP", False, "only the Filestore address"),
        (TRAINER, INTERNET, 443, "TCP", True, "GCS over HTTPS"),
        # Workload Identity: tokens come from the GKE metadata server (GKE docs, network policy limits).
        (TRAINER, METADATA, 80, "TCP", True, "GKE metadata server for Workload Identity"),
        (TRAINER, METADATA, 8080, "TCP", False, "only port 80 of the metadata server"),
        (TRAINER, Peer(None, ip="169.254.169.253"), 80, "TCP", False, "only the metadata address"),
    ],
    "onprem-dev": [
        # The kubelet mounts the NFS volume from the node; pods do not talk NFS themselves.
        (TRAINER, Peer(None, ip="192.168.10.5"), 2049, "TCP", False, "NFS server is the node's"),
        (TRAINER, Peer(None, ip="192.168.10.5"), 111, "TCP", False, "only the NFS port"),
        (TRAINER, INTERNET, 443, "TCP", False, "no object store on this platform"),
        (TRAINER, METADATA, 80, "TCP", False, "no cloud identity endpoint"),
    ],
}


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_network_policies_allow_exactly_the_table(stack):
    policies = objects(plan(stack), NETPOL)
    assert {p["metadata"]["namespace"] for p in policies} == {"research", "vision"}
    wrong = [
        f"{why}: {src.namespace}->{dst.namespace or dst.ip}:{port}/{proto} should be {ok}"
        for src, dst, port, proto, ok, why in COMMON_CASES + CLOUD_CASES[stack]
        if allowed(policies, src, dst, port, proto) != ok
    ]
    assert not wrong, wrong


def test_evaluator_denies_without_the_allow_rules():
    """The evaluator itself: with only default-deny left, in-namespace traffic and DNS are refused."""
    policies = [p for p in objects(plan("aws-dev"), NETPOL) if p["metadata"]["name"] == "default-deny"]
    assert not allowed(policies, TRAINER, TRAINER2, 29500)
    assert not allowed(policies, TRAINER, DNS, 53, "UDP")
    assert allowed([], TRAINER, VISION, 29500)


def test_quota_admits_the_teams_whole_gpu_quota_on_its_richest_pool():
    # aws-byo-vpc mixes A10G (g5.xlarge: 4 vCPU, 16 GiB per GPU) and L40S (g6e.12xlarge: 12 vCPU, 96 GiB per
    # GPU) pools; a quota sized
    # by the smallest share could not hold one full L40S node, so jobs there were never admitted.
    from components.catalog import catalog

    obj = platform_object("aws-byo-vpc")
    result = plan_object(obj, "aws-byo-vpc")
    shapes = [
        catalog().shapes("aws", p["gpu"], p["gpusPerNode"])[0] for p in obj["nodePools"] if p.get("gpu")
    ]
    for team in obj["teams"]:
        (quota,) = objects(result, "kubernetes:core/v1:ResourceQuota", team["name"])
        hard = quota["spec"]["hard"]
        for shape in shapes:
            assert int(hard["requests.cpu"]) >= shape.vcpus // shape.gpus * team["gpuQuota"], shape.name
            assert int(hard["requests.memory"].removesuffix("Gi")) >= (
                int(shape.memory_gib // shape.gpus) * team["gpuQuota"]
            ), shape.name


# ---- Pod Security --------------------------------------------------------------------------------

NAMESPACE = "kubernetes:core/v1:Namespace"
ENFORCE, WARN, AUDIT = (f"pod-security.kubernetes.io/{m}" for m in ("enforce", "warn", "audit"))


def _team_labels(stack: str) -> list[dict[str, str]]:
    from tests.helpers.plans import planned

    return [
        ns["metadata"]["labels"]
        for ns in objects(planned(stack), NAMESPACE)
        if "trainplane.dev/team" in (ns["metadata"].get("labels") or {})
    ]


@pytest.mark.parametrize("stack", ["aws-dev", "aws-h200-efa", "onprem-dev"])
def test_team_namespaces_stay_baseline_where_no_pool_needs_more(stack):
    labels = _team_labels(stack)
    assert labels and all(lb[ENFORCE] == "baseline" and WARN not in lb for lb in labels), labels


@pytest.mark.parametrize("stack", ["gcp-dev", "gcp-h100-mega"])
def test_team_namespaces_admit_the_gpudirect_pods_of_a_fabric_pool_and_still_warn_at_baseline(stack):
    """gcp-dev's TCPX and gcp-h100-mega's TCPXO pods mount /sys, /proc/sys, /dev/aperture_devices and the NVIDIA dir from the
    host and give RxDM NET_ADMIN: `baseline` refuses all of it (Pod Security Standards)."""
    from components.bundle import NodePoolInfo
    from components.gcp.fabric import TCPXO, pod_fabric
    from components.incluster.tenancy import fabric_beyond_baseline

    labels = _team_labels(stack)
    assert labels and all(
        lb[ENFORCE] == "privileged" and lb[WARN] == "baseline" and lb[AUDIT] == "baseline" for lb in labels
    ), labels
    pool = NodePoolInfo(
        name="mega", gpu="h100", gpus_per_node=8, capacity="on-demand", max_nodes=2, fabric=pod_fabric(TCPXO)
    )
    needs = " ".join(fabric_beyond_baseline([pool]))
    for what in ("/sys", "/proc/sys", "/dev/aperture_devices", "/home/kubernetes/bin/nvidia", "NET_ADMIN"):
        assert what in needs, needs
