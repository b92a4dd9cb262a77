"""EFA pools: one EFA layout per pool, reported to the in-cluster layer, and the device plugin's pin."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.aws.node_group import machine_shapes
from components.catalog import catalog
from components.charts import CHARTS
from components.spec import NodePoolSpec
from tests.helpers.aws import NODE_GROUP, one, plan
from tests.helpers.checkers import SHARED_CHECKS, checker_module
from tests.helpers.plans import ROOT

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

EFA = "vpc.amazonaws.com/efa"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
REFERENCE = ROOT.parent / "shared" / "reference" / "charts"


def _efa_pools():
    result = plan("aws-h200-efa")
    pools = {p["name"]: p for p in result.outputs["nodePools"] if p["extendedResources"]}
    assert set(pools) == {"h200-spot", "h200-od"}
    return result, pools


def test_every_node_of_an_efa_pool_has_the_efa_count_the_pool_reports():
    result, pools = _efa_pools()
    tags = result.of_type("aws:autoscaling/tag:Tag")
    for name, pool in pools.items():
        group = f"h200-train-{name}"
        ng = one(result, NODE_GROUP, f"{group}-ng").inputs
        reported = pool["extendedResources"][EFA]
        # Each instance type the group may launch, the launch template's interfaces, and the
        # autoscaler's scale-from-zero template all agree with what job pods will request.
        assert {catalog().machine("aws", t).efa_interfaces for t in ng["instanceTypes"]} == {reported}
        assert len(one(result, LT, f"{group}-lt").inputs["networkInterfaces"]) == reported
        (tag,) = [
            t.inputs["tag"]["value"]
            for t in tags
            if t.name.startswith(f"{group}-tag-")
            and t.inputs["tag"]["key"] == f"k8s.io/cluster-autoscaler/node-template/resources/{EFA}"
        ]
        assert tag == str(reported)
    # The H200 spot pool no longer mixes p5e (32 EFA) with p5en (16): it keeps the preferred layout.
    assert pools["h200-spot"]["machineTypes"] == ["p5en.48xlarge"]
    assert pools["h200-spot"]["extendedResources"] == {EFA: 16}


@pytest.mark.parametrize("gpu", [g for g in catalog().gpu_names() if catalog().gpu(g).shapes_on("aws")])
def test_no_efa_pool_of_the_catalog_mixes_efa_layouts(gpu):
    for count in catalog().gpu(gpu).counts("aws"):
        with_efa = [s for s in catalog().shapes("aws", gpu, count) if s.efa_interfaces]
        if not with_efa:
            continue
        preferred = with_efa[0]  # cheapest first
        for capacity in ("spot", "on-demand"):
            pool = NodePoolSpec(name="p", gpu=gpu, gpus_per_node=count, capacity=capacity, efa=True)
            shapes = machine_shapes(pool, count)
            assert shapes and {s.efa_interfaces for s in shapes} == {preferred.efa_interfaces}, (gpu, count)


def test_efa_pools_hand_over_the_libfabric_environment():
    _, pools = _efa_pools()
    for pool in pools.values():
        # aws-ofi-nccl doc/efa-env-var.md: efa provider, GPUDirect RDMA on p5en, no huge pages (the
        # trainer's DataLoader workers fork).
        assert pool["podEnv"] == {
            "FI_PROVIDER": "efa",
            "FI_EFA_USE_DEVICE_RDMA": "1",
            "FI_EFA_USE_HUGE_PAGE": "0",
        }
    dev = plan("aws-dev").outputs["nodePools"]
    assert all(p["extendedResources"] == {} and p["podEnv"] == {} for p in dev)


def test_rdma_is_set_only_where_every_instance_type_has_it():
    from components.aws.efa import efa_pod_env

    assert efa_pod_env(["p4d.24xlarge"])["FI_EFA_USE_DEVICE_RDMA"] == "1"
    # g6e has EFA but no GPUDirect RDMA: setting it there aborts libfabric.
    assert "FI_EFA_USE_DEVICE_RDMA" not in efa_pod_env(["g6e.48xlarge"])
    assert "FI_EFA_USE_DEVICE_RDMA" not in efa_pod_env(["p5.48xlarge", "g6e.48xlarge"])


def test_device_plugin_chart_is_pinned_by_the_app_version_it_ships():
    pinned = CHARTS["aws-efa-k8s-device-plugin"]
    # Chart v0.5.20 ships plugin v0.5.13; plugin v0.5.20 is chart v0.5.30 (FACTS.md, aws/eks-charts).
    assert (pinned.version, pinned.app_version) == ("v0.5.30", "v0.5.20")
    result = plan("aws-h200-efa")
    (release,) = [
        r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == pinned.chart
    ]
    assert release.inputs["version"] == pinned.version
    defaults = REFERENCE / f"{pinned.chart}-{pinned.version}.values.yaml"
    if defaults.exists():
        assert yaml.safe_load(defaults.read_text())["image"]["tag"] == pinned.app_version


@pytest.mark.skipif(
    not (SHARED_CHECKS / "helm_values_keys.py").exists(), reason="../shared is not beside this checkout"
)
@pytest.mark.parametrize("chart", ["cluster-autoscaler", "aws-efa-k8s-device-plugin"])
def test_aws_chart_values_are_keys_of_the_pinned_chart(chart):
    checker = checker_module("helm_values_keys.py")
    pinned = CHARTS[chart]
    defaults = Path(REFERENCE / f"{chart}-{pinned.version}.values.yaml")
    assert defaults.exists(), (
        f"no upstream defaults for {chart} {pinned.version}: pin a version kept in ../shared"
    )
    (release,) = [
        r for r in plan("aws-h200-efa").of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == chart
    ]
    unknown = checker.unknown_keys_deep(release.inputs["values"], yaml.safe_load(defaults.read_text()))
    free = checker.FREE_FORM.get(chart, set())
    assert [k for k in unknown if not any(k == f or k.startswith(f + ".") for f in free)] == []
