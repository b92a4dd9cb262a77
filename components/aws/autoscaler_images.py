"""The cluster-autoscaler image per Kubernetes minor (pure data: the AWS spec rules and the autoscaler
component both read it). The autoscaler's minor must match the cluster's; a minor without a pinned image is
a stack error, never the chart's older default image."""

from __future__ import annotations

from dataclasses import dataclass

# Where the pins below were read and when: the newest `cluster-autoscaler-<minor>.<patch>` release tag per
# minor in kubernetes/autoscaler (snapshot of main at 2026-08-22); each tag's
# cluster-autoscaler/version/version.go says the same version. Images are published as
# registry.k8s.io/autoscaling/cluster-autoscaler:v<version> (the chart's image.repository default).
SOURCE = (
    "kubernetes/autoscaler release tags cluster-autoscaler-<version>, cluster-autoscaler/version/version.go"
)
AS_OF = "2026-11-28"


@dataclass(frozen=True)
class ImagePin:
    tag: str  # the image tag, v<version>
    commit: str  # the release tag's commit in kubernetes/autoscaler
    tagged: str  # the day the release was tagged


# The autoscaler's minor version must match the cluster's (kubernetes/autoscaler README). No
# cluster-autoscaler-1.37.* tag exists yet (2026-08-22), so 1.37 has no pin (and so is an error).
IMAGES: dict[str, ImagePin] = {
    "1.30": ImagePin("v1.30.7", "4be8b2d", "2025-10-30"),
    "1.31": ImagePin("v1.31.5", "f0fb6c4", "2025-10-08"),
    "1.32": ImagePin("v1.32.7", "f645beb", "2026-02-13"),
    "1.33": ImagePin("v1.33.6", "be4b5a1", "2026-07-22"),
    "1.34": ImagePin("v1.34.5", "cb2123e", "2026-07-22"),
    "1.35": ImagePin("v1.35.2", "2d42588", "2026-07-22"),
    "1.36": ImagePin("v1.36.1", "35e8a28", "2026-07-22"),
}
IMAGE_TAGS = {minor: pin.tag for minor, pin in IMAGES.items()}


def image_tag(kubernetes_version: str) -> str:
    """The autoscaler image for the cluster's minor; a minor without one is an error, never an older image."""
    tag = IMAGE_TAGS.get(kubernetes_version)
    if tag is None:
        raise ValueError(image_problem(kubernetes_version))
    return tag


def image_problem(kubernetes_version: str) -> str:
    known = ", ".join(IMAGE_TAGS)
    return (
        f"kubernetesVersion: {kubernetes_version!r} has no cluster-autoscaler image pinned (the autoscaler's "
        f"minor must match the cluster's; pinned: {known})"
    )
