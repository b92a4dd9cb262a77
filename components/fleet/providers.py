"""Providers for the clusters of a fleet's platforms, as each platform reached its own cluster: its exported
kubeconfig document, or the ambient kubeconfig with a context (an existing cluster without
trainplane:kubeconfig exports a placeholder naming the context, not a kubeconfig). The fleet stack and the
fleet's job stacks both reach workers this way; its own module so job stacks need not import the fleet
stack (which reads platforms through job_stack)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime.sync_await import _sync_await

from components.fleet import model


def cluster_provider(name: str, kubeconfig: pulumi.Output[Any], ambient: str | None) -> k8s.Provider:
    """A provider for one cluster of the fleet: its exported kubeconfig document, or, for a platform on the
    ambient kubeconfig, that file with the platform's context (as the platform itself reached it)."""
    if ambient is not None:
        return k8s.Provider(
            name, context=None if ambient == "current" else ambient, enable_server_side_apply=True
        )
    return k8s.Provider(name, kubeconfig=kubeconfig, enable_server_side_apply=True)


def ambient_context_of(ref: pulumi.StackReference) -> str | None:
    """The ambient context a platform's exported kubeconfig names, read synchronously like its outputs
    (components/job_stack.py read_platform), so the provider is chosen before anything registers."""
    details = _sync_await(ref.get_output_details("kubeconfig"))
    value = details.value if details.value is not None else details.secret_value
    return model.ambient_context(value) if isinstance(value, str) else None


def platform_provider(name: str, ref: pulumi.StackReference) -> k8s.Provider:
    """A provider for the cluster of the platform stack `ref`, as that platform reached it: its exported
    kubeconfig document, or the ambient kubeconfig with its context where the platform is an existing
    cluster on the ambient file (its `kubeconfig` output is then a placeholder, not a kubeconfig; the
    fleet's job stacks reach a worker this way too)."""
    return cluster_provider(name, ref.require_output("kubeconfig"), ambient_context_of(ref))
