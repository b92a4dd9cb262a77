"""The cost rules' shape and wiring: every reference stack's PrometheusRule prices every GPU pool at the
plan's price, the cost dashboard reads only series the rules record, nodes are mapped to pools by our
ServiceMonitor (no chart value), and a pool's owner must be a team. The dollars are tested with promtool
(tests/integration/components/incluster/test_cost_rules.py) and against a real Prometheus (test_cost_report.py)."""

from __future__ import annotations

import re

import pytest

from components.incluster.cost_rules import PRICE, recorded
from components.incluster.dashboards import dashboards
from components.pricing import pool_costs
from components.spec import ConfigError, PlatformSpec
from tests.helpers.plans import one, planned, platform_object
from tests.helpers.promql import metric_names

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def cost_rules(result) -> list[dict]:
    (cr,) = [r for r in result.resources if r.type.endswith("PrometheusRule")]
    return [r for g in cr.inputs["spec"]["groups"] if g["name"] == "trainplane-cost" for r in g["rules"]]


@pytest.mark.parametrize("stack", ["aws-h100-reserved", "gcp-h100-dws", "aws-dev"])
def test_every_gpu_pool_is_priced_at_the_plans_price(stack):
    spec = PlatformSpec.load(platform_object(stack))
    (price,) = [r["expr"] for r in cost_rules(planned(stack)) if r["record"] == PRICE]
    priced = {p: float(v) for v, p in re.findall(r'vector\(([0-9.e+-]+)\), "pool", "([^"]+)"', price)}
    want = {c.pool: c.hourly / c.gpus_per_node for c in pool_costs(spec) if c.gpu}
    assert priced == pytest.approx(want)


def test_the_cost_dashboard_reads_only_recorded_series():
    board = dashboards()["cost.json"]
    assert board["title"] == "trainplane / Cost"
    used = {n for p in board["panels"] for t in p["targets"] for n in metric_names(t["expr"])}
    assert used and used <= recorded(), used - recorded()


def test_nodes_are_mapped_to_pools_by_our_service_monitor_not_a_chart_value():
    result = planned("aws-dev")
    values = one(result, "kubernetes:helm.sh/v3:Release", "ml-dev-observability-prometheus").inputs["values"]
    # metricLabelsAllowlist is the kube-state-metrics subchart's: the team's values checker knows only the
    # parent chart's keys, so the node -> pool map comes from a ServiceMonitor of our own instead.
    assert "kube-state-metrics" not in values
    (sm,) = [r for r in result.resources if r.type.endswith("ServiceMonitor")]
    spec = sm.inputs["spec"]
    assert sm.inputs["metadata"] == {"name": "trainplane-node-pools", "namespace": "monitoring"}
    assert spec["attachMetadata"] == {"node": True}
    assert spec["selector"]["matchLabels"]["app.kubernetes.io/name"] == "prometheus-node-exporter"
    (ep,) = spec["endpoints"]
    copies = {r.get("targetLabel"): (r.get("sourceLabels") or [None])[0] for r in ep["relabelings"]}
    assert copies == {
        "job": None,
        "node": "__meta_kubernetes_endpoint_node_name",
        "pool": "__meta_kubernetes_node_label_trainplane_dev_pool",
        "capacity": "__meta_kubernetes_node_label_trainplane_dev_capacity",
    }
    assert ep["relabelings"][0]["replacement"] == "trainplane-node-pools"
    # Every scraped sample is dropped: only the scrape's own series (up) are stored.
    assert ep["metricRelabelings"] == [{"action": "drop", "sourceLabels": ["__name__"], "regex": ".+"}]


def test_a_pool_owner_must_be_a_team_and_the_pool_reserved():
    platform = platform_object("aws-h100-reserved")
    pools = {p["name"]: p for p in platform["nodePools"]}
    pools["h100-odcr"]["owner"] = "finance"
    pools["h100-od"]["owner"] = "research"
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(platform)
    text = "\n".join(e.value.problems)
    assert "nodePools[2].owner: 'finance' is not a team of this platform; known: eval, research" in text
    assert "nodePools[3].owner: only for capacity reservation or capacity-block" in text


def test_plan_shows_the_month_and_what_reserved_capacity_costs_idle():
    """aws-h100-reserved: minimum $189.24/h (the reservations, 4 + 2 p5.48xlarge at the override's $31.46,
    plus the system pool and control plane) is $138,145.20 over 730 hours; the Capacity Block alone is
    4 x $31.46 = $125.84/h, $91,863.20 a month, idle or not."""
    from infra.plan import estimate_cost
    from infra.plan_output import monthly_lines

    lines = monthly_lines(estimate_cost(PlatformSpec.load(platform_object("aws-h100-reserved"))))
    assert lines[0] == "per month (730 h): $138,145.20 at the minimum scale, $371,467.80 at the maximum"
    assert lines[1].startswith(
        "reserved h100-block: 4 nodes x $31.46/h = $91,863.20/month, used or not; while idle it costs $125.84/h"
    )
    assert lines[2].startswith("reserved h100-odcr: 2 nodes x $31.46/h = $45,931.60/month")
    # A cloud that sells no machines prints no month (nothing is priced).
    assert monthly_lines(estimate_cost(PlatformSpec.load(platform_object("onprem-dev")))) == []
