"""Spot notice: an AWS platform with spot pools installs aws-node-termination-handler in IMDS mode on
the spot nodes, and verify fails a spot GPU pool that nothing drains on EC2's two-minute notice."""

from __future__ import annotations

import pytest
import yaml

from components.aws.spot_notice import CAPACITY_LABEL, spot_notice_values
from components.charts import chart
from infra.verify import facts as F
from tests.helpers.plans import ROOT
from tests.helpers.verify_plans import edit, lines, plan, release, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NTH = "aws-node-termination-handler"


def test_the_plan_of_a_spot_stack_installs_the_handler_on_spot_nodes():
    (rel,) = plan("aws-dev").releases(NTH)
    assert rel.namespace == "kube-system"
    values = rel.values
    assert values["daemonsetNodeSelector"] == {CAPACITY_LABEL: "SPOT"}
    assert (
        values["enableSqsTerminationDraining"] is False and values["enableSpotInterruptionDraining"] is True
    )
    # drain at once, each pod with its own grace period (the trainer's preemption checkpoint time)
    assert values["nodeTerminationGracePeriod"] == 120 and values["podTerminationGracePeriod"] == -1
    assert "daemonsetTolerations" not in values  # the chart default tolerates every taint (GPU nodes)
    assert chart(NTH).repo.startswith("oci://") and chart(NTH).version == "0.27.6"


def test_no_handler_without_spot_pools():
    assert plan("aws-h100-reserved").releases(NTH)  # it has a spot pool too
    assert spot_notice_values()["enableRebalanceDraining"] is False


def test_verify_fails_a_spot_gpu_pool_without_the_handler():
    def sqs_mode(inputs: dict) -> None:  # queue-processor mode renders a Deployment, no DaemonSet
        inputs["values"]["enableSqsTerminationDraining"] = True

    clean = run(plan("aws-dev"), "scheduling")
    assert not any("interruption notice" in line for line in lines(clean)), lines(clean)
    report = run(edit(plan("aws-dev"), release(NTH), sqs_mode), "scheduling")
    bad = [line for line in lines(report) if "interruption notice" in line]
    assert bad and "GPU pool h100" in bad[0] and "aws-node-termination-handler" in bad[0], lines(report)


def test_verify_fails_a_handler_that_does_not_tolerate_the_gpu_taint():
    def no_tolerations(inputs: dict) -> None:
        inputs["values"]["daemonsetTolerations"] = [{"key": "other", "operator": "Exists"}]

    report = run(edit(plan("aws-dev"), release(NTH), no_tolerations), "scheduling")
    bad = [line for line in lines(report) if NTH in line and "does not tolerate" in line]
    assert bad and "pool h100" in bad[0], lines(report)


# Verbatim copy of aws/aws-node-termination-handler tag v1.25.6 (77ca841)
# config/helm/aws-node-termination-handler/values.yaml (chart 0.27.6): not in ../shared/reference/charts.
VALUES = ROOT / "tests" / "data" / "charts" / "aws-node-termination-handler-0.27.6.values.yaml"


def test_facts_and_sent_values_match_the_charts_own_values():
    defaults = yaml.safe_load(VALUES.read_text())
    facts = F.facts()["charts"][NTH]
    assert facts["version"] == chart(NTH).version == "0.27.6"
    for key, value in facts["defaults"].items():
        assert F.dig(defaults, key) == value, key
    # IMDS with hop limit 1 (the node groups' launch templates) is reachable from the host network only
    assert defaults["useHostNetwork"] is True and "useHostNetwork" not in spot_notice_values()
    unknown = [k for k in spot_notice_values() if k not in defaults]
    assert not unknown, f"keys the chart does not have: {unknown}"


def test_verify_notes_that_gke_spot_gives_training_pods_less_than_they_ask():
    report = run(plan("gcp-dev"), "scheduling")
    notes = [n for n in report.check("scheduling").notes if "GKE spot pool" in n]
    assert notes and "h100" in notes[0] and "15 s" in notes[0] and "ask 60 s" in notes[0], notes
    assert report.ok  # a property of the GKE version, not a wrong plan
