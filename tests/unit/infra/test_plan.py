"""The numbers `trainplane plan` shows: GPUs and cost at both scales, and the critical path."""

from __future__ import annotations

import pytest

from components.catalog import catalog
from components.spec import PlatformSpec
from infra.mockcloud import Resource
from infra.plan import critical_path, estimate_cost
from tests.helpers.plans import platform_object


def res(name, type_, deps=(), parent=None, custom=True, provider=None):
    return Resource(
        urn=f"urn:{name}",
        type=type_,
        name=name,
        parent=parent,
        custom=custom,
        deps=tuple(deps),
        inputs={},
        provider=provider,
    )


def test_critical_path_is_the_longest_chain_of_waits():
    resources = [
        res("vpc", "aws:ec2/vpc:Vpc"),
        res("net", "trainplane:aws:Network", custom=False),
        res("nat", "aws:ec2/natGateway:NatGateway", parent="urn:net"),
        res("subnet", "aws:ec2/subnet:Subnet", deps=["urn:vpc"], parent="urn:net"),
        # Depending on the component waits for everything inside it (the NAT gateway too).
        res("cluster", "aws:eks/cluster:Cluster", deps=["urn:net"]),
        res("fsx", "aws:fsx/lustreFileSystem:LustreFileSystem", deps=["urn:subnet"]),
        res("k8s", "pulumi:providers:kubernetes", deps=["urn:cluster"]),
        res("operator", "kubernetes:helm.sh/v3:Release", provider="urn:k8s::k8s-id"),
    ]
    path = critical_path(resources)
    assert [s.name for s in path] == ["nat", "cluster", "k8s", "operator"]
    assert sum(s.seconds for s in path) == 100 + 600 + 1 + 120


def test_independent_storage_is_not_on_the_cluster_path():
    resources = [
        res("cluster", "aws:eks/cluster:Cluster"),
        res("fsx", "aws:fsx/lustreFileSystem:LustreFileSystem"),
        res("dra", "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", deps=["urn:fsx"]),
    ]
    assert [s.name for s in critical_path(resources)] == ["fsx", "dra"]


def test_cost_at_both_scales_uses_spot_for_spot_pools():
    spec = PlatformSpec.load(platform_object("aws-dev"))
    cost = estimate_cost(spec)
    system = catalog().machine("aws", "m6i.xlarge").on_demand_hourly
    p5 = catalog().machine("aws", "p5.48xlarge").on_demand_hourly
    spot = p5 * catalog().pricing["aws"].spot_fraction
    assert cost.min_hourly == pytest.approx(0.10 + 2 * system, abs=0.01)
    assert cost.max_hourly == pytest.approx(0.10 + 4 * system + 4 * spot, abs=0.01)
    assert cost.max_hourly_on_demand == pytest.approx(0.10 + 4 * system + 4 * p5, abs=0.01)
    assert any("spot" in a for a in cost.assumptions)


def test_price_overrides_from_config_win():
    raw = platform_object("aws-dev")
    raw["pricing"] = {"overrides": {"p5.48xlarge": {"onDemandHourly": 50.0, "spotHourly": 20.0}}}
    cost = estimate_cost(PlatformSpec.load(raw))
    h100 = next(p for p in cost.pools if p.pool == "h100")
    assert (h100.on_demand_hourly, h100.spot_hourly, h100.price_source) == (
        50.0,
        20.0,
        "stack config override",
    )
    assert cost.max_hourly == pytest.approx(0.10 + 4 * 0.192 + 4 * 20.0, abs=0.01)


def test_unknown_machine_price_is_reported_not_invented():
    raw = platform_object("aws-dev")
    raw["nodePools"][0]["instanceType"] = "c7i.large"
    cost = estimate_cost(PlatformSpec.load(raw))
    assert cost.min_hourly is None
    assert any("no price for c7i.large" in a for a in cost.assumptions)


def test_reserved_capacity_is_a_committed_cost_at_both_scales():
    """A reservation or Capacity Block is paid whether used or not: its maxNodes count at minimum scale
    too, at `reservedHourly` when given, else at the on-demand price with that assumption printed."""
    raw = platform_object("aws-h100-reserved")
    cost = estimate_cost(PlatformSpec.load(raw))
    p5 = catalog().machine("aws", "p5.48xlarge").on_demand_hourly
    system = catalog().machine("aws", "m6i.xlarge").on_demand_hourly
    spot = p5 * catalog().pricing["aws"].spot_fraction
    committed = (4 + 2) * 31.46  # h100-block 4 nodes + h100-odcr 2 nodes at the configured price
    assert cost.committed_hourly == pytest.approx(committed, abs=0.01)
    assert cost.min_hourly == pytest.approx(0.10 + 2 * system + committed, abs=0.01)
    assert cost.max_hourly == pytest.approx(0.10 + 4 * system + committed + 4 * p5 + 4 * spot, abs=0.01)
    # All on-demand: no commitment, nothing at minimum scale.
    assert cost.min_hourly_on_demand == pytest.approx(0.10 + 2 * system, abs=0.01)
    assert not any("reserved at the on-demand price" in a for a in cost.assumptions)

    del raw["pricing"]
    cost = estimate_cost(PlatformSpec.load(raw))
    assert cost.committed_hourly == pytest.approx(6 * p5, abs=0.01)
    assert (
        "h100-block: reserved at the on-demand price, an assumption "
        "(set pricing.overrides.p5.48xlarge.reservedHourly to the price paid)"
    ) in cost.assumptions


def test_no_reserved_pool_no_commitment():
    cost = estimate_cost(PlatformSpec.load(platform_object("aws-dev")))
    assert cost.committed_hourly == 0.0
    assert not any(a.startswith("reserved") for a in cost.assumptions)


def test_a_region_the_catalog_has_no_prices_for_is_said_first():
    # A europe-west4 stack used to be priced at us-central1 prices with only the generic source line.
    spec = PlatformSpec.load(platform_object("gcp-byo-network"))
    assert spec.region == "europe-west4" and catalog().pricing["gcp"].region == "us-central1"
    assert estimate_cost(spec).assumptions[0] == (
        "region: priced at us-central1 list prices, the only region the catalog has for gcp; europe-west4 "
        "prices differ (set platform.pricing.overrides for exact ones)"
    )
    same = PlatformSpec.load(platform_object("gcp-dev"))
    assert same.region == "us-central1"
    assert not any(a.startswith("region:") for a in estimate_cost(same).assumptions)


def test_the_plan_says_a_capacity_block_is_paid_only_between_its_dates():
    """As the cost rules and `trainplane cost` charge it (issue 30, major 3)."""
    from components.spec import PlatformSpec
    from infra.plan_cost import estimate_cost
    from tests.helpers.plans import platform_object

    cost = estimate_cost(PlatformSpec.load(platform_object("aws-h100-reserved")))
    assert (
        "h100-block: a Capacity Block, paid only from 2026-12-01 11:30 to 2026-12-15 11:30 UTC (336 h); "
        "0 outside those dates"
    ) in cost.assumptions
