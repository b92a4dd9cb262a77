"""The EFA device plugin: advertises `vpc.amazonaws.com/efa` on EFA nodes so NCCL jobs can request it.

The chart's own node affinity already limits it to EFA-capable instance types; it must tolerate the GPU
taint because EFA nodes here are GPU nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import GPU_TAINT_EFFECT, GPU_TAINT_KEY
from components.charts import chart


@dataclass(frozen=True)
class EfaDevicePluginArgs:
    provider: k8s.Provider
    ready: Sequence[pulumi.Resource] = ()


class EfaDevicePlugin(pulumi.ComponentResource):
    """The aws-efa-k8s-device-plugin DaemonSet, pinned in components/charts.py."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:EfaDevicePlugin", name, None, opts)
        c = chart("aws-efa-k8s-device-plugin")
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name="aws-efa-k8s-device-plugin",
            namespace="kube-system",
            **c.release_args(),
            values={
                "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}],
            },
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.ready)),
        )
        self.register_outputs({})
