"""The verify hooks of the clouds' verifiers (infra/verify/verifier.py, block "cluster, pool nodes,
add-ons, fabric"): what each built-in verifier answers about its own plans, and what a verifier that
implements none of them answers (VerifierDefaults: a plain cluster with no cloud features)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from components.backends import register_backend, unregister_backend
from components.kubernetes.backend import ExistingClusterBackend
from components.outputs import NodePoolInfo
from infra.verify import facts as F
from infra.verify.charts import ChartModel
from infra.verify.checks.pool_nodes import PoolNodes, pool_nodes
from infra.verify.context import Context
from infra.verify.model import STACK_REFERENCE, PlanResource, build
from infra.verify.report import CheckResult
from infra.verify.verifier import VerifierDefaults
from infra.verify.verifiers import register_verifier, unregister_verifier, verifier
from tests.helpers.verify_plans import edit, plan

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _res(type_: str, name: str, **inputs: Any) -> dict[str, Any]:
    return {"urn": f"urn:pulumi:t::p::{type_}::{name}", "type": type_, "name": name, "inputs": inputs}


# ---- which backend a plan belongs to, and its Kubernetes version -----------------------------------


def test_each_cloud_recognises_its_own_cluster_resource_and_its_version():
    eks = build("t", [_res("aws:eks/cluster:Cluster", "c", version="1.33")], {})
    gke = build("t", [_res("gcp:container/cluster:Cluster", "c", minMasterVersion="1.32.4-gke.100")], {})
    assert (eks.cloud, eks.kubernetes_version) == ("aws", "1.33")
    assert (gke.cloud, gke.kubernetes_version) == ("gcp", "1.32.4-gke.100")
    assert eks.cluster_resource() is eks.resources[0]
    assert verifier("aws").plan_cluster(gke.resources) is None
    assert verifier("gcp").plan_cluster(eks.resources) is None


def test_the_outputs_cloud_wins_over_the_cluster_resource():
    outputs = {"cloud": "gcp", "clusterName": "c"}
    plan_ = build("t", [_res("aws:eks/cluster:Cluster", "c", version="1.33")], outputs)
    assert (plan_.cloud, plan_.kubernetes_version) == ("gcp", "1.33")


class _ToyBackend(ExistingClusterBackend):
    """A fourth cloud whose library hooks are an existing cluster's (the test is about its verifier)."""

    name = "toy-v1"


class _ToyVerifier(VerifierDefaults):
    """Its verifier knows only its cluster resource; every other hook is the default."""

    name = "toy-v1"

    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        return next((r for r in resources if r.type == "toy:index:Cluster"), None)

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        return str(cluster.inputs.get("k8s") or "") or None


@pytest.fixture
def toy():
    register_backend("toy-v1", _ToyBackend())
    register_verifier("toy-v1", _ToyVerifier())
    yield
    unregister_verifier("toy-v1")
    unregister_backend("toy-v1")


def test_a_registered_verifier_claims_its_plans_without_an_edit_in_verify(toy):
    plan_ = build("t", [_res("toy:index:Cluster", "c", k8s="1.34")], {})
    assert (plan_.cloud, plan_.kubernetes_version) == ("toy-v1", "1.34")
    assert build("t", [], {"cloud": "toy-v1", "clusterName": "c"}).cloud == "toy-v1"


def test_the_defaults_claim_no_cluster_and_a_plan_without_one_runs_on_a_cluster_that_exists():
    d = VerifierDefaults()
    ns = _res("kubernetes:core/v1:Namespace", "ns", kind="Namespace", metadata={"name": "x"})
    plan_ = build("t", [ns], {}, {"cluster": {"kubernetesVersion": "1.31"}})
    assert d.plan_cluster(plan_.resources) is None
    assert d.plan_kubernetes_version(plan_.resources[0]) is None
    assert d.adopts_existing_clusters() is False
    assert verifier("kubernetes").adopts_existing_clusters() is True
    assert (plan_.cloud, plan_.kubernetes_version, plan_.kind) == ("kubernetes", "1.31", "platform")
    assert plan_.cluster_resource() is None
    # A stack that reads another and has no node pools, on no cloud of its own: a job stack.
    job = build("t", [ns, _res(STACK_REFERENCE, "platform")], {})
    assert job.kind == "job"


# ---- the nodes a pool gets --------------------------------------------------------------------------


def test_the_aws_verifier_reads_a_pools_nodes_from_its_node_group():
    ctx = Context(plan("aws-dev"))
    (gpu,) = ctx.gpu_pools()
    nodes = verifier("aws").pool_nodes(ctx, gpu)
    assert nodes is not None and nodes.source.startswith("node group ")
    assert nodes.labels["eks.amazonaws.com/capacityType"] == "SPOT"
    assert [m.name for m in nodes.machines] == nodes.machine_names


def test_the_gcp_verifier_reads_a_pools_nodes_from_its_node_pool():
    ctx = Context(plan("gcp-dev"))
    gpu = ctx.gpu_pools()[0]
    nodes = verifier("gcp").pool_nodes(ctx, gpu)
    assert nodes is not None and nodes.source == f"node pool {gpu.name}"
    assert nodes.labels["cloud.google.com/gke-nodepool"] == gpu.name


def test_by_default_a_pools_nodes_are_what_the_platform_outputs_say():
    ctx = Context(plan("aws-dev"))
    (gpu,) = ctx.gpu_pools()
    assert VerifierDefaults().pool_nodes(ctx, gpu) is None
    onprem = Context(plan("onprem-dev"))
    nodes = pool_nodes(onprem, onprem.gpu_pools()[0])
    assert nodes.source == "platform outputs"
    assert nodes.labels == onprem.gpu_pools()[0].labels


# ---- managed add-ons' DaemonSets --------------------------------------------------------------------


def test_the_aws_verifier_models_the_daemonsets_of_the_eks_addons_the_plan_installs():
    out = ChartModel()
    verifier("aws").addon_objects(plan("aws-dev"), out)
    owners = {d.owner for d in out.daemon_sets}
    assert owners and all(o.startswith("EKS add-on ") for o in owners)
    assert out.csi_drivers and all(o.startswith("EKS add-on ") for o in out.csi_drivers.values())


def test_by_default_a_cloud_runs_no_addon_daemonsets():
    out = ChartModel()
    VerifierDefaults().addon_objects(plan("aws-dev"), out)
    assert (out.daemon_sets, out.csi_drivers) == ([], {})


# ---- the cloud's findings about GPU pools -----------------------------------------------------------


def _repairing_pool() -> tuple[NodePoolInfo, PoolNodes]:
    nodes = PoolNodes("gpu", {}, [], [], [], 8, node_repair=True, source="node group g")
    return NodePoolInfo(name="gpu"), nodes


def test_the_aws_verifier_wants_the_node_monitoring_agent_where_node_repair_is_on():
    addon = F.cloud("aws")["nodeRepair"]["addon"]
    without = edit(
        plan("aws-dev"), lambda r: r.inputs.get("addonName") == addon, lambda i: {"__drop__": True}
    )
    res = CheckResult("scheduling")
    verifier("aws").check_gpu_pools(Context(without), res, [_repairing_pool()])
    assert any(f"EKS add-on {addon} is not installed" in f.message for f in res.findings)


def test_by_default_a_cloud_adds_no_gpu_pool_findings():
    res = CheckResult("scheduling")
    VerifierDefaults().check_gpu_pools(Context(plan("aws-dev")), res, [_repairing_pool()])
    assert (res.findings, res.notes) == ([], [])


# ---- a GPU fabric's cluster side --------------------------------------------------------------------


def _fabric_pool(ctx: Context) -> tuple[NodePoolInfo, dict[str, Any]]:
    pool = next(p for p in ctx.gpu_pools() if p.fabric)
    assert pool.fabric is not None
    return pool, F.cloud(ctx.platform.cloud)["fabrics"][pool.fabric.kind]


def test_the_gcp_verifier_wants_multi_networking_for_a_fabric_pool():
    single = edit(
        plan("gcp-h100-mega"),
        lambda r: r.type == "gcp:container/cluster:Cluster",
        lambda i: i.pop("enableMultiNetworking", None),
    )
    ctx = Context(single)
    res = CheckResult("fabric")
    verifier("gcp").check_fabric(ctx, res, *_fabric_pool(ctx))
    assert [f.message for f in res.findings] == [
        "the cluster needs multi-networking on Dataplane V2 (ADVANCED_DATAPATH) for its fabric pools"
    ]


def test_by_default_a_cloud_checks_nothing_of_a_fabric_on_the_cluster():
    ctx = Context(plan("gcp-h100-mega"))
    res = CheckResult("fabric")
    VerifierDefaults().check_fabric(ctx, res, *_fabric_pool(ctx))
    assert (res.findings, res.notes, res.examined) == ([], [], [])
