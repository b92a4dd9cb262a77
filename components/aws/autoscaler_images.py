"""The cluster-autoscaler image per Kubernetes minor (pure data: the AWS spec rules and the autoscaler
component both read it). The autoscaler's minor must match the cluster's; a minor without a pinned image is
a stack error, never the chart's older default image."""

from __future__ import annotations

# The autoscaler's minor version must match the cluster's (kubernetes/autoscaler README).
IMAGE_TAGS = {
    "1.30": "v1.30.6",
    "1.31": "v1.31.4",
    "1.32": "v1.32.3",
    "1.33": "v1.33.1",
    "1.34": "v1.34.0",
    # The newest per minor: kubernetes/autoscaler tags cluster-autoscaler-1.35.2 and -1.36.1 (both tagged
    # 2026-07-22; asOf 2026-08-22, the repository as the project's chart references record it).
    "1.35": "v1.35.2",
    "1.36": "v1.36.1",
}


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
