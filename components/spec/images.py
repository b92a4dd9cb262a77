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
    """One override per in-cluster agent the platform runs; None keeps the stock image."""

    # Python 3.12 with kopf 1.45.2 and its dependencies (components/incluster/gpu_health_requirements.txt)
    # installed: the GPU health controller (and idle reclaim, which runs in it). With it, the pod
    # installs nothing at start; without, python:3.12-slim pip-installs the hashed wheels from PyPI.
    gpu_health_controller: str | None = Field(default=None, pattern=DIGEST_IMAGE)
    # Python 3.12 (standard library only): the Capacity Block window controller; stock python:3.12-slim.
    block_window: str | None = Field(default=None, pattern=DIGEST_IMAGE)
    # NVIDIA DCGM 4.6.0 (nv-hostengine, dcgmi): the node-start diagnostic; stock nvcr.io dcgm image.
    gpu_diagnostic: str | None = Field(default=None, pattern=DIGEST_IMAGE)
    # The pause container that keeps the diagnostic's pod running; stock registry.k8s.io/pause:3.10.
    pause: str | None = Field(default=None, pattern=DIGEST_IMAGE)
