"""What the in-cluster layer must know about EKS: the cloud profile (no pulumi_aws import).

- GPU operator: the AL2023/Bottlerocket NVIDIA AMIs ship the driver and the container toolkit, so the
  operator installs neither.
- FSx for Lustre: static volumes need only the CSI node plugin, installed from its chart when a storage
  handle names the driver (EFS and EBS come as EKS add-ons from the cloud layer).
- Identity: IRSA, the service-account annotation carries the team's role ARN; pods call STS over HTTPS,
  which the object-storage egress (443) already allows.
- Preemption: a spot instance gets a two-minute interruption notice (EC2 user guide, "Spot Instance
  interruption notices"), so training pods get 120 s to checkpoint.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from components.bundle import CloudProfile, CsiChart

FSX_CSI_DRIVER = "fsx.csi.aws.com"
FSX_CSI_RELEASE = "aws-fsx-csi-driver"
# The FSx CSI node plugin runs beside the other storage drivers.
CSI_NAMESPACE = "kube-system"
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"


def fsx_csi_values() -> dict[str, Any]:
    """Only the node plugin, on every node (GPU nodes included).

    Static volumes need no controller: the CSIDriver has attachRequired: false and the PVs name their
    file system, so nothing calls CreateVolume. In chart 1.17.0 `nodeComponentOnly` only drops the
    controller's PodDisruptionBudget (templates/pdb.yaml); templates/controller-deployment.yaml renders
    the Deployment regardless, and without an IAM role its pods could only fail. Zero replicas stop
    deploying it for real, while the chart's objects stay as the chart defines them.
    """
    return {
        "nodeComponentOnly": True,
        "controller": {"replicaCount": 0},
        "node": {"tolerateAllTaints": True},
    }


FSX_CSI_CHART = CsiChart(
    driver=FSX_CSI_DRIVER,
    resource_name="fsx-csi",
    chart="aws-fsx-csi-driver",
    release_name=FSX_CSI_RELEASE,
    namespace=CSI_NAMESPACE,
    values=fsx_csi_values(),
)

EKS_PROFILE = CloudProfile(
    name="eks",
    object_store="s3",
    identity_annotation=IRSA_ANNOTATION,
    gpu_operator_values={"driver": {"enabled": False}, "toolkit": {"enabled": False}},
    csi_charts=(FSX_CSI_CHART,),
    preemption_grace_seconds=120,
    # The EKS NVIDIA AMIs (AL2023, Bottlerocket) install the GPU driver on the host (hence the GPU operator's
    # driver is off above), so the DRA driver finds it at "/" (dra-driver-nvidia-gpu@v0.4.1
    # deployments/helm/dra-driver-nvidia-gpu/values.yaml `nvidiaDriverRoot`: "For driver installed directly
    # on a host, a value of `/` is used"; /run/nvidia/driver is the GPU operator's driver container).
    dra_driver_values={"nvidiaDriverRoot": "/"},
)


def eks_profile(region: str) -> CloudProfile:
    """EKS's profile in `region`: Loki keeps its chunks in the platform's S3 logs bucket, reached in its
    region (loki chart 18.11.0 values.yaml: `loki.storage.type: s3`, `loki.storage.s3.region`)."""
    return replace(EKS_PROFILE, loki_storage={"type": "s3", "s3": {"region": region}})
