"""The EKS control plane: access entries, endpoint, KMS, logging, OIDC, add-ons."""

from __future__ import annotations

import fnmatch
import json

import pytest

from components.aws.cluster import iam_principal
from tests.helpers.aws import NODE_GROUP, one, plan, waits_for

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

EKS = "aws:eks/cluster:Cluster"
ADDON = "aws:eks/addon:Addon"
HOST = "oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F6A7B"
CLUSTER_SG = "sg-0c1a2b3c4d5e6f700"  # what the mocked EKS reports as its cluster security group


def test_cluster_version_auth_mode_encryption_and_logging():
    result = plan("aws-h200-efa")
    c = one(result, EKS).inputs
    key = one(result, "aws:kms/key:Key", "h200-train-cluster-secrets")
    assert c["version"] == "1.35"
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
        (
            "aws-dev",
            {
                "vpc-cni",
                "kube-proxy",
                "eks-pod-identity-agent",
                "coredns",
                "aws-ebs-csi-driver",
                "eks-node-monitoring-agent",
            },
        ),
        (
            "aws-byo-vpc",
            {
                "vpc-cni",
                "kube-proxy",
                "eks-pod-identity-agent",
                "coredns",
                "aws-ebs-csi-driver",
                "aws-efs-csi-driver",
                "eks-node-monitoring-agent",
            },
        ),
    ],
)
def test_managed_addons(stack, expected):
    result = plan(stack)
    addons = {r.inputs["addonName"]: r for r in result.of_type(ADDON)}
    assert set(addons) == expected
    system = [g for g in result.of_type(NODE_GROUP) if g.inputs["amiType"] == "AL2023_x86_64_STANDARD"]
    # Add-ons with Deployments or DaemonSets wait for the system nodes; the CNI comes before any node.
    for name in ("coredns", "aws-efs-csi-driver", "aws-ebs-csi-driver", "eks-node-monitoring-agent"):
        if name in addons:
            assert {g.urn for g in system} <= waits_for(result, addons[name])
    assert not {g.urn for g in result.of_type(NODE_GROUP)} & waits_for(result, addons["vpc-cni"])


@pytest.mark.parametrize("stack", ["aws-dev", "aws-h200-efa", "aws-byo-vpc"])
def test_vpc_cni_enforces_network_policy(stack):
    # Without it EKS accepts every team NetworkPolicy and enforces none (EKS "Restrict Pod network
    # traffic with Kubernetes network policies": {"enableNetworkPolicy": "true"}, a string).
    result = plan(stack)
    (cni,) = [r for r in result.of_type(ADDON) if r.inputs["addonName"] == "vpc-cni"]
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
    # Same resource as before the setting (an add-on's configuration changes in place).
    assert cni.name == f"{result.outputs['clusterName']}-cluster-vpc-cni"


def test_efs_csi_role_trusts_the_driver_service_accounts_with_string_like():
    result = plan("aws-byo-vpc")
    addon = next(r for r in result.of_type(ADDON) if r.inputs["addonName"] == "aws-efs-csi-driver")
    role = one(result, "aws:iam/role:Role", "ml-shared-addons-efs-csi-role")
    assert addon.inputs["serviceAccountRoleArn"] == f"arn:aws:iam::123456789012:role/{role.name}"
    (stmt,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    # EKS "Use elastic file system storage with Amazon EFS": efs-csi-* with StringLike, so the node
    # plugin's service account (efs-csi-node-sa) is trusted as well as the controller's.
    assert stmt["Condition"] == {
        "StringLike": {f"{HOST}:sub": "system:serviceaccount:kube-system:efs-csi-*"},
        "StringEquals": {f"{HOST}:aud": "sts.amazonaws.com"},
    }
    sub = stmt["Condition"]["StringLike"][f"{HOST}:sub"]
    for sa in ("efs-csi-controller-sa", "efs-csi-node-sa"):
        assert fnmatch.fnmatchcase(f"system:serviceaccount:kube-system:{sa}", sub)
    assert not fnmatch.fnmatchcase("system:serviceaccount:research:trainer", sub)
    (attach,) = [
        a
        for a in result.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.parent == role.parent
    ]
    assert attach.inputs["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"


def test_private_access_cidrs_open_443_on_the_cluster_security_group():
    result = plan("aws-byo-vpc")
    rules = [
        r
        for r in result.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs["securityGroupId"] == CLUSTER_SG
    ]
    assert [
        (r.inputs["cidrIpv4"], r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"])
        for r in rules
    ] == [("10.100.0.0/16", "tcp", 443, 443)]
    # Named after the CIDR, so adding or removing another one leaves this rule alone.
    assert rules[0].name == "ml-shared-cluster-api-from-10-100-0-0-16"


def test_no_api_rules_without_private_access_cidrs():
    result = plan("aws-dev")
    assert not [
        r
        for r in result.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs["securityGroupId"] == CLUSTER_SG
    ]


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


@pytest.mark.parametrize("stack", ["aws-dev", "aws-byo-vpc"])
def test_kubernetes_provider_waits_for_the_deployers_access(stack):
    """Issue 18 defect 4: every in-cluster object goes through the provider, so it must wait for the
    admin access policy associations and, with a private endpoint, the rules that open 443 to the
    deployer's networks; else the first objects race them and fail with 401/403 or time out."""
    result = plan(stack)
    provider = one(result, "pulumi:providers:kubernetes")
    waits = waits_for(result, provider)
    associations = {r.urn for r in result.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")}
    assert associations and associations <= waits
    api_rules = {
        r.urn
        for r in result.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs["securityGroupId"] == CLUSTER_SG
    }
    assert bool(api_rules) == (stack == "aws-byo-vpc")
    assert api_rules <= waits
