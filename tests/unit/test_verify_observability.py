"""verify observability: alert rules and dashboard queries select labels the scrape configuration
produces (exporter labels, target labels, honorLabels, relabelings); rules pass `promtool check rules`."""

from __future__ import annotations

from infra.verify.checks.scrape_labels import ScrapeSpec, scraped_labels
from tests.helpers.verify_plans import (
    probe,
)


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
