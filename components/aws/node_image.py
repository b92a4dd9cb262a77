"""What names a GPU node on EKS: its AMI type (by CPU architecture) and the autoscaler's accelerator label."""

from __future__ import annotations

from components.catalog import MachineShape

GPU_AMI = "AL2023_x86_64_NVIDIA"
CPU_AMI = "AL2023_x86_64_STANDARD"
# Grace (arm64) GPU nodes: p6e-gb200/gb300 (botocore 1.43.117 data/eks service-2.json AMITypes).
GPU_AMI_ARM = "AL2023_ARM_64_NVIDIA"

# kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_cloud_provider.go (1.33): `GPULabel`.
# Its presence marks a GPU node (utils/gpu NodeHasGpu); the value names the GPU in the autoscaler's
# metrics, spelled as in the provider's `availableGPUTypes` (nvidia-tesla-a100, nvidia-a10g, nvidia-l4,
# nvidia-l40s). Newer GPUs are not in that list yet and follow its "nvidia-<model>" form.
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
ACCELERATOR_VALUES = {
    "A10G": "nvidia-a10g",
    "L4": "nvidia-l4",
    "L40S": "nvidia-l40s",
    "A100-40GB": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-tesla-a100",
    "H100": "nvidia-h100",
    "H200": "nvidia-h200",
    "B200": "nvidia-b200",
    "B300": "nvidia-b300",
    "GB200": "nvidia-gb200",
    "GB300": "nvidia-gb300",
    "RTX-PRO-6000": "nvidia-rtx-pro-6000",
}


def accelerator_label(gpu: str) -> str:
    """The `k8s.amazonaws.com/accelerator` value for a catalog GPU kind."""
    return ACCELERATOR_VALUES.get(gpu, f"nvidia-{gpu.lower()}")


def ami_type(gpu: bool, shapes: list[MachineShape]) -> str:
    """The EKS AMI type of a pool: NVIDIA on arm64 for Grace nodes, else x86_64."""
    if not gpu:
        return CPU_AMI
    return GPU_AMI_ARM if shapes and shapes[0].arch == "arm64" else GPU_AMI
