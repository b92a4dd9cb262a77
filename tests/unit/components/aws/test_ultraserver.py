"""UltraServer rules: a rack pool is sized in whole UltraServers, on Kubernetes >= 1.34."""

from __future__ import annotations

from components.aws.cost import cost_assumptions
from components.aws.ultraserver import check_rack_pool, rack_domain, rack_topology
from components.catalog import catalog
from components.spec import NodePoolSpec, PlatformSpec
from tests.helpers.plans import platform_object

SHAPE = catalog().machine("aws", "p6e-gb200.36xlarge")


def _pool(**kw) -> NodePoolSpec:
    return NodePoolSpec(name="gb", gpu="GB200", gpusPerNode=4, capacity="capacity-block", **kw)


def test_whole_ultraservers_pass_and_others_name_the_key() -> None:
    assert SHAPE is not None
    assert (
        list(
            check_rack_pool(
                _pool(minNodes=0, maxNodes=18), SHAPE, "1.35", "platform.nodePools[1]", "platform"
            )
        )
        == []
    )
    assert list(check_rack_pool(_pool(minNodes=0, maxNodes=9), SHAPE, "1.35", "p", "platform")) == []
    (line,) = check_rack_pool(
        _pool(minNodes=0, maxNodes=10), SHAPE, "1.35", "platform.nodePools[1]", "platform"
    )
    assert line.startswith("platform.nodePools[1].maxNodes: 10 is not a whole number")


def test_kubernetes_floor() -> None:
    assert SHAPE is not None
    (line,) = check_rack_pool(_pool(maxNodes=18), SHAPE, "1.33", "p", "platform")
    assert line.startswith("platform.cluster.kubernetesVersion: 1.33 is too old")


def test_rack_domain_and_clique_level() -> None:
    assert SHAPE is not None
    rack = rack_domain([SHAPE], 36)
    assert rack is not None and (rack.gpus, rack.nodes) == (72, 18)
    small = rack_domain([SHAPE], 9)
    assert small is not None and (small.gpus, small.nodes) == (36, 9)
    assert rack_topology(("a", "kubernetes.io/hostname"), rack) == (
        "a",
        "nvidia.com/gpu.clique",
        "kubernetes.io/hostname",
    )
    assert rack_topology(("a", "kubernetes.io/hostname"), None) == ("a", "kubernetes.io/hostname")


def test_plan_costs_the_block_in_whole_ultraservers() -> None:
    spec = PlatformSpec.model_validate(platform_object("aws-gb200"))
    (line,) = cost_assumptions(spec)
    assert line.startswith("gb200-block: 1 UltraServer(s) of 18 p6e-gb200.36xlarge nodes (72 GB200 GPUs")
    assert "EC2 lists no price" in line


def test_rack_nodes_mask_the_host_imex_service() -> None:
    import base64

    from components.aws.ultraserver import rack_user_data
    from components.outputs import RackDomain

    assert rack_user_data(None) is None
    mime = base64.b64decode(rack_user_data(RackDomain(gpus=72, nodes=18)) or "").decode()
    assert 'Content-Type: text/x-shellscript; charset="us-ascii"' in mime
    assert "systemctl mask nvidia-imex.service" in mime


def test_the_aws_rules_name_the_pool_key_of_a_partial_ultraserver() -> None:
    from components.aws import rules

    obj = platform_object("aws-gb200")
    obj["nodePools"][1]["maxNodes"] = 12
    spec = PlatformSpec.model_validate(obj)
    lines = list(rules.check_pool(spec, spec.node_pools[1], "platform.nodePools[1]"))
    assert lines == [
        "platform.nodePools[1].maxNodes: 12 is not a whole number of p6e-gb200.36xlarge UltraServers (9 or 18 "
        "nodes each; EC2 sells them as Capacity Blocks of whole UltraServers)"
    ]
