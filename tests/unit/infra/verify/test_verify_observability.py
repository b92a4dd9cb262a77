"""verify observability: alert rules and dashboard queries select labels the scrape configuration
produces (exporter labels, target labels, honorLabels, relabelings); rules pass `promtool check rules`."""

from __future__ import annotations

import pytest

from infra.verify.checks.scrape_labels import ScrapeSpec, scraped_labels
from tests.helpers.verify_plans import (
    probe,
)

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def test_a_label_no_exporter_emits_is_reported():
    assert probe('max by (gpu) (DCGM_FI_DEV_GPU_UTIL{gpu="0"}) > 0') == []
    bad = probe('max by (node_name) (DCGM_FI_DEV_GPU_UTIL{gpu="0"}) > 0')
    assert bad and "'node_name', which DCGM_FI_DEV_GPU_UTIL does not carry" in bad[0], bad


def test_honor_labels_false_gives_dcgm_pod_to_the_exporter_pod():
    bad = probe('avg by (pod) (DCGM_FI_DEV_GPU_UTIL{pod!=""}) < 5', honor=False)
    assert bad and "honorLabels false" in bad[0] and "exported_pod" in bad[0], bad
    assert probe('avg by (exported_pod) (DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}) < 5', honor=False) == []


def test_honor_labels_true_fills_the_pod_of_idle_gpus_from_the_target():
    bad = probe('avg by (pod) (DCGM_FI_DEV_GPU_UTIL{pod!=""}) < 5', honor=True)
    assert bad and "honorLabels true" in bad[0], bad


def test_a_metric_the_trainer_does_not_export_is_reported():
    bad = probe("max by (namespace, job) (trainplane_no_such_metric) > 0")
    assert bad and "not exported by the trainer" in bad[0], bad
    assert probe("max by (namespace, job, node_rank) (changes(trainplane_step[15m])) == 0") == []


def test_relabelings_add_and_drop_target_labels():
    spec = ScrapeSpec(
        "dcgm-exporter",
        "ServiceMonitor",
        True,
        ({"action": "labeldrop", "regex": "pod|namespace|container"},),
        "x",
    )
    labels = scraped_labels(spec, {"gpu"}, {"pod", "namespace", "container"})
    assert labels.labels["pod"] == "exporter" and "service" in labels.labels
    spec = ScrapeSpec("trainer", "PodMonitor", False, ({"targetLabel": "rank", "sourceLabels": ["x"]},), "x")
    assert "rank" in scraped_labels(spec, set(), set()).labels


def test_the_platforms_dcgm_scrape_gives_pod_only_to_gpus_a_workload_holds():
    # honorLabels plus the labeldrop of the exporter's own pod/namespace/container (gpu_operator.py).
    assert probe('avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{pod!=""}) < 5') == []


def test_excluding_the_exporters_namespace_resolves_the_mixed_labels():
    expr = 'avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{namespace!="gpu-operator", pod!=""}) < 5'
    assert probe(expr, honor=True) == []
    assert probe(expr.replace('namespace!="gpu-operator", ', ""), honor=True)


def test_recorded_series_carry_the_labels_their_rule_outputs():
    # trainplane's recording rules (goodput_rules.py): a query on a recorded series is judged by the
    # rule's output labels, label_replace's included, not refused as a metric of no exporter.
    assert probe('max by (namespace, job) (trainplane:goodput:ratio{job!=""}) < 0.5') == []
    assert probe('sum by (namespace, cause) (trainplane:badput_seconds{cause="down"}) > 0') == []
    assert probe("max by (node, rank) (trainplane:rank_straggler:ratio) > 1.5") == []
    bad = probe('max by (pod) (trainplane:goodput:ratio{pod!=""}) < 0.5')
    assert bad and "'pod', which trainplane:goodput:ratio does not carry" in bad[0], bad
    bad = probe("max by (job) (trainplane:team_goodput:ratio) < 0.5")
    assert bad and "'job', which trainplane:team_goodput:ratio does not carry" in bad[0], bad


# ---- cost rules cover every GPU pool (issue 20) ---------------------------------------------------------
def _drop_price_of(pool: str):
    def change(inputs: dict) -> None:
        for g in inputs["spec"]["groups"]:
            for r in g["rules"]:
                if r.get("record") == "trainplane:pool_gpu_hourly_price:dollars":
                    r["expr"] = " or ".join(p for p in r["expr"].split(" or ") if f'"{pool}"' not in p)

    return change


def test_a_gpu_pool_without_a_price_series_is_named():
    from tests.helpers.verify_plans import edit, kind, lines, plan, run

    broken = edit(plan("aws-h100-reserved"), kind("PrometheusRule"), _drop_price_of("h100-spot"))
    found = [line for line in lines(run(broken, "observability")) if "pool_gpu_hourly_price" in line]
    assert found == [
        "observability: PrometheusRule monitoring/trainplane: trainplane:pool_gpu_hourly_price:dollars has no "
        "price for GPU pool(s) h100-spot: their GPUs cost $0 in the cost rules and `trainplane cost` (give "
        "their machine a price in platform.pricing.overrides)"
    ]
    assert not [line for line in lines(run(plan("aws-h100-reserved"), "observability")) if "cost" in line]


def test_a_node_pool_service_monitor_that_copies_no_pool_is_named():
    from tests.helpers.verify_plans import edit, kind, lines, plan, run

    def drop_pool(inputs: dict) -> None:
        for ep in inputs["spec"]["endpoints"]:
            ep["relabelings"] = [r for r in ep["relabelings"] if r.get("targetLabel") != "pool"]

    broken = edit(plan("aws-dev"), kind("ServiceMonitor", "trainplane-node-pools"), drop_pool)
    found = lines(run(broken, "observability"))
    assert (
        "observability: PrometheusRule monitoring/trainplane: no ServiceMonitor sets job trainplane-node-pools "
        "and copies the node label trainplane.dev/pool (__meta_kubernetes_node_label_trainplane_dev_pool) into "
        "`pool` with attachMetadata.node: the cost rules find no node's pool, every GPU costs $0"
    ) in found, found
    # ...and the rules that join on it are named too: the label model knows what `up` of our ServiceMonitor
    # carries.
    assert any("'pool', which up does not carry" in line for line in found), found
    assert not [line for line in lines(run(plan("aws-dev"), "observability")) if "pool" in line]


def test_a_node_pool_service_monitor_without_node_metadata_is_named():
    from tests.helpers.verify_plans import edit, kind, lines, plan, run

    def no_meta(inputs: dict) -> None:
        inputs["spec"].pop("attachMetadata")

    found = lines(
        run(edit(plan("aws-dev"), kind("ServiceMonitor", "trainplane-node-pools"), no_meta), "observability")
    )
    assert any("no ServiceMonitor sets job trainplane-node-pools" in line for line in found), found


# ---- committed cost outside a block's dates is 0 (issue 30) -------------------------------------------
def test_a_capacity_block_charged_outside_its_dates_is_named():
    """The idle rule of before issue 30: the block's 32 GPUs a constant, paid before and after its dates."""
    import re

    from tests.helpers.verify_plans import edit, kind, lines, plan, run

    def undated(inputs: dict) -> None:
        for g in inputs["spec"]["groups"]:
            for r in g["rules"]:
                if r.get("record") == "trainplane:gpu_idle_cost:dollars_per_hour":
                    r["expr"] = re.sub(
                        r" \* \(time\(\) >= bool \d+\) \* \(time\(\) < bool \d+\)", "", r["expr"]
                    )

    rule = "committed cost outside a block's dates is 0"
    broken = edit(plan("aws-h100-reserved"), kind("PrometheusRule"), undated)
    found = [line for line in lines(run(broken, "observability")) if rule in line]
    assert len(found) == 2, found
    assert found[0].startswith(
        f"observability: PrometheusRule monitoring/trainplane: {rule}: trainplane:gpu_idle_cost:dollars_per_hour "
        "charges Capacity Block pool h100-block (blockStart 2026-12-01T11:30:00Z, blockEnd 2026-12-15T11:30:00Z) "
        "an hour before its start: promtool got:"
    ), found
    assert "an hour after its end" in found[1]
    assert not [line for line in lines(run(plan("aws-h100-reserved"), "observability")) if rule in line]
