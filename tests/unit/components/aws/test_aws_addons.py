"""Add-ons that need nodes: EBS CSI and the default StorageClass, node monitoring; the bundle's storage."""

from __future__ import annotations

import json
from functools import cache

import kubernetes_validate
import pytest

from infra.mockcloud import RunResult, run_program
from tests.helpers.aws import NODE_GROUP, as_list, doc, one, plan, waits_for
from tests.helpers.aws_bundle_program import BUNDLE_PROGRAM
from tests.helpers.plans import config_for, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

ADDON = "aws:eks/addon:Addon"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
HOST = "oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F6A7B"


def _addon(result: RunResult, name: str):
    (found,) = [r for r in result.of_type(ADDON) if r.inputs["addonName"] == name]
    return found


@cache
def _bundle(stack: str) -> RunResult:
    return run_program(config_for(platform_object(stack)), stack, program=BUNDLE_PROGRAM)


def test_ebs_csi_addon_has_its_own_role_trusting_only_its_controller():
    result = plan("aws-dev")
    addon = _addon(result, "aws-ebs-csi-driver")
    role = one(result, "aws:iam/role:Role", "ml-dev-addons-ebs-csi-role")
    assert addon.inputs["serviceAccountRoleArn"] == f"arn:aws:iam::123456789012:role/{role.name}"
    (stmt,) = doc(role.inputs["assumeRolePolicy"])["Statement"]
    assert stmt["Condition"] == {
        "StringEquals": {
            f"{HOST}:sub": "system:serviceaccount:kube-system:ebs-csi-controller-sa",
            f"{HOST}:aud": "sts.amazonaws.com",
        }
    }
    attached = {
        a.inputs["policyArn"]
        for a in result.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.parent == role.parent
    }
    assert attached == {"arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"}


def test_ebs_csi_role_may_use_the_data_key_the_storage_class_encrypts_with():
    result = plan("aws-dev")
    key_arn = "arn:aws:kms:us-east-1:123456789012:key/ml-dev-data-0000"
    sc = one(result, STORAGE_CLASS).inputs
    assert sc["parameters"]["kmsKeyId"] == key_arn
    policy = doc(
        one(result, "aws:iam/rolePolicy:RolePolicy", "ml-dev-addons-ebs-csi-policy").inputs["policy"]
    )
    granted = {}
    for s in policy["Statement"]:
        assert as_list(s["Resource"]) == [key_arn]
        for a in as_list(s["Action"]):
            granted[a] = s.get("Condition")
    # EKS "Use Kubernetes volume storage with Amazon EBS", custom KMS key: grants only for AWS resources.
    for a in ("kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"):
        assert granted[a] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    for a in ("kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"):
        assert a in granted and granted[a] is None


@pytest.mark.parametrize("stack", ["aws-dev", "aws-h200-efa", "aws-byo-vpc"])
def test_an_encrypted_gp3_class_is_the_default_and_binds_where_the_pod_runs(stack):
    sc = one(plan(stack), STORAGE_CLASS).inputs
    assert sc["metadata"] == {
        "name": "gp3-encrypted",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    }
    assert sc["provisioner"] == "ebs.csi.aws.com"  # the EBS CSI driver's name; in-tree EBS is gone
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
    # Parameter names as aws-ebs-csi-driver docs/parameters.md spells them.
    assert {k: v for k, v in sc["parameters"].items() if k != "kmsKeyId"} == {
        "type": "gp3",
        "encrypted": "true",
        "csi.storage.k8s.io/fstype": "ext4",
    }
    kubernetes_validate.validate(
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", **sc}, "1.33", strict=True
    )


def test_bundle_hands_over_the_class_and_what_a_claim_must_wait_for():
    bundle = _bundle("aws-dev")
    out = bundle.outputs
    sc = one(bundle, STORAGE_CLASS)
    assert out["storageClass"] == sc.inputs["metadata"]["name"] == "gp3-encrypted"
    by_urn = bundle.by_urn()
    ready = [by_urn[u] for u in out["storageReady"]]
    assert {(r.type, r.inputs.get("addonName")) for r in ready} == {
        (ADDON, "aws-ebs-csi-driver"),
        (STORAGE_CLASS, None),
    }
    # Waiting on storage_ready means the driver can provision: its add-on already waits for the nodes.
    (addon,) = [r for r in ready if r.type == ADDON]
    system = one(bundle, NODE_GROUP, "ml-dev-system-ng")
    assert system.urn in waits_for(bundle, addon)


@pytest.mark.parametrize("stack", ["aws-dev", "aws-h200-efa", "aws-byo-vpc"])
def test_node_monitoring_agent_wherever_node_repair_is_on(stack):
    result = plan(stack)
    # Node repair acts on the agent's conditions (AcceleratedHardwareReady); GPU pools have it on.
    assert [g for g in result.of_type(NODE_GROUP) if (g.inputs.get("nodeRepairConfig") or {}).get("enabled")]
    agent = _addon(result, "eks-node-monitoring-agent")
    # Its dcgm-server (GPU health) must run on the tainted GPU nodes; the agent itself tolerates all.
    config = json.loads(agent.inputs["configurationValues"])
    assert config == {"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}
    assert "serviceAccountRoleArn" not in agent.inputs  # it calls no AWS API
    # Issue 18 defect 15: pinned to a release whose schema has dcgmAgent.tolerations and that knows
    # p5en (aws/eks-node-monitoring-agent@v1.6.7), not whatever EKS defaults to for the cluster version.
    assert agent.inputs["addonVersion"] == "v1.6.7-eksbuild.1"


def test_no_node_monitoring_agent_without_node_repair(plan_platform):
    obj = platform_object("aws-dev")
    obj["nodePools"] = [p for p in obj["nodePools"] if not p.get("gpu")]
    obj["teams"] = []
    result = plan_platform(obj)
    assert not [g for g in result.of_type(NODE_GROUP) if g.inputs.get("nodeRepairConfig")]
    assert "eks-node-monitoring-agent" not in {r.inputs["addonName"] for r in result.of_type(ADDON)}
