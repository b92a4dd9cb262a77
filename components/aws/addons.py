"""EKS add-ons that need nodes, and the StorageClass every dynamically provisioned volume uses.

They wait for the system node groups (their Deployments and DaemonSets need somewhere to run):
- coredns;
- the EBS CSI driver with its own IRSA role, and an encrypted gp3 StorageClass made the cluster's
  default: EKS 1.30+ clusters have no default class and in-tree EBS provisioning is gone, so without
  both every PVC (Prometheus, Alertmanager, Loki) stays Pending;
- the EFS CSI driver (with `kind: nfs` storage) with its IRSA role;
- the EKS node monitoring agent wherever node repair is on (GPU pools): node repair acts on the
  conditions this agent reports (`AcceleratedHardwareReady` for GPU faults) and sees nothing without it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.identity import OidcIssuer, ServiceAccountRole, ServiceAccountRoleArgs

EFS_CSI_ADDON = "aws-efs-csi-driver"
# EKS user guide, "Use elastic file system storage with Amazon EFS", step 1: the role must trust every
# service account of the driver, `efs-csi-*` with StringLike (controller and node plugin).
EFS_CSI_SERVICE_ACCOUNTS = "efs-csi-*"
EFS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"

EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
# EKS user guide, "Use Kubernetes volume storage with Amazon EBS", step 1: the add-on's controller runs
# as kube-system/ebs-csi-controller-sa, with the AWS managed policy below.
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
EBS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
# The class Prometheus, Alertmanager and Loki name in their volume claims (`ClusterBundle.storage_class`).
STORAGE_CLASS = "gp3-encrypted"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

NODE_MONITORING_ADDON = "eks-node-monitoring-agent"
# aws/eks-node-monitoring-agent charts/eks-node-monitoring-agent/values.yaml: the agent DaemonSet
# tolerates every taint (`- operator: Exists`), but the `dcgm-server` DaemonSet, the nv-hostengine the
# agent reads GPU health from, tolerates none, so it would never run on tainted GPU nodes and the agent
# would report DCGM errors there. Its affinity already limits it to NVIDIA instance types; tolerate all
# taints like the agent does (`dcgmAgent.tolerations` is in the add-on's charts/configuration.schema.json
# since v1.6.0).
NODE_MONITORING_CONFIG = {"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}
# Pinned, so the configuration above meets the schema it was written for, not whatever EKS defaults to
# for the cluster version. aws/eks-node-monitoring-agent@v1.6.7: charts/configuration.schema.json has
# `dcgmAgent.tolerations` (since v1.6.0); charts/eks-node-monitoring-agent/values.yaml runs dcgm-server on
# p5.48xlarge, p5e.48xlarge and p5en.48xlarge (dcgmAgent.affinity) and ships the add-on image
# v1.6.7-eksbuild.1 (nodeAgent.image.tag); internal/pkg/instanceinfo/instance-info.jsonl gives the
# DeviceCount check p5en's 8 GPUs (since v1.6.6, CHANGELOG "Add expected NVIDIA GPU count validation").
# What each needs is in infra/verify/clouds/aws/facts.yaml `addonVersions` (verify's `cloud` check).
NODE_MONITORING_VERSION = "v1.6.7-eksbuild.1"


def ebs_kms_policy(key_arn: str) -> str:
    """What the EBS CSI controller needs on a customer managed key to create and attach volumes with it.

    Verbatim from the EKS user guide, "Use Kubernetes volume storage with Amazon EBS", step 1 (custom
    KMS key): grants for EC2 (only for AWS resources), and the key's cryptographic operations.
    """
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"],
                    "Resource": [key_arn],
                    "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
                },
                {
                    "Effect": "Allow",
                    "Action": [
                        "kms:Encrypt",
                        "kms:Decrypt",
                        "kms:ReEncrypt*",
                        "kms:GenerateDataKey*",
                        "kms:DescribeKey",
                    ],
                    "Resource": [key_arn],
                },
            ],
        }
    )


def storage_class_parameters(key_arn: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    """Parameters of the gp3 class, names per aws-ebs-csi-driver docs/parameters.md (driver 1.x)."""
    return {
        "type": "gp3",
        "encrypted": "true",
        # "The full ARN of the key to use when encrypting the volume."
        "kmsKeyId": key_arn,
        "csi.storage.k8s.io/fstype": "ext4",
    }


@dataclass(frozen=True, kw_only=True)
class ClusterAddonsArgs:
    cluster_name: pulumi.Input[str]
    oidc: OidcIssuer
    # The new cluster's Kubernetes provider (the StorageClass is a Kubernetes object).
    provider: pulumi.ProviderResource
    # The platform's data key: EBS volumes are encrypted with it like S3, FSx and EFS.
    data_key_arn: pulumi.Input[str]
    # Resources the add-ons' Deployments need (the system node groups).
    ready: Sequence[pulumi.Resource]
    efs: bool = False
    # True when some node group has node repair on (GPU pools).
    node_monitoring: bool = False
    tags: dict[str, str] = field(default_factory=dict)


class ClusterAddons(pulumi.ComponentResource):
    """coredns, EBS CSI + the default StorageClass, EFS CSI, node monitoring: add-ons that need nodes."""

    # The StorageClass's name and what must exist before a claim asks for it (ClusterBundle fields).
    storage_class: str
    storage_ready: tuple[pulumi.Resource, ...]

    def __init__(self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:ClusterAddons", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=list(args.ready))

        def addon(addon_name: str, **kwargs) -> aws.eks.Addon:
            return aws.eks.Addon(
                f"{name}-{addon_name}",
                cluster_name=args.cluster_name,
                addon_name=addon_name,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="PRESERVE",
                tags=args.tags,
                opts=after_nodes,
                **kwargs,
            )

        # Named "coredns" in the URN before the other add-ons joined: keep it.
        addon("coredns")

        ebs_role = ServiceAccountRole(
            f"{name}-ebs-csi",
            ServiceAccountRoleArgs(
                oidc=args.oidc,
                namespace="kube-system",
                service_account=EBS_CSI_SERVICE_ACCOUNT,
                policy=pulumi.Output.from_input(args.data_key_arn).apply(ebs_kms_policy),
                managed_policy_arns=[EBS_CSI_POLICY],
                description="EBS CSI controller: volumes for the cluster's claims, on the platform's data key",
                tags=args.tags,
            ),
            child,
        )
        ebs = addon(EBS_CSI_ADDON, service_account_role_arn=ebs_role.arn)
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=STORAGE_CLASS, annotations={DEFAULT_CLASS_ANNOTATION: "true"}
            ),
            provisioner=EBS_CSI_PROVISIONER,
            parameters=storage_class_parameters(args.data_key_arn),
            # EBS volumes live in one zone: bind where the pod is scheduled, not where a volume happens to be.
            volume_binding_mode="WaitForFirstConsumer",
            reclaim_policy="Delete",
            # Prometheus outgrows its first size; gp3 volumes grow online.
            allow_volume_expansion=True,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.storage_class = STORAGE_CLASS
        self.storage_ready = (ebs, storage_class)

        if args.efs:
            efs_role = ServiceAccountRole(
                f"{name}-efs-csi",
                ServiceAccountRoleArgs(
                    oidc=args.oidc,
                    namespace="kube-system",
                    service_account=EFS_CSI_SERVICE_ACCOUNTS,
                    managed_policy_arns=[EFS_CSI_POLICY],
                    description="EFS CSI controller and node plugin: access points on the platform's file systems",
                    tags=args.tags,
                ),
                child,
            )
            addon(EFS_CSI_ADDON, service_account_role_arn=efs_role.arn)

        if args.node_monitoring:
            # No IAM: the agent only patches node conditions and writes events (its ClusterRole).
            addon(
                NODE_MONITORING_ADDON,
                addon_version=NODE_MONITORING_VERSION,
                configuration_values=json.dumps(NODE_MONITORING_CONFIG),
            )
        self.register_outputs({"storageClass": self.storage_class})
