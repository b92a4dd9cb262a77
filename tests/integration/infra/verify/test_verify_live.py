"""verify against a running cluster: a fake API server on loopback serves lists built with the kubernetes
client's own models; the real client reads them through a kubeconfig, as `--kubeconfig` does."""

from __future__ import annotations

import pytest
from kubernetes import client as k

from infra.verify.context import Context
from infra.verify.live import verify_live
from tests.helpers.fake_k8s import FakeApiServer, Request
from tests.helpers.verify_plans import plan

PATHS = {
    "/apis/storage.k8s.io/v1/storageclasses": ("storage_classes", k.V1StorageClassList),
    "/apis/storage.k8s.io/v1/csidrivers": ("csi_drivers", k.V1CSIDriverList),
    "/api/v1/nodes": ("nodes", k.V1NodeList),
    "/api/v1/persistentvolumeclaims": ("pvcs", k.V1PersistentVolumeClaimList),
    "/apis/apps/v1/daemonsets": ("daemon_sets", k.V1DaemonSetList),
    "/api/v1/pods": ("pods", k.V1PodList),
    "/api/v1/serviceaccounts": ("service_accounts", k.V1ServiceAccountList),
}


class FakeApi:
    """Routes of the fake API server (tests/helpers/fake_k8s.py): the lists in `state`, read-only."""

    state: dict = {}
    requests: list = []

    @classmethod
    def get(cls, req: Request) -> tuple[int, dict]:
        cls.requests.append(("GET", req.path))
        if req.path not in PATHS:
            return 404, {}
        key, list_model = PATHS[req.path]
        body = k.ApiClient().sanitize_for_serialization(
            list_model(items=cls.state.get(key, []), metadata=k.V1ListMeta())
        )
        return 200, body


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    server = FakeApiServer(FakeApi)
    yield server.kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    server.close()


def meta(name: str, namespace: str | None = None, **kw) -> k.V1ObjectMeta:
    return k.V1ObjectMeta(name=name, namespace=namespace, **kw)


def healthy_cluster(p) -> dict:
    """aws-dev after `pulumi up`, as it should be: one H100 node up, everything wired."""
    ctx = Context(p)
    gpu_node = "ip-10-40-1-10.ec2.internal"
    pool = next(x for x in p.node_pools if x.name == "h100")
    node = k.V1Node(
        metadata=meta(gpu_node, labels={**pool.labels, "kubernetes.io/hostname": gpu_node}),
        spec=k.V1NodeSpec(taints=[k.V1Taint(key=t.key, value=t.value, effect=t.effect) for t in pool.taints]),
    )
    daemon_sets, pods = [], []
    for d in ctx.charts.daemon_sets:
        ns, _, name = d.name.partition("/")
        if name != "aws-node":  # the VPC CNI's DaemonSet comes below, with its agent
            daemon_sets.append(k.V1DaemonSet(metadata=meta(name, ns)))
        owner = k.V1OwnerReference(api_version="apps/v1", kind="DaemonSet", name=name, uid=f"uid-{name}")
        pods.append(
            k.V1Pod(
                metadata=meta(f"{name}-x", ns, owner_references=[owner]),
                spec=k.V1PodSpec(containers=[], node_name=gpu_node),
            )
        )
    agent = k.V1Container(name="aws-network-policy-agent", args=["--enable-network-policy=true"])
    daemon_sets.append(
        k.V1DaemonSet(
            metadata=meta("aws-node", "kube-system"),
            spec=k.V1DaemonSetSpec(
                selector=k.V1LabelSelector(match_labels={"k8s-app": "aws-node"}),
                template=k.V1PodTemplateSpec(
                    spec=k.V1PodSpec(containers=[k.V1Container(name="aws-node"), agent])
                ),
            ),
        )
    )
    pvcs = [
        k.V1PersistentVolumeClaim(
            metadata=meta(c.name, c.namespace), status=k.V1PersistentVolumeClaimStatus(phase="Bound")
        )
        for c in ctx.charts.claims
    ]
    accounts = [
        k.V1ServiceAccount(metadata=meta(sa.name, sa.namespace, annotations=sa.annotations))
        for sa in p.objects("ServiceAccount")
    ]
    return {
        # The classes the platform itself creates (EKS 1.30+ brings none), as the API returns them.
        "storage_classes": [
            k.V1StorageClass(
                metadata=meta(sc.name, annotations=sc.annotations), provisioner=sc.body["provisioner"]
            )
            for sc in p.objects("StorageClass")
        ],
        "csi_drivers": [k.V1CSIDriver(metadata=meta("ebs.csi.aws.com"), spec=k.V1CSIDriverSpec())],
        "nodes": [node],
        "pvcs": pvcs,
        "daemon_sets": daemon_sets,
        "pods": pods,
        "service_accounts": accounts,
    }


def live(api, state: dict):
    FakeApi.state = state
    return verify_live(plan("aws-dev"), kubeconfig=api)


def test_a_healthy_cluster_passes_and_is_only_read(api):
    FakeApi.requests = []
    report = live(api, healthy_cluster(plan("aws-dev")))
    assert report.mode == "live" and report.ok, [f.line() for f in report.findings]
    assert report.check("observability").status == "skip"
    assert {m for m, _ in FakeApi.requests} == {"GET"}


def test_live_storage_needs_a_default_class_and_its_csi_driver(api):
    state = healthy_cluster(plan("aws-dev"))
    state["csi_drivers"] = []
    report = live(api, state)
    assert report.failed() == ["storage"]
    assert any("ebs.csi.aws.com" in f.message for f in report.findings)
    state["storage_classes"] = []
    # Every claim of the platform names its class, so a cluster without it fails by that name.
    lines = [f.message for f in live(api, state).findings]
    assert any("asks for StorageClass 'gp3-encrypted'; the cluster has none" in m for m in lines), lines


def test_live_network_needs_an_enforcing_agent(api):
    state = healthy_cluster(plan("aws-dev"))
    for ds in state["daemon_sets"]:
        if ds.metadata.name == "aws-node":
            ds.spec.template.spec.containers[1].args = ["--enable-network-policy=false"]
    assert live(api, state).failed() == ["network"]


def test_live_gpu_nodes_need_their_taint_and_daemonset_pods(api):
    state = healthy_cluster(plan("aws-dev"))
    state["nodes"][0].spec.taints = []
    state["pods"] = [p for p in state["pods"] if "device-plugin" not in p.metadata.name]
    report = live(api, state)
    lines = [f.line() for f in report.findings]
    assert report.failed() == ["scheduling"]
    assert any("lacks taint nvidia.com/gpu" in line for line in lines)
    assert any("nvidia-device-plugin-daemonset" in line and "no pod" in line for line in lines), lines


def test_live_service_account_annotations_match_the_plan(api):
    state = healthy_cluster(plan("aws-dev"))
    (team_sa,) = [sa for sa in state["service_accounts"] if sa.metadata.namespace == "research"]
    team_sa.metadata.annotations = {}
    report = live(api, state)
    assert report.failed() == ["identity"]


def test_cli_live_mode_exit_codes(api, tmp_path, capsys):
    from infra.cli import main

    FakeApi.state = healthy_cluster(plan("aws-dev"))
    assert main(["verify", "aws-dev", "--kubeconfig", api, "--check", "network", "--check", "identity"]) == 0
    assert main(["verify", "aws-dev", "--kubeconfig", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_live_gpu_nodes_need_their_pools_topology_labels(api):
    import copy

    from infra.verify.model import build

    levels = ["topology.k8s.aws/network-node-layer-1", "kubernetes.io/hostname"]
    p = plan("aws-dev")
    outputs = copy.deepcopy(dict(p.outputs))
    h100 = next(x for x in outputs["nodePools"] if x["name"] == "h100")
    h100["topologyLevels"] = levels
    state = healthy_cluster(p)
    FakeApi.state = state
    # An autoscaling pool's flavor has no Topology (TAS places only on nodes that exist): labels or not,
    # nothing to check.
    autoscaling = build(p.stack, p.resources, outputs, p.config, p.platform, p.source)
    assert verify_live(autoscaling, kubeconfig=api).ok
    h100["minNodes"] = h100["maxNodes"]  # a fixed-size pool: its flavor names the Topology
    with_levels = build(p.stack, p.resources, outputs, p.config, p.platform, p.source)
    lines = [f.line() for f in verify_live(with_levels, kubeconfig=api).findings]
    assert any("lacks topology label topology.k8s.aws/network-node-layer-1" in line for line in lines), lines
    state["nodes"][0].metadata.labels["topology.k8s.aws/network-node-layer-1"] = "nn-1"
    assert verify_live(with_levels, kubeconfig=api).ok
