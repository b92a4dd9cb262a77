"""verify cloud: what EC2, EKS and FSx check when we create a resource, and the order the plan creates
them in. Each case plants one defect in a clean reference plan and expects the finding by rule name; the
clean plans pass (and tests/unit/infra/verify/test_verify_stacks.py runs the check on every reference stack)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from infra.verify import facts as F
from infra.verify.model import Plan, PlanResource, build
from tests.helpers.verify_plans import edit, lines, plan, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
ADDON = "aws:eks/addon:Addon"
PROVIDER = "pulumi:providers:kubernetes"


def named(suffix: str, type_: str) -> Callable[[PlanResource], bool]:
    return lambda r: r.type == type_ and r.name.endswith(suffix)


def findings(p: Plan, rule: str) -> list[str]:
    report = run(p, "cloud")
    return [line for line in lines(report) if line.startswith(f"cloud: {rule}: ")]


def undepend(p: Plan, waiter: Callable[[PlanResource], bool], dep_type: str) -> Plan:
    """A copy of `p` where the matching resources no longer depend on any resource of `dep_type`."""
    by_urn = p.by_urn()
    kept = tuple(
        replace(r, deps=tuple(d for d in r.deps if by_urn.get(d) is None or by_urn[d].type != dep_type))
        if waiter(r)
        else r
        for r in p.resources
    )
    return build(p.stack, kept, p.outputs, p.config, p.platform, p.source)


@pytest.mark.parametrize(
    "stack",
    ["aws-dev", "aws-byo-vpc", "aws-h100-reserved", "aws-h200-efa", "gcp-dev", "gcp-h100-mega", "onprem-dev"],
)
def test_clean_reference_platforms_pass(stack):
    report = run(plan(stack), "cloud")
    assert report.ok, lines(report)
    assert report.check("cloud").examined


# ---- Capacity Blocks ---------------------------------------------------------------------------------
BLOCK_LT = named("h100-block-lt", LAUNCH_TEMPLATE)
BLOCK_NG = named("h100-block-ng", NODE_GROUP)


def test_a_capacity_block_template_without_instance_type_fails():
    broken = edit(plan("aws-h100-reserved"), BLOCK_LT, lambda i: i.pop("instanceType"))
    found = findings(broken, "capacity-block-template")
    assert found and "node group h100-reserved-h100-block" in found[0] and "no InstanceType" in found[0]


def test_a_capacity_block_template_without_the_market_type_or_target_fails():
    def spot(i: dict) -> None:
        i["instanceMarketOptions"] = {"marketType": "spot"}
        i["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] = (
            "cr-0other"
        )

    found = findings(edit(plan("aws-h100-reserved"), BLOCK_LT, spot), "capacity-block-template")
    assert any("market type 'spot'" in f for f in found), found
    assert any("'cr-0other', not the block 'cr-0123456789abcdef0'" in f for f in found), found


def test_a_capacity_block_node_group_with_instance_types_fails():
    broken = edit(plan("aws-h100-reserved"), BLOCK_NG, lambda i: i.update(instanceTypes=["p5.48xlarge"]))
    found = findings(broken, "capacity-block-node-group")
    assert found and "h100-reserved-h100-block" in found[0] and "names none" in found[0]


# ---- On-Demand Capacity Reservations -------------------------------------------------------------------
ODCR_LT = named("h100-odcr-lt", LAUNCH_TEMPLATE)
ODCR_NG = named("h100-odcr-ng", NODE_GROUP)


def test_an_odcr_pool_whose_template_does_not_target_its_reservation_fails():
    broken = edit(plan("aws-h100-reserved"), ODCR_LT, lambda i: i.pop("capacityReservationSpecification"))
    found = findings(broken, "odcr-target")
    assert found and "h100-reserved-h100-odcr" in found[0] and "cr-0fedcba9876543210" in found[0]


def test_an_odcr_target_with_the_open_preference_fails():
    def open_(i: dict) -> None:
        i["capacityReservationSpecification"]["capacityReservationPreference"] = "open"

    found = findings(edit(plan("aws-h100-reserved"), ODCR_LT, open_), "odcr-target")
    assert found and "preference 'open'" in found[0]


def test_an_odcr_pool_over_several_zones_fails():
    p = plan("aws-h100-reserved")
    subnets = [r for r in p.of_type("aws:ec2/subnet:Subnet") if "private" in r.name]

    def spread(i: dict) -> None:
        i["subnetIds"] = [f"{s.name}-id" for s in subnets]

    by_urn = {s.urn for s in subnets}
    broken = edit(p, ODCR_NG, spread)
    # The node group now depends on every private subnet, as the engine would record it.
    broken = build(
        broken.stack,
        tuple(replace(r, deps=(*r.deps, *by_urn)) if ODCR_NG(r) else r for r in broken.resources),
        broken.outputs,
        broken.config,
    )
    found = findings(broken, "odcr-target")
    assert found and "3 subnets" in found[0] and "one zone" in found[0], found


# ---- EFA ---------------------------------------------------------------------------------------------
H200_LT = named("h200-spot-lt", LAUNCH_TEMPLATE)


def test_an_efa_template_with_fewer_interfaces_than_the_instance_type_has_fails():
    broken = edit(
        plan("aws-h200-efa"), H200_LT, lambda i: i.update(networkInterfaces=i["networkInterfaces"][:8])
    )
    found = findings(broken, "efa-interfaces")
    assert any("8 EFA interfaces" in f and "p5en.48xlarge has 16" in f for f in found), found


def test_an_efa_only_primary_interface_or_a_repeated_card_fails():
    def bad_cards(i: dict) -> None:
        i["networkInterfaces"][0]["interfaceType"] = "efa-only"
        i["networkInterfaces"][2]["networkCardIndex"] = 1

    found = findings(edit(plan("aws-h200-efa"), H200_LT, bad_cards), "efa-interfaces")
    assert any("card 0: device 0 type 'efa-only'" in f for f in found), found
    assert any("network card indices" in f for f in found), found


def test_an_efa_template_without_placement_group_or_with_template_security_groups_fails():
    def loose(i: dict) -> None:
        i.pop("placement")
        i["vpcSecurityGroupIds"] = ["sg-1"]

    found = findings(edit(plan("aws-h200-efa"), H200_LT, loose), "efa-interfaces")
    assert any("no cluster placement group" in f for f in found), found
    assert any("security groups both on the template and its interfaces" in f for f in found), found


# ---- FSx ---------------------------------------------------------------------------------------------
def test_fsx_persistent_2_capacity_and_throughput_fsx_refuses_fail():
    broken = edit(
        plan("aws-dev"),
        lambda r: r.type == LUSTRE,
        lambda i: i.update(storageCapacity=1800, perUnitStorageThroughput=200),
    )
    found = findings(broken, "fsx-persistent2")
    assert any("1800 GiB" in f for f in found) and any("throughput 200" in f for f in found), found


# ---- add-on versions ---------------------------------------------------------------------------------
MONITORING = lambda r: r.type == ADDON and r.inputs.get("addonName") == "eks-node-monitoring-agent"  # noqa: E731


@pytest.mark.parametrize("version", [None, "v1.5.1-eksbuild.1", "v1.6.5-eksbuild.1"])
def test_a_node_monitoring_addon_older_than_its_configuration_or_instance_types_fails(version):
    def pin(i: dict) -> None:
        i.pop("addonVersion", None)
        if version:
            i["addonVersion"] = version

    found = findings(edit(plan("aws-h200-efa"), MONITORING, pin), "addon-version")
    assert any("p5en.48xlarge" in f and "v1.6.6" in f for f in found), found
    assert any("dcgmAgent.tolerations need v1.6.0" in f for f in found) == (version != "v1.6.5-eksbuild.1"), (
        found
    )


# ---- creation order ----------------------------------------------------------------------------------
def test_a_kubernetes_provider_that_does_not_wait_for_the_access_policy_association_fails():
    broken = undepend(
        plan("aws-dev"),
        lambda r: r.type == PROVIDER,
        "aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
    )
    found = findings(broken, "provider-after-access")
    assert found and "ml-dev-cluster-k8s" in found[0] and "ml-dev-cluster-admin-0" in found[0], found


def test_a_kubernetes_provider_that_does_not_wait_for_the_private_endpoint_rule_fails():
    broken = undepend(
        plan("aws-byo-vpc"),
        lambda r: r.type == PROVIDER,
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    )
    found = findings(broken, "provider-after-api-rules")
    assert found and "ml-shared-cluster-api-from-10-100-0-0-16" in found[0], found


def test_fsx_that_does_not_wait_for_its_lnet_rules_fails():
    broken = undepend(
        plan("aws-h200-efa"),
        lambda r: r.type == LUSTRE,
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    )
    found = findings(broken, "fsx-after-lnet-rules")
    assert found and "h200-train-scratch-fs" in found[0], found
    for rule in ("sg-nodes-988", "sg-nodes-1018-1023", "sg-self-988", "sg-self-1018-1023"):
        assert f"h200-train-scratch-{rule}" in found[0], found


def test_every_create_rule_and_order_rule_names_its_source():
    for cloud in ("aws", "gcp", "kubernetes"):
        facts = F.cloud(cloud)
        for name, rule in (facts.get("createRules") or {}).items():
            assert rule.get("source"), (cloud, name)
        for rule in facts.get("createOrder") or []:
            assert rule.get("source") and rule.get("why") and rule.get("name"), (cloud, rule)
        for name, addon in (facts.get("addonVersions") or {}).items():
            assert addon.get("source"), (cloud, name)
