"""AWS pools per capacity kind (issue 13 point 1), on the reference stack aws-h100-reserved: a Capacity
Block, an On-Demand Capacity Reservation, on-demand and spot H100 pools."""

from __future__ import annotations

import ast

import pytest

from components.aws.autoscaler import asg_name_regex, priorities
from components.spec import ConfigError
from tests.helpers.plans import ROOT, one, planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NG = "aws:eks/nodeGroup:NodeGroup"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
STACK = "aws-h100-reserved"
BLOCK, ODCR = "cr-0123456789abcdef0", "cr-0fedcba9876543210"
TOPOLOGY = [
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "kubernetes.io/hostname",
]


@pytest.fixture(scope="module")
def result():
    return planned(STACK)


def _pool(result, name):
    return (
        one(result, NG, f"h100-reserved-{name}-ng").inputs,
        one(result, LT, f"h100-reserved-{name}-lt").inputs,
    )


def _subnet_in(result, zone):
    private = [s for s in result.of_type(SUBNET) if "private" in s.name]
    return [f"{s.name}-id" for s in private if s.inputs["availabilityZone"] == zone]


# (pool, node group capacityType, launch template capacity spec, market options, zone or None)
TABLE = [
    (
        "h100-block",
        "CAPACITY_BLOCK",
        {"capacityReservationTarget": {"capacityReservationId": BLOCK}},
        {"marketType": "capacity-block"},
        "us-east-1b",
    ),
    (
        "h100-odcr",
        "ON_DEMAND",
        {
            "capacityReservationPreference": "capacity-reservations-only",
            "capacityReservationTarget": {"capacityReservationId": ODCR},
        },
        None,
        "us-east-1a",
    ),
    ("h100-od", "ON_DEMAND", None, None, "us-east-1b"),
    # the spot pool shares the block's zone and EFA layout, so one job can fall back across the three
    ("h100-spot", "SPOT", None, None, "us-east-1b"),
]


@pytest.mark.parametrize(("pool", "capacity_type", "reservation", "market", "zone"), TABLE)
def test_each_capacity_kind_reaches_ec2_as_documented(result, pool, capacity_type, reservation, market, zone):
    ng, lt = _pool(result, pool)
    assert ng["capacityType"] == capacity_type
    assert lt.get("capacityReservationSpecification") == reservation
    assert lt.get("instanceMarketOptions") == market
    assert ng["subnetIds"] == (_subnet_in(result, zone) if zone else sorted(ng["subnetIds"]))
    if zone is None:
        assert len(ng["subnetIds"]) == 3


def test_a_pool_without_zones_spreads_over_the_vpcs_zones(result):
    assert len(one(result, NG, "h100-reserved-system-ng").inputs["subnetIds"]) == 3


def test_capacity_block_pool_scales_from_zero_in_its_zone_without_a_placement_group(result):
    ng, lt = _pool(result, "h100-block")
    assert ng["scalingConfig"]["minSize"] == 0 and ng["scalingConfig"]["maxSize"] == 4
    # EFA still on (p5: 32 interfaces), but Capacity Blocks are placed by EC2: no placement group of ours.
    assert len(lt["networkInterfaces"]) == 32
    assert not lt.get("placement")
    # Sorted: the engine records resources in the order their registrations complete, which varies.
    groups = sorted(r.name for r in result.of_type("aws:ec2/placementGroup:PlacementGroup"))
    assert groups == ["h100-reserved-h100-od-placement", "h100-reserved-h100-spot-placement"]


def test_capacity_block_template_names_the_instance_type_and_the_node_group_none(result):
    """EKS user guide, "Create a managed node group with Capacity Blocks for ML": InstanceType in the
    launch template, no instance types on the node group (else CreateNodegroup is refused)."""
    ng, lt = _pool(result, "h100-block")
    assert lt["instanceType"] == "p5.48xlarge"
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": BLOCK
    }
    assert "instanceTypes" not in ng
    # Every other pool keeps its types on the node group and none in its template.
    for pool in ("h100-odcr", "h100-od", "h100-spot"):
        ng, lt = _pool(result, pool)
        assert ng["instanceTypes"] == ["p5.48xlarge"] and "instanceType" not in lt, pool
    # The in-cluster layer still learns the block's machine type.
    pools = {p["name"]: p for p in result.outputs["nodePools"]}
    assert pools["h100-block"]["machineTypes"] == ["p5.48xlarge"]


def test_pools_hand_reservation_and_topology_levels_to_the_in_cluster_layer(result):
    pools = {p["name"]: p for p in result.outputs["nodePools"]}
    assert pools["h100-block"]["reservation"] == BLOCK
    assert pools["h100-odcr"]["reservation"] == ODCR
    assert pools["h100-spot"]["reservation"] is None
    assert pools["h100-block"]["capacity"] == "capacity-block"
    for name in ("h100-block", "h100-odcr", "h100-od", "h100-spot"):
        assert pools[name]["topologyLevels"] == TOPOLOGY, name
    # m6i has no EC2 instance topology: no levels, Kueue's topology gets none from the system pool.
    assert pools["system"]["topologyLevels"] == []


def test_autoscaler_tries_reservations_first_then_spot_then_on_demand():
    pools = [
        ("a-block", "capacity-block"),
        ("a-odcr", "reservation"),
        ("a-spot", "spot"),
        ("a-od", "on-demand"),
    ]
    table = priorities(pools)
    by = {ng: asg_name_regex(ng) for ng, _ in pools}
    assert table == {10: [by["a-od"]], 50: [by["a-spot"]], 90: [by["a-block"], by["a-odcr"]]}


def test_no_reservation_or_capacity_block_is_ever_created_or_bought(result):
    """A Capacity Block cannot be deleted once bought: the program only references reservations. No
    stack registers one, and no module of the program names the resource types that would."""
    bought = {
        "aws:ec2/capacityReservation:CapacityReservation",
        "aws:ec2/capacityBlockReservation:CapacityBlockReservation",
    }
    assert not [r.urn for r in result.resources if r.type in bought]
    classes = {"CapacityReservation", "CapacityBlockReservation"}
    for path in (ROOT / "components").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in classes:
                pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno} names aws.ec2.{node.attr}")


def test_vpc_spans_a_pool_zone_beyond_network_zones():
    from components.aws.capacity import vpc_zones

    assert vpc_zones(["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"], 2, ["us-east-1d"]) == [
        "us-east-1a",
        "us-east-1b",
        "us-east-1d",
    ]
    with pytest.raises(ConfigError, match="us-east-1z"):
        vpc_zones(["us-east-1a"], 1, ["us-east-1z"])


def test_a_pool_zone_the_region_lacks_is_bad_input_not_an_internal_error(tmp_path, capsys):
    # The spec can only check the zone's form; the region's zone list is read while the VPC is planned.
    from infra.cli import main

    stack = tmp_path / "Pulumi.zone-test.yaml"
    text = (ROOT / "stacks" / "Pulumi.aws-h100-reserved.yaml").read_text()
    stack.write_text(text.replace("zones: [us-east-1b]", "zones: [us-east-1z]"))
    assert main(["plan", str(stack)]) == 2
    err = capsys.readouterr().err
    assert "platform.nodePools[].zones: us-east-1z not available in the region" in err
    assert "internal error" not in err
