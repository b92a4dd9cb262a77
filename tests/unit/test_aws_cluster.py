"""The EKS control plane: access entries, endpoint, KMS, logging, OIDC, add-ons."""

from __future__ import annotations

import pytest

from components.aws.cluster import iam_principal
from tests.unit.test_aws_stacks import NODE_GROUP, one, plan, waits_for

EKS = "aws:eks/cluster:Cluster"
ADDON = "aws:eks/addon:Addon"


def test_cluster_version_auth_mode_encryption_and_logging():
    result = plan("aws-h200-efa")
    c = one(result, EKS).inputs
    key = one(result, "aws:kms/key:Key", "h200-train-cluster-secrets")
    assert c["version"] == "1.33"
    assert c["accessConfig"] == {
        "authenticationMode": "API",
        "bootstrapClusterCreatorAdminPermissions": False,
    }
    assert c["encryptionConfig"] == {
        "resources": ["secrets"],
        "provider": {"keyArn": f"arn:aws:kms:us-east-1:123456789012:key/{key.name}-0000"},
    }
    assert key.inputs["enableKeyRotation"] is True
    assert c["enabledClusterLogTypes"] == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    logs = one(result, "aws:cloudwatch/logGroup:LogGroup")
    assert logs.inputs["name"] == "/aws/eks/h200-train/cluster" and logs.inputs["retentionInDays"] == 90
    assert logs.urn in one(result, EKS).deps
    assert c["bootstrapSelfManagedAddons"] is False


@pytest.mark.parametrize(
    ("stack", "private", "public", "cidrs"),
    [
        ("aws-dev", True, True, None),
        ("aws-h200-efa", True, True, ["203.0.113.0/24"]),
        ("aws-byo-vpc", True, False, None),
    ],
)
def test_endpoint_access(stack, private, public, cidrs):
    vpc = one(plan(stack), EKS).inputs["vpcConfig"]
    assert (vpc["endpointPrivateAccess"], vpc["endpointPublicAccess"]) == (private, public)
    assert vpc.get("publicAccessCidrs") == cidrs


def test_admin_access_entries_for_the_deployer_role_and_extra_principals():
    result = plan("aws-h200-efa")
    entries = {r.inputs["principalArn"] for r in result.of_type("aws:eks/accessEntry:AccessEntry")}
    # The deployer is an STS session; its entry names the IAM role behind it, path included.
    assert entries == {
        "arn:aws:iam::123456789012:role/platform/platform-deployer",
        "arn:aws:iam::123456789012:role/ml-platform-admins",
    }
    assocs = result.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert {a.inputs["principalArn"] for a in assocs} == entries
    for a in assocs:
        assert a.inputs["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        assert a.inputs["accessScope"] == {"type": "cluster"}


def test_iam_principal_maps_sessions_to_roles():
    assert iam_principal("arn:aws:sts::123456789012:assumed-role/deployer/ci-42") == (
        "arn:aws:iam::123456789012:role/deployer"
    )
    assert (
        iam_principal("arn:aws-us-gov:sts::123456789012:assumed-role/r/s")
        == "arn:aws-us-gov:iam::123456789012:role/r"
    )
    assert iam_principal("arn:aws:iam::123456789012:user/alice") == "arn:aws:iam::123456789012:user/alice"


def test_oidc_provider_for_irsa():
    result = plan("aws-dev")
    oidc = one(result, "aws:iam/openIdConnectProvider:OpenIdConnectProvider").inputs
    assert oidc["url"] == "https://oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F6A7B"
    assert oidc["clientIdLists"] == ["sts.amazonaws.com"]


@pytest.mark.parametrize(
    ("stack", "expected"),
    [
        ("aws-dev", {"vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns"}),
        ("aws-byo-vpc", {"vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "aws-efs-csi-driver"}),
    ],
)
def test_managed_addons(stack, expected):
    result = plan(stack)
    addons = {r.inputs["addonName"]: r for r in result.of_type(ADDON)}
    assert set(addons) == expected
    system = [g for g in result.of_type(NODE_GROUP) if g.inputs["amiType"] == "AL2023_x86_64_STANDARD"]
    # Add-ons with Deployments wait for the system nodes; the CNI comes before any node.
    for name in ("coredns", "aws-efs-csi-driver"):
        if name in addons:
            assert {g.urn for g in system} <= waits_for(result, addons[name])
    assert not {g.urn for g in result.of_type(NODE_GROUP)} & waits_for(result, addons["vpc-cni"])


def test_efs_csi_addon_uses_its_own_irsa_role():
    result = plan("aws-byo-vpc")
    addon = next(r for r in result.of_type(ADDON) if r.inputs["addonName"] == "aws-efs-csi-driver")
    role = one(result, "aws:iam/role:Role", "ml-shared-addons-efs-csi-role")
    assert addon.inputs["serviceAccountRoleArn"] == f"arn:aws:iam::123456789012:role/{role.name}"
    assert "system:serviceaccount:kube-system:efs-csi-controller-sa" in role.inputs["assumeRolePolicy"]
    (attach,) = [
        a
        for a in result.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.parent == role.parent
    ]
    assert attach.inputs["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"


def test_node_role_is_minimal():
    result = plan("aws-dev")
    role = one(result, "aws:iam/role:Role", "ml-dev-node-role")
    attached = {
        a.inputs["policyArn"]
        for a in result.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.parent == role.parent
    }
    assert attached == {
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    }
    assert not [p for p in result.of_type("aws:iam/rolePolicy:RolePolicy") if p.parent == role.parent]
