"""cluster-autoscaler: its IAM policy (parsed), its Helm values, and the priority expander table."""

from __future__ import annotations

import re

import pytest
import yaml

from components.aws.autoscaler_images import AS_OF, IMAGES, SOURCE, image_tag
from components.charts import CHARTS
from tests.helpers.aws import NODE_GROUP, as_list, doc, one, plan
from tests.helpers.plans import ROOT

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

REFERENCE = ROOT.parent / "shared" / "reference"

MUTATING = {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"}


def _policy(stack: str) -> dict:
    result = plan(stack)
    name = one(result, "aws:eks/cluster:Cluster").inputs["name"]
    return doc(
        one(result, "aws:iam/rolePolicy:RolePolicy", f"{name}-autoscaler-irsa-policy").inputs["policy"]
    )


def test_mutating_autoscaling_actions_are_scoped_to_this_clusters_groups():
    result = plan("aws-h200-efa")
    statements = _policy("aws-h200-efa")["Statement"]
    node_groups = sorted(r.inputs["nodeGroupName"] for r in result.of_type(NODE_GROUP))
    for s in statements:
        actions = set(as_list(s["Action"]))
        assert "*" not in actions and "autoscaling:*" not in actions
        if actions & MUTATING:
            resources = as_list(s["Resource"])
            assert "*" not in resources
            assert sorted(resources) == sorted(
                f"arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/eks-{ng}-*"
                for ng in node_groups
            )
            assert s["Condition"] == {
                "StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/h200-train": "owned"}
            }
        elif "*" in as_list(s["Resource"]):
            # Only calls AWS cannot scope by resource may name "*".
            assert all(a.split(":")[1].startswith(("Describe", "Get")) for a in actions), actions
    granted = {a for s in statements for a in as_list(s["Action"])}
    assert MUTATING <= granted and "eks:DescribeNodegroup" in granted


def test_describe_nodegroup_is_limited_to_this_cluster():
    (stmt,) = [s for s in _policy("aws-dev")["Statement"] if "eks:DescribeNodegroup" in as_list(s["Action"])]
    assert as_list(stmt["Resource"]) == ["arn:aws:eks:us-east-1:123456789012:nodegroup/ml-dev/*/*"]


def test_autoscaler_role_trusts_only_its_service_account():
    result = plan("aws-dev")
    trust = doc(one(result, "aws:iam/role:Role", "ml-dev-autoscaler-irsa-role").inputs["assumeRolePolicy"])
    (stmt,) = trust["Statement"]
    cond = stmt["Condition"]["StringEquals"]
    host = "oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F6A7B"
    assert cond == {
        f"{host}:sub": "system:serviceaccount:kube-system:cluster-autoscaler",
        f"{host}:aud": "sts.amazonaws.com",
    }
    assert stmt["Principal"] == {"Federated": f"arn:aws:iam::123456789012:oidc-provider/{host}"}


def test_helm_release_is_pinned_and_wired_to_its_role_and_cluster():
    result = plan("aws-dev")
    (release,) = [
        r
        for r in result.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == "cluster-autoscaler"
    ]
    pinned = CHARTS["cluster-autoscaler"]
    assert (release.inputs["repositoryOpts"]["repo"], release.inputs["chart"], release.inputs["version"]) == (
        pinned.repo,
        pinned.chart,
        pinned.version,
    )
    values = release.inputs["values"]
    assert values["cloudProvider"] == "aws" and values["awsRegion"] == "us-east-1"
    assert values["autoDiscovery"] == {"clusterName": "ml-dev"}
    role = one(result, "aws:iam/role:Role", "ml-dev-autoscaler-irsa-role")
    sa = values["rbac"]["serviceAccount"]
    assert sa["name"] == "cluster-autoscaler"
    assert sa["annotations"] == {"eks.amazonaws.com/role-arn": f"arn:aws:iam::123456789012:role/{role.name}"}
    assert values["extraArgs"]["expander"] == "priority,least-waste"
    # aws-dev runs 1.35: the newest 1.35 release, pinned per minor (components/aws/autoscaler_images.py).
    assert values["image"] == {"tag": "v1.35.2"}
    assert release.inputs["namespace"] == "kube-system"


def test_priority_expander_prefers_spot_over_on_demand_of_the_same_gpu():
    result = plan("aws-h200-efa")
    cm = one(result, "kubernetes:core/v1:ConfigMap", "h200-train-autoscaler-priorities")
    assert cm.inputs["metadata"] == {
        "name": "cluster-autoscaler-priority-expander",
        "namespace": "kube-system",
    }
    table = yaml.safe_load(cm.inputs["data"]["priorities"])
    asgs = {}
    for ng in result.of_type(NODE_GROUP):
        asgs[ng.inputs["nodeGroupName"]] = ng  # the mock names ASGs like EKS: eks-<name>-<uuid>
    tags = {t.inputs["autoscalingGroupName"] for t in result.of_type("aws:autoscaling/tag:Tag")}

    def priority_of(asg: str) -> int:
        matched = [p for p, patterns in table.items() for pat in patterns if re.search(pat, asg)]
        assert len(matched) == 1, (asg, matched)
        return matched[0]

    by_group = {}
    for asg in tags:
        group = next(
            n
            for n in asgs
            if asg.startswith(f"eks-{n}-") and re.fullmatch(r"[0-9a-f-]{36}", asg[len(n) + 5 :])
        )
        by_group[group] = priority_of(asg)
    assert by_group["h200-train-h200-spot"] > by_group["h200-train-h200-od"]
    # A pattern of one group never matches another whose name merely starts the same way.
    assert not any(
        re.search(p, "eks-h200-train-h200-spot-x-" + "0" * 8 + "-0000-0000-0000-" + "0" * 12)
        for ps in table.values()
        for p in ps
    )


def test_priority_configmap_is_a_valid_kubernetes_object():
    import kubernetes_validate

    cm = one(plan("aws-dev"), "kubernetes:core/v1:ConfigMap", "ml-dev-autoscaler-priorities").inputs
    kubernetes_validate.validate(cm, "1.33", strict=True)


def test_each_minor_pins_an_image_of_that_minor_with_its_source():
    assert SOURCE and AS_OF
    for minor, pin in IMAGES.items():
        assert re.fullmatch(rf"v{re.escape(minor)}\.\d+", pin.tag), (minor, pin.tag)
        assert re.fullmatch(r"[0-9a-f]{7,40}", pin.commit) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", pin.tagged)
    assert [image_tag(m) for m in ("1.30", "1.31", "1.32")] == ["v1.30.7", "v1.31.5", "v1.32.7"]


def _patch(tag: str) -> tuple[int, ...]:
    return tuple(int(p) for p in tag.lstrip("v").split("."))


@pytest.mark.skipif(not (REFERENCE / "README.md").exists(), reason="../shared is not beside this checkout")
def test_no_minor_is_pinned_below_the_newest_release_the_reference_records():
    """reference/README.md records the newest cluster-autoscaler tag per minor ("1.33 → cluster-autoscaler-1.33.6"):
    a pin older than that (v1.33.1 before) fails, and so does a recorded minor without a pin."""
    recorded = dict(
        re.findall(r"(\d+\.\d+) → cluster-autoscaler-(\d+\.\d+\.\d+)", (REFERENCE / "README.md").read_text())
    )
    assert recorded, "no cluster-autoscaler release tags in reference/README.md"
    for minor, newest in recorded.items():
        assert minor in IMAGES, f"cluster-autoscaler {newest} is released but {minor} has no image pinned"
        assert _patch(IMAGES[minor].tag) >= _patch(newest), (minor, IMAGES[minor].tag, newest)


@pytest.mark.skipif(not (REFERENCE / "charts").is_dir(), reason="../shared is not beside this checkout")
def test_the_pinned_chart_ships_the_app_version_recorded_and_no_newer_image_than_the_pin():
    pinned = CHARTS["cluster-autoscaler"]
    defaults = yaml.safe_load(
        (REFERENCE / "charts" / f"cluster-autoscaler-{pinned.version}.values.yaml").read_text()
    )
    assert defaults["image"]["tag"] == f"v{pinned.app_version}"
    minor = ".".join(pinned.app_version.split(".")[:2])
    # The chart's own image is no newer than the pin for its minor (else the pin is stale).
    assert _patch(IMAGES[minor].tag) >= _patch(defaults["image"]["tag"])
