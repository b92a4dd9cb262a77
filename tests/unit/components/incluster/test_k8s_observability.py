"""Observability: Prometheus picks up DCGM and trainer metrics, dashboards and alerts name only known
metrics, Loki stores on the cloud bucket with the cloud identity, Alloy labels logs."""

from __future__ import annotations

import json
import re

import pytest

from components.incluster.alerts import alert_groups
from components.incluster.cost_rules import cost_groups
from components.incluster.dashboards import dashboards
from components.incluster.dashboards.metrics import (
    ALLOWED_METRICS,
    DCGM_METRICS,
    RECORDED_METRICS,
    TRAINER_METRICS,
)
from components.incluster.idle_rules import idle_groups
from components.incluster.logs import alloy_config
from contract.recovery import (
    ALERT_QUARANTINED,
    ALERT_REPLACE_NEEDED,
    ALERT_STRAGGLER,
    BADPUT_SECONDS,
    GOODPUT_RATIO,
    GOODPUT_TEAM_RATIO,
    STRAGGLER_RATIO,
)
from tests.helpers.plans import plan_object, planned, platform_object
from tests.helpers.promql import all_exprs, metric_names

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

RELEASE = "kubernetes:helm.sh/v3:Release"


def plan(stack: str):
    return planned(stack)


def release(result, chart: str):
    (r,) = [r for r in result.of_type(RELEASE) if r.inputs["chart"].rsplit("/", 1)[-1] == chart]
    return r


# ---- PromQL: every selector names an allowed metric ------------------------------------------


def test_metric_name_parser_sees_through_functions_and_labels():
    assert metric_names('sum by (namespace, job) (increase(trainplane_restarts_total{job=~"$job"}[1h]))') == {
        "trainplane_restarts_total"
    }
    assert metric_names("a_metric and on (node) other > 0") == {"a_metric", "other"}
    assert metric_names('label_values(trainplane_step{namespace=~"$namespace"}, job)') == {"trainplane_step"}


def test_dashboards_and_alerts_name_only_dcgm_trainer_and_kube_state_metrics():
    bad = {(where, n) for where, e in all_exprs() for n in metric_names(e) if n not in ALLOWED_METRICS}
    assert not bad, bad
    used = {n for _, e in all_exprs() for n in metric_names(e)}
    for name in used:
        assert (
            name.startswith("DCGM_FI_")
            or name in TRAINER_METRICS
            or name.startswith("kube_")
            or name in RECORDED_METRICS
        ), name
    # The GPU dashboard covers utilisation, memory, tensor activity, power and XIDs.
    assert {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
    } <= used & DCGM_METRICS
    assert {
        "trainplane_tokens_per_second",
        "trainplane_loss",
        "trainplane_step_seconds",
        "trainplane_checkpoint_save_seconds",
        "trainplane_restarts",
        "trainplane_resumes",
        "trainplane_preemptions",
        "trainplane_rank_step_seconds",
        "trainplane_hangs_total",
        "trainplane_checkpoint_save_failures_total",
    } <= used


def test_training_dashboard_shows_stragglers_against_the_job_median():
    board = dashboards()["training.json"]
    (panel,) = [p for p in board["panels"] if "straggler" in p["title"].lower()]
    exprs = [t["expr"] for t in panel["targets"]]
    assert any(e.startswith("max by (namespace, job, rank) (trainplane_rank_step_seconds") for e in exprs)
    assert any(e.startswith("quantile by (namespace, job) (0.5,") for e in exprs)


def test_dashboards_are_valid_grafana_json():
    boards = dashboards()
    assert set(boards) == {"gpu.json", "training.json", "cost.json"}
    uids = set()
    for name, board in boards.items():
        assert board["uid"] not in uids and len(board["uid"]) <= 40, name
        uids.add(board["uid"])
        assert isinstance(board["schemaVersion"], int) and board["title"]
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids"
        for p in board["panels"]:
            assert p["type"] in {"timeseries", "stat", "table", "gauge"}
            g = p["gridPos"]
            assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, (name, p["title"])
            assert p["datasource"]["uid"] == "${datasource}"
            assert [t["refId"] for t in p["targets"]] == [chr(65 + i) for i in range(len(p["targets"]))]
        variables = {v["name"] for v in board["templating"]["list"]}
        used = set(re.findall(r"\$(\w+)", json.dumps(board["panels"])))
        assert used <= variables, (name, used - variables)


def test_alert_rules_cover_gpu_faults_nodes_and_training_jobs():
    rules = {r["alert"]: r for g in alert_groups() for r in g["rules"] if "alert" in r}
    assert set(rules) == {
        "GpuIdleButAllocated",
        "GpuXidError",
        "GpuEccUncorrectableErrors",
        "GpuRowRemapFailure",
        "GpuRowRemapPending",
        "GpuNvlinkRecoveryErrors",
        "GpuNvlinkErrors",
        "GpuThermalThrottling",
        "GpuHardwareSlowdown",
        "GpuNodeNotReady",
        "GpuNodeMissingGpus",
        "GpuNodeDiagnosticPending",
        "TrainingJobStalled",
        "TrainingJobHang",
        ALERT_STRAGGLER,
        ALERT_QUARANTINED,
        ALERT_REPLACE_NEEDED,
        "TrainingCheckpointSaveFailures",
    }
    assert 'pod!=""' in rules["GpuIdleButAllocated"]["expr"]
    assert 'resource="nvidia_com_gpu"' in rules["GpuNodeNotReady"]["expr"]
    for r in rules.values():
        assert re.fullmatch(r"\d+[smh]", r["for"]) and r["labels"]["severity"] in {"warning", "critical"}
    # Each rule's behaviour on synthetic series is in tests/integration/components/incluster/test_alert_rules.py (promtool).


def test_no_rule_or_panel_reads_labels_the_dcgm_scrape_does_not_produce():
    # Hostname is the exporter's own node label (renamed hostname on dcgm-exporter main); exported_* only
    # exist without honorLabels. `node` comes from the ServiceMonitor's relabeling.
    for where, expr in all_exprs():
        assert not re.search(r"\b(Hostname|hostname|exported_\w+)\b", expr), (where, expr)


def test_ignored_xids_come_from_config():
    obj = platform_object("onprem-dev")
    obj["gpuHealth"] = {"ignoredXids": [13, 31, 43, 45, 68, 109, 94]}
    (cr,) = [c for c in plan_object(obj).resources if c.type.endswith("PrometheusRule")]
    (xid,) = [r for g in cr.inputs["spec"]["groups"] for r in g["rules"] if r.get("alert") == "GpuXidError"]
    assert "!= 94" in xid["expr"]
    (default,) = [r for g in alert_groups() for r in g["rules"] if r.get("alert") == "GpuXidError"]
    assert "!= 94" not in default["expr"] and "!= 13" in default["expr"]


def _rules_of(obj: dict) -> dict[str, dict]:
    (cr,) = [c for c in plan_object(obj).resources if c.type.endswith("PrometheusRule")]
    return {r.get("alert") or r["record"]: r for g in cr.inputs["spec"]["groups"] for r in g["rules"]}


def test_straggler_and_replacement_alerts_follow_gpu_health_settings():
    obj = platform_object("onprem-dev")
    defaults = _rules_of(obj)
    # gpuHealth.stragglers defaults: factor 1.25 for 15 minutes; quarantine.replaceAfterMinutes 30 (+15
    # for the pool's replacement to take the node away)
    assert defaults[ALERT_STRAGGLER]["expr"] == f"{STRAGGLER_RATIO} > 1.25"
    assert defaults[ALERT_STRAGGLER]["for"] == "15m"
    assert defaults[ALERT_REPLACE_NEEDED]["for"] == "45m" and defaults[ALERT_QUARANTINED]["for"] == "0m"
    obj["gpuHealth"] = {
        "stragglers": {"factor": 1.5, "forMinutes": 30},
        "quarantine": {"replaceAfterMinutes": 60},
    }
    rules = _rules_of(obj)
    assert (
        rules[ALERT_STRAGGLER]["expr"] == f"{STRAGGLER_RATIO} > 1.5"
        and rules[ALERT_STRAGGLER]["for"] == "30m"
    )
    assert "1.5x" in rules[ALERT_STRAGGLER]["annotations"]["summary"]
    assert rules[ALERT_REPLACE_NEEDED]["for"] == "75m"
    # the recording rules are there whatever the settings, each recorded by name
    assert {BADPUT_SECONDS, GOODPUT_RATIO, GOODPUT_TEAM_RATIO, STRAGGLER_RATIO} <= set(rules)
    # ...and every recorded name (these and the cost rules') is one dashboards and rules may read
    groups = alert_groups() + cost_groups([]) + idle_groups([])
    assert {r["record"] for g in groups for r in g["rules"] if "record" in r} == RECORDED_METRICS


def test_training_pod_monitor_leaves_rank_to_the_trainer():
    from components.incluster.observability import trainer_pod_monitor

    (endpoint,) = trainer_pod_monitor("gpt-small")["podMetricsEndpoints"]
    targets = {r["targetLabel"]: r["sourceLabels"] for r in endpoint["relabelings"]}
    # The trainer labels per-GPU series with the global rank; a `rank` target label would rename it
    # exported_rank. The pod's completion index becomes node_rank.
    assert targets == {
        # trainplane's job label: on the pods of both runtimes (a JobSet's pods carry their child Job's
        # name in batch.kubernetes.io/job-name).
        "job": ["__meta_kubernetes_pod_label_trainplane_dev_job"],
        "node_rank": ["__meta_kubernetes_pod_label_batch_kubernetes_io_job_completion_index"],
        # the straggler alert names the rank's node (the GPU health controller quarantines it)
        "node": ["__meta_kubernetes_pod_node_name"],
    }


# ---- what the program sends ------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_prometheus_selects_every_monitor_and_rule(stack):
    result = plan(stack)
    r = release(result, "kube-prometheus-stack")
    assert r.inputs["version"] == "88.5.3" and r.inputs["namespace"] == "monitoring"
    prom = r.inputs["values"]["prometheus"]["prometheusSpec"]
    assert prom["serviceMonitorSelectorNilUsesHelmValues"] is False  # DCGM exporter's ServiceMonitor
    assert prom["podMonitorSelectorNilUsesHelmValues"] is False
    assert prom["ruleSelectorNilUsesHelmValues"] is False
    assert prom["retention"] == "15d"
    assert prom["storageSpec"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "100Gi"
    grafana = r.inputs["values"]["grafana"]
    assert grafana["sidecar"]["dashboards"]["label"] == "grafana_dashboard"
    (loki_ds,) = grafana["additionalDataSources"]
    assert loki_ds["type"] == "loki" and loki_ds["url"] == "http://loki-gateway.monitoring.svc.cluster.local"

    maps = [
        c
        for c in result.of_type("kubernetes:core/v1:ConfigMap")
        if c.inputs["metadata"]["namespace"] == "monitoring"
    ]
    assert {m["metadata"]["labels"]["grafana_dashboard"] for m in (c.inputs for c in maps)} == {"1"}
    shipped = {k: json.loads(v) for m in maps for k, v in m.inputs["data"].items()}
    assert shipped == dashboards()

    crs = {
        c.inputs["kind"]: c for c in result.resources if c.type.startswith("kubernetes:monitoring.coreos.com")
    }
    # Training jobs bring their own PodMonitor (components/incluster/training_job.py); the ServiceMonitor
    # maps nodes to pools for the cost rules (components/incluster/cost_rules.py).
    assert set(crs) == {"PrometheusRule", "ServiceMonitor"}
    for cr in crs.values():  # CRDs first: the rule waits for the release that installs them
        assert r.urn in cr.deps
    # Dashboards (ConfigMaps) need no CRD and are not serialised behind the release.
    assert all(r.urn not in m.deps for m in maps)


def test_retention_and_storage_come_from_config():
    obj = platform_object("onprem-dev")
    obj["observability"].update({"retentionDays": 30, "prometheusStorageGiB": 500, "grafana": False})
    result = plan_object(obj)
    values = release(result, "kube-prometheus-stack").inputs["values"]
    assert values["prometheus"]["prometheusSpec"]["retention"] == "30d"
    assert values["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"][
        "resources"
    ] == {"requests": {"storage": "500Gi"}}
    assert values["grafana"] == {"enabled": False}
    assert not [c for c in result.of_type("kubernetes:core/v1:ConfigMap") if "dashboard" in c.name]


@pytest.mark.parametrize(
    ("stack", "type_", "annotation", "identity"),
    [
        (
            "aws-dev",
            "s3",
            "eks.amazonaws.com/role-arn",
            "arn:aws:iam::123456789012:role/ml-dev-identity-loki-role",
        ),
        (
            "gcp-dev",
            "gcs",
            "iam.gke.io/gcp-service-account",
            "ml-dev-loki@example-ml-dev.iam.gserviceaccount.com",
        ),
    ],
)
def test_loki_on_the_cloud_bucket_with_the_cloud_identity(stack, type_, annotation, identity):
    values = release(plan(stack), "loki").inputs["values"]
    storage = values["loki"]["storage"]
    assert storage["type"] == type_
    # The logs bucket the cloud layer made (its name as the platform exports it).
    assert storage["bucketNames"]["chunks"] == planned(stack).outputs["buckets"]["logs"]
    assert values["loki"]["schemaConfig"]["configs"][0]["object_store"] == type_
    assert values["serviceAccount"] == {"create": True, "name": "loki", "annotations": {annotation: identity}}
    assert values["loki"]["structuredConfig"]["limits_config"]["retention_period"] == f"{14 * 24}h"
    if type_ == "s3":
        assert storage["s3"] == {"region": "us-east-1"}


def test_loki_on_the_filesystem_on_existing_clusters():
    values = release(plan("onprem-dev"), "loki").inputs["values"]
    assert values["loki"]["storage"] == {"type": "filesystem"}
    assert values["serviceAccount"] == {"create": True, "name": "loki"}


def test_no_loki_when_disabled():
    obj = platform_object("aws-dev")
    obj["observability"]["loki"] = False
    result = plan_object(obj)
    charts = {r.inputs["chart"] for r in result.of_type(RELEASE)}
    assert "loki" not in charts and "alloy" not in charts
    assert "additionalDataSources" not in release(result, "kube-prometheus-stack").inputs["values"]["grafana"]


def test_alloy_ships_pod_logs_with_job_and_rank_labels():
    r = release(plan("aws-dev"), "alloy")
    assert r.inputs["repositoryOpts"] == {"repo": "https://grafana.github.io/helm-charts"}
    values = r.inputs["values"]
    assert values["controller"]["type"] == "daemonset"
    config = values["alloy"]["configMap"]["content"]
    assert config == alloy_config()
    pairs = re.findall(r'source_labels = \["([^"]+)"\]\s*target_label\s*= "([^"]+)"', config)
    assert dict((t, s) for s, t in pairs) == {
        "namespace": "__meta_kubernetes_namespace",
        "pod": "__meta_kubernetes_pod_name",
        "container": "__meta_kubernetes_pod_container_name",
        "job": "__meta_kubernetes_pod_label_trainplane_dev_job",
        "node_rank": "__meta_kubernetes_pod_label_batch_kubernetes_io_job_completion_index",
    }
    assert 'url = "http://loki-gateway.monitoring.svc.cluster.local/loki/api/v1/push"' in config
    assert config.count("{") == config.count("}")


def test_training_dashboard_shows_goodput_badput_by_cause_and_team_goodput():
    board = dashboards()["training.json"]
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in board["panels"]}
    (goodput,) = [e for t, e in exprs.items() if t.startswith("Goodput")]
    (team,) = [e for t, e in exprs.items() if t.startswith("Team goodput")]
    (badput,) = [e for t, e in exprs.items() if t.startswith("Badput by cause")]
    assert goodput == [f'{GOODPUT_RATIO}{{namespace=~"$namespace", job=~"$job"}}']
    assert team == [f'{GOODPUT_TEAM_RATIO}{{namespace=~"$namespace"}}']
    assert badput == [f'{BADPUT_SECONDS}{{namespace=~"$namespace", job=~"$job"}}']
