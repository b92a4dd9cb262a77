"""The EKS control plane and what hangs off it: access entries, KMS, logging, OIDC, add-ons, kubeconfig.

Authentication uses access entries only (`API` mode, no aws-auth ConfigMap): the deploying identity and
`cluster.adminPrincipals` get the cluster-admin access policy; managed node groups get their entries
from EKS itself. Secrets are envelope-encrypted with a KMS key of the cluster's own. The add-ons the
nodes need to become Ready (vpc-cni, kube-proxy, pod identity agent) come with the cluster; the ones
that run Deployments or need nodes (coredns, CSI drivers, node monitoring) wait for the system nodes in
`ClusterAddons` (components/aws/addons.py).

The VPC CNI is installed with its network policy agent on: without `enableNetworkPolicy` EKS accepts
NetworkPolicy objects and enforces none of them. A private API endpoint admits only what the cluster
security group admits (itself: the control plane and the nodes); `cluster.privateAccessCidrs` opens
TCP 443 on that group to the networks `pulumi up` and kubectl run from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.identity import OidcIssuer

DEFAULT_LOG_TYPES = ("api", "audit", "authenticator")
ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
# Installed with the cluster, before any node: without the CNI nodes never turn Ready.
EARLY_ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
# EKS user guide, "Restrict Pod network traffic with Kubernetes network policies", step 2: the vpc-cni
# add-on's configuration value is the string "true" (its add-on schema types it as a string enum).
EARLY_ADDON_CONFIG = {"vpc-cni": {"enableNetworkPolicy": "true"}}


def iam_principal(arn: str) -> str:
    """The IAM principal behind a caller ARN: an STS assumed-role session maps to its role.

    Access entries take IAM users and roles, not sessions. The role path is not part of the session
    ARN; roles with a path must be listed in cluster.adminPrincipals instead.
    """
    m = re.fullmatch(r"arn:(aws[\w-]*):sts::(\d{12}):assumed-role/([^/]+)/.+", arn)
    if m:
        partition, account, role = m.groups()
        return f"arn:{partition}:iam::{account}:role/{role}"
    return arn


def kubeconfig_document(name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token` (no long-lived credentials inside)."""
    user = f"{name}-aws"
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
            "current-context": name,
            "users": [
                {
                    "name": user,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["eks", "get-token", "--cluster-name", name, "--region", region],
                            "interactiveMode": "Never",
                        }
                    },
                }
            ],
        },
        indent=2,
    )


def _field(obj, key: str):
    """A field of a provider output object, which arrives as a typed object or a plain dict."""
    if obj is None:
        return None
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _issuer(identities) -> str:
    oidcs = _field(identities[0], "oidcs") if identities else None
    return (_field(oidcs[0], "issuer") or "") if oidcs else ""


def _assume_role_policy(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                }
            ],
        }
    )


@dataclass(frozen=True, kw_only=True)
class EksClusterArgs:
    cluster_name: str
    region: str
    version: str
    subnet_ids: Sequence[pulumi.Input[str]]
    endpoint_access: str = "both"  # public | private | both
    public_access_cidrs: Sequence[str] = ()
    admin_principals: Sequence[str] = ()
    log_types: Sequence[str] = DEFAULT_LOG_TYPES
    log_retention_days: int = 90
    # Networks (VPN, CI runners, a peered VPC) that reach the private endpoint on TCP 443.
    private_access_cidrs: Sequence[str] = ()
    tags: dict[str, str] = field(default_factory=dict)


def cidr_slug(cidr: str) -> str:
    """A resource-name-safe form of a CIDR ("10.0.0.0/8" -> "10-0-0-0-8"), stable as the list changes."""
    return cidr.replace(".", "-").replace("/", "-")


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with access entries, KMS secrets encryption, logging, OIDC, base add-ons."""

    cluster: aws.eks.Cluster
    name: pulumi.Output[str]
    oidc: OidcIssuer
    security_group_id: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    early_addons: list[aws.eks.Addon]

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {args.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=child,
        )
        role = aws.iam.Role(
            f"{name}-cluster",
            assume_role_policy=_assume_role_policy("eks.amazonaws.com"),
            description=f"EKS control plane of {args.cluster_name}",
            tags=tags,
            opts=child,
        )
        attach = aws.iam.RolePolicyAttachment(
            f"{name}-cluster-policy",
            role=role.name,
            policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
            opts=child,
        )
        # Created first, with a retention, so EKS does not create a never-expiring group itself.
        logs = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/aws/eks/{args.cluster_name}/cluster",
            retention_in_days=args.log_retention_days,
            tags=tags,
            opts=child,
        )
        private = args.endpoint_access in ("private", "both")
        public = args.endpoint_access in ("public", "both")
        self.cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=args.cluster_name,
            version=args.version,
            role_arn=role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=list(args.subnet_ids),
                endpoint_private_access=private,
                endpoint_public_access=public,
                public_access_cidrs=list(args.public_access_cidrs)
                if public and args.public_access_cidrs
                else None,
            ),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API",
                # Admins are explicit access entries below, visible and revocable like any other.
                bootstrap_cluster_creator_admin_permissions=False,
            ),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                resources=["secrets"],
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key.arn),
            ),
            enabled_cluster_log_types=list(args.log_types),
            # The managed add-ons below replace the self-managed defaults EKS would otherwise install.
            bootstrap_self_managed_addons=False,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[attach, logs]),
        )
        self.name = self.cluster.name
        self.security_group_id = self.cluster.vpc_config.cluster_security_group_id
        # What the deployer needs before it can reach the cluster at all: its admin policy association
        # and, with a private endpoint, the rules that let it reach 443. The Kubernetes provider waits
        # for them, or the first in-cluster objects race them (401/403, or a timeout on the endpoint).
        access: list[pulumi.Resource] = []
        # EKS user guide, "Cluster API server endpoint": with private access, the API's ENIs carry the
        # cluster security group, so only sources it admits reach 443; named by CIDR, not by position.
        for cidr in args.private_access_cidrs:
            api_rule = aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-{cidr_slug(cidr)}",
                security_group_id=self.security_group_id,
                cidr_ipv4=cidr,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                description=f"Kubernetes API (private endpoint) from {cidr}",
                tags=tags,
                opts=child,
            )
            access.append(api_rule)

        caller = aws.get_caller_identity()
        session = aws.iam.get_session_context(arn=caller.arn)
        deployer = session.issuer_arn or iam_principal(caller.arn)
        principals = list(dict.fromkeys([deployer, *args.admin_principals]))
        for i, principal in enumerate(principals):
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{i}",
                cluster_name=self.cluster.name,
                principal_arn=principal,
                type="STANDARD",
                tags=tags,
                opts=child,
            )
            # An access entry without a policy association authenticates but may do nothing (EKS user
            # guide, "Associate access policies with access entries").
            association = aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{i}",
                cluster_name=self.cluster.name,
                principal_arn=entry.principal_arn,
                policy_arn=ADMIN_POLICY,
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=child,
            )
            access.append(association)

        issuer = self.cluster.identities.apply(_issuer)
        oidc = aws.iam.OpenIdConnectProvider(
            f"{name}-oidc",
            url=issuer,
            client_id_lists=["sts.amazonaws.com"],
            tags=tags,
            opts=child,
        )
        self.oidc = OidcIssuer(provider_arn=oidc.arn, issuer_url=issuer)

        self.early_addons = [
            aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=self.cluster.name,
                addon_name=addon,
                configuration_values=json.dumps(EARLY_ADDON_CONFIG[addon])
                if addon in EARLY_ADDON_CONFIG
                else None,
                resolve_conflicts_on_create="OVERWRITE",
                # The EKS guide enables network policy on an existing add-on with PRESERVE too: the values
                # sent are applied, fields edited on the cluster by hand are kept.
                resolve_conflicts_on_update="PRESERVE",
                tags=tags,
                opts=child,
            )
            for addon in EARLY_ADDONS
        ]

        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                self.cluster.name, self.cluster.endpoint, self.cluster.certificate_authority
            ).apply(lambda v: kubeconfig_document(v[0], v[1], _field(v[2], "data") or "", args.region))
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Server-side apply lets the GPU operator and Kueue co-own fields with their controllers.
            enable_server_side_apply=True,
            # Every in-cluster object uses this provider: none is sent before the deployer has access.
            opts=pulumi.ResourceOptions(parent=self, depends_on=access),
        )
        self.register_outputs({"name": self.name, "kubeconfig": self.kubeconfig})
