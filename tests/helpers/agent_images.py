"""Agent image overrides as a private platform names them (test_agent_images.py, test_verify_egress.py)."""

from __future__ import annotations

from typing import Any

from tests.helpers.plans import platform_object

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
IMAGES = {
    "gpuHealthController": f"{ECR}/trainplane/gpu-health@sha256:" + "1" * 64,
    "blockWindow": f"{ECR}/mirror/python@sha256:" + "2" * 64,
    "gpuDiagnostic": f"{ECR}/mirror/dcgm@sha256:" + "3" * 64,
    "pause": f"{ECR}/mirror/pause@sha256:" + "4" * 64,
}
# A private AWS platform with a Capacity Block (so the block-window controller runs too).
RESERVED = "aws-h100-reserved"


def private(images: dict[str, str] | None = None, stack: str = RESERVED) -> dict[str, Any]:
    """The reference stack's platform object on a network without internet egress, with `images`."""
    obj = platform_object(stack)
    obj["network"] = {**obj.get("network", {}), "internetEgress": False}
    if images is not None:
        obj["images"] = dict(images)
    return obj
