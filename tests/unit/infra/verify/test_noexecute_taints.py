"""A pool taint with `effect: NoExecute` (docs/configuration.md allows it) must not keep the GPU node
DaemonSets off the pool: they used to tolerate NoSchedule only, while docs/in-cluster.md said they
tolerate every pool taint. verify's scheduling check is what catches a DaemonSet that does not."""

from __future__ import annotations

import functools

import pytest

from infra.verify.model import Plan
from tests.helpers.plans import platform_object
from tests.helpers.verify_plans import edit, lines, plan_of, release, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

TAINT = {"key": "example.com/dedicated", "value": "llm", "effect": "NoExecute"}
TOLERATION = {"key": "example.com/dedicated", "operator": "Exists", "effect": "NoExecute"}


@functools.cache
def noexec_plan() -> Plan:
    obj = platform_object("aws-h200-efa")
    pool = obj["nodePools"][1]
    assert pool["name"] == "h200-spot" and pool["efa"]
    pool["taints"] = [TAINT]
    return plan_of(obj, "noexec")


def _values(p: Plan, chart: str) -> dict:
    (r,) = [r for r in p.resources if release(chart)(r)]
    return r.inputs["values"]


def test_gpu_node_daemonsets_tolerate_the_taint_with_its_effect():
    p = noexec_plan()
    operator = _values(p, "gpu-operator")
    assert TOLERATION in operator["daemonsets"]["tolerations"]
    assert TOLERATION in operator["node-feature-discovery"]["worker"]["tolerations"]
    assert TOLERATION in _values(p, "aws-efa-k8s-device-plugin")["tolerations"]
    assert TOLERATION in _values(p, "kube-prometheus-stack")["prometheus-node-exporter"]["tolerations"]
    diag = [r for r in p.resources if r.type == "kubernetes:apps/v1:DaemonSet"]
    assert diag and all(TOLERATION in r.inputs["spec"]["template"]["spec"]["tolerations"] for r in diag)


def test_the_stack_with_a_noexecute_taint_passes_verify():
    assert lines(run(noexec_plan(), "scheduling")) == []


def test_verify_catches_operator_daemonsets_that_tolerate_noschedule_only():
    # What the operator got before: every key, effect NoSchedule.
    def noschedule_only(inputs: dict) -> None:
        for t in inputs["values"]["daemonsets"]["tolerations"]:
            t["effect"] = "NoSchedule"

    report = run(edit(noexec_plan(), release("gpu-operator"), noschedule_only), "scheduling")
    bad = [line for line in lines(report) if "nvidia-device-plugin-daemonset" in line]
    assert bad == [
        "scheduling: DaemonSet gpu-operator/nvidia-device-plugin-daemonset (GPU device plugin, helm release "
        "gpu-operator/gpu-operator (gpu-operator v26.7.0)) does not tolerate taint "
        "example.com/dedicated=llm:NoExecute of GPU pool h200-spot: it never runs there"
    ]
