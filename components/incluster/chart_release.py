"""A pinned Helm chart installed in a namespace of its own: what the JobSet controller and the DRA driver
(and any agent shipped as a chart) each are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import ClusterBundle
from components.charts import CHARTS
from components.incluster.names import RELEASE_TIMEOUT_S


@dataclass(frozen=True, kw_only=True)
class ChartInNamespace:
    chart: str  # the key in CHARTS
    namespace: str
    release: str
    values: Mapping[str, Any]
    # The Pod Security level the chart's pods need in their namespace; None: the cluster's default.
    pod_security: str | None = None


@dataclass(frozen=True, kw_only=True)
class ChartResources:
    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release


def release_in_namespace(
    parent: pulumi.Resource, name: str, release_suffix: str, bundle: ClusterBundle, spec: ChartInNamespace
) -> ChartResources:
    """The namespace `<name>-ns` (with the platform's ownership labels) and the release
    `<name>-<release_suffix>` of the pinned chart in it. The release waits for `bundle.ready`: the chart's
    controller pods need nodes to run on before Helm's wait can succeed."""
    labels = dict(bundle.owner_labels)
    if spec.pod_security:
        labels = {"pod-security.kubernetes.io/enforce": spec.pod_security, **labels}
    ns = k8s.core.v1.Namespace(
        f"{name}-ns",
        metadata={"name": spec.namespace, "labels": labels},
        opts=pulumi.ResourceOptions(parent=parent),
    )
    rel = k8s.helm.v3.Release(
        f"{name}-{release_suffix}",
        name=spec.release,
        namespace=ns.metadata["name"],
        **CHARTS[spec.chart].release_args(),
        values=dict(spec.values),
        timeout=RELEASE_TIMEOUT_S,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(bundle.ready)),
    )
    return ChartResources(namespace=ns, release=rel)
