"""The images of the platform's own in-cluster agents (`platform.images`), each an override pinned by
digest. Re-exported by components.spec.platform.

A cluster whose nodes cannot reach the internet (docs/configuration.md "images") cannot pull the stock
images from Docker Hub, nvcr.io or registry.k8s.io, nor pip-install at start: a mirror in a registry the
nodes reach privately (ECR, Artifact Registry) is named here, by digest, so what runs is what was mirrored.
"""

from __future__ import annotations

from pydantic import Field

from components.spec.base import DIGEST_IMAGE, Spec


class AgentImagesSpec(Spec):
    """The image of each in-cluster agent the platform runs; None keeps the stock image (the controllers:
    `controller`)."""

    # The controller image (`make image`: images/controller/, pushed as docs/in-cluster.md says), by
    # digest: both controllers run it (`trainplane-controller gpu-health | block-window`). trainplane
    # publishes no image, so there is no stock default: unset, their pods name CONTROLLER_IMAGE_UNSET,
    # which no registry serves, and `trainplane verify` says so (docs/configuration.md "images").
    controller: str | None = Field(default=None, pattern=DIGEST_IMAGE)
    # Per agent, instead of `controller`: the GPU health controller (idle reclaim runs in it) ...
    gpu_health_controller: str | None = Field(default=None, pattern=DIGEST_IMAGE)
    # ... and the Capacity Block window controller.
    block_window: str | None = Field(default=None, pattern=DIGEST_IMAGE)
    # NVIDIA DCGM 4.6.0 (nv-hostengine, dcgmi): the node-start diagnostic; stock nvcr.io dcgm image.
    gpu_diagnostic: str | None = Field(default=None, pattern=DIGEST_IMAGE)
    # The pause container that keeps the diagnostic's pod running; stock registry.k8s.io/pause:3.10.
    pause: str | None = Field(default=None, pattern=DIGEST_IMAGE)


# What a controller pod runs while neither `images.controller` nor its own override is set: a name in the
# .invalid domain (RFC 2606: never resolves), so a pull fails at once and the pod's event names the setting.
CONTROLLER_IMAGE_UNSET = "trainplane-controller.invalid/set-platform-images-controller:unset"


def controller_image(images: AgentImagesSpec, override: str | None) -> str:
    """The image of one controller: its own override, else `images.controller`, else the unset marker."""
    return override or images.controller or CONTROLLER_IMAGE_UNSET
