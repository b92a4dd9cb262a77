"""Rendered objects validate strictly against Kubernetes 1.33-1.35; Helm values use only upstream keys;
`render` writes one file per object with kind and namespace in the path."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from infra.render import helm_releases, kubernetes_objects, render
from tests.helpers.jobs import reference_plan as reference_job_plan
from tests.helpers.plans import ROOT, planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

STACKS = ["aws-dev", "gcp-dev", "onprem-dev"]
VERSIONS = ["1.33", "1.34", "1.35"]
# Kinds of CRDs installed by charts; kubernetes-validate ships only built-in schemas. Their shape is
# asserted field by field in test_k8s_observability.py and test_k8s_queueing.py.
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "PrometheusRule"): "kube-prometheus-stack CRD",
    ("monitoring.coreos.com/v1", "PodMonitor"): "kube-prometheus-stack CRD",
    # Our node-pools ServiceMonitor (cost rules): validated against its CRD by ../shared/checks/crd_validate.py
    # (tests/integration/infra/test_program.py).
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "kube-prometheus-stack CRD",
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): "Kueue CRD",
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): "Kueue CRD",
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): "Kueue CRD",
    # GKE multi-networking (GPUDirect pools): validated against gke-networking-api v0.2.0 by
    # ../shared/checks/crd_validate.py; shape asserted in test_gcp_fabric.py.
    ("networking.gke.io/v1", "Network"): "GKE multi-networking CRD",
    ("networking.gke.io/v1", "GKENetworkParamSet"): "GKE multi-networking CRD",
    ("kueue.x-k8s.io/v1beta2", "Topology"): "Kueue CRD",
    # Validated against their CRDs with ../shared/checks/crd_validate.py (test_training_job.py,
    # test_k8s_queueing.py).
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "JobSet CRD",
}
REFERENCE_CHARTS = ROOT.parent / "shared" / "reference" / "charts"
# Keys the chart's templates read although its defaults only document them in a comment
# (loki 18.11.0 templates/_helpers.tpl reads bucketNames.chunks and .ruler, and nothing else of it).
DOCUMENTED_ONLY = {
    ("loki", "loki.storage.bucketNames.chunks"),
    ("loki", "loki.storage.bucketNames.ruler"),
}
# Maps a chart passes through key by key, so any key is valid: cluster-autoscaler 9.59.0 values.yaml
# "extraArgs -- Additional container arguments" (each key becomes a --flag of the container).
FREE_FORM = {("cluster-autoscaler", "extraArgs")}


def plan(stack: str):
    return planned(stack)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("stack", STACKS)
def test_objects_validate_strictly(stack, version):
    objects = kubernetes_objects(plan(stack))
    kinds = {o["kind"] for o in objects}
    assert {"Namespace", "NetworkPolicy", "PersistentVolume", "ResourceQuota", "Role"} <= kinds
    errors = []
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {e.message}")
    assert not errors, errors


def test_only_the_named_crd_kinds_are_skipped():
    builtin = (
        "v1",
        "apps/v1",
        "batch/v1",
        "rbac.authorization.k8s.io/v1",
        "networking.k8s.io/v1",
        "storage.k8s.io/v1",
    )
    seen = {(o["apiVersion"], o["kind"]) for s in STACKS for o in kubernetes_objects(plan(s))}
    # Training jobs bring their PodMonitor in the job stack.
    seen |= {(o["apiVersion"], o["kind"]) for o in kubernetes_objects(reference_job_plan())}
    assert {k for k in seen if k[0] not in builtin} == set(CRD_KINDS)


def unknown_keys(values, defaults, path=""):
    """Keys of `values` the defaults do not have; an unknown map is reported by its leaves."""
    if not isinstance(values, dict) or not isinstance(defaults, dict) or not defaults:
        return []
    out = []
    for k, v in values.items():
        p = f"{path}.{k}" if path else k
        if k not in defaults:
            out += [f"{p}.{leaf}" for leaf in v] if isinstance(v, dict) and v else [p]
        else:
            out += unknown_keys(v, defaults[k], p)
    return out


@pytest.mark.skipif(not REFERENCE_CHARTS.is_dir(), reason="upstream chart defaults not on this machine")
@pytest.mark.parametrize("stack", STACKS)
def test_helm_values_use_only_upstream_keys(stack):
    charts = set()
    for rel in helm_releases(plan(stack)):
        chart = rel["chart"].rsplit("/", 1)[-1]
        ref = REFERENCE_CHARTS / f"{chart}-{rel['version']}.values.yaml"
        if not ref.is_file():  # verbatim upstream files ../shared/reference does not keep
            ref = ROOT / "tests" / "data" / "charts" / ref.name
        assert ref.is_file(), f"no upstream defaults for {chart} {rel['version']}"
        defaults = yaml.safe_load(ref.read_text())
        bad = [
            k
            for k in unknown_keys(rel["values"], defaults)
            if (chart, k) not in DOCUMENTED_ONLY and (chart, k.split(".", 1)[0]) not in FREE_FORM
        ]
        assert not bad, (chart, bad)
        charts.add(chart)
    # Every chart the in-cluster layer installs is checked, Alloy included.
    assert {"gpu-operator", "kube-prometheus-stack", "loki", "alloy", "kueue"} <= charts


def test_loki_is_sent_only_bucket_names_its_templates_read():
    values = next(r for r in helm_releases(plan("aws-dev")) if r["chart"] == "loki")["values"]
    assert set(values["loki"]["storage"]["bucketNames"]) == {"chunks", "ruler"}


def test_alloy_env_is_the_charts_own():
    """alloy 1.11.1 templates/containers/_agent.yaml already sets HOSTNAME from spec.nodeName."""
    values = next(r for r in helm_releases(plan("gcp-dev")) if r["chart"] == "alloy")["values"]
    assert "extraEnv" not in values["alloy"]
    assert 'sys.env("HOSTNAME")' in values["alloy"]["configMap"]["content"]


def test_render_writes_one_file_per_object_with_kind_and_namespace(tmp_path):
    result = plan("aws-dev")
    files = render(result, tmp_path)
    objects = kubernetes_objects(result)
    assert len(files) == len(objects) + len(helm_releases(result))
    netpol = yaml.safe_load((tmp_path / "research" / "NetworkPolicy-allow-dns.yaml").read_text())
    assert netpol["kind"] == "NetworkPolicy" and netpol["metadata"]["namespace"] == "research"
    # Numbers come back as integers (the mock engine hands floats).
    assert netpol["spec"]["egress"][0]["ports"][0]["port"] == 53
    pv = yaml.safe_load((tmp_path / "_cluster" / "PersistentVolume-datasets-research.yaml").read_text())
    assert pv["spec"]["csi"]["driver"] == "fsx.csi.aws.com"
    values_file = tmp_path / "helm" / "gpu-operator" / "gpu-operator.values.yaml"
    text = values_file.read_text()
    assert text.startswith(
        "# chart: gpu-operator  version: v26.7.0  repo: https://helm.ngc.nvidia.com/nvidia"
    )
    assert yaml.safe_load(text)["driver"] == {"enabled": False}
    for f in files:
        assert f.is_file() and f.is_relative_to(tmp_path)


def test_cli_render_writes_the_onprem_stack(tmp_path):
    from infra.cli import main

    assert main(["render", "onprem-dev", "--out", str(tmp_path)]) == 0
    ns = yaml.safe_load((tmp_path / "_cluster" / "Namespace-research.yaml").read_text())
    assert ns["metadata"]["labels"]["trainplane.dev/team"] == "research"
    assert (tmp_path / "helm" / "monitoring" / "loki.values.yaml").is_file()


def test_render_writes_the_same_bytes_whatever_order_the_engine_gave_the_keys(tmp_path):
    """The engine's key order changes between processes; the rendered files must not (GitOps diffs)."""
    import dataclasses

    def reversed_keys(value):
        if isinstance(value, dict):
            return {k: reversed_keys(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [reversed_keys(v) for v in value]
        return value

    result = plan("onprem-dev")
    shuffled = dataclasses.replace(
        result,
        resources=[dataclasses.replace(r, inputs=reversed_keys(dict(r.inputs))) for r in result.resources],
    )
    one_way = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in render(result, tmp_path / "a")}
    other = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in render(shuffled, tmp_path / "b")}
    assert one_way == other
    ns = (tmp_path / "a" / "_cluster" / "Namespace-research.yaml").read_text()
    assert ns.splitlines()[:3] == ["apiVersion: v1", "kind: Namespace", "metadata:"]
