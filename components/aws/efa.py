"""EFA for GPU pools: the device plugin, and what a training pod on an EFA pool must request and set.

The device plugin advertises `vpc.amazonaws.com/efa` (one device per EFA interface of the node); a pod
gets EFA devices only by requesting them, so an EFA pool reports all of its nodes' devices as an
extended resource and the in-cluster layer requests them in every job pod. The chart's own node
affinity limits the plugin to EFA-capable instance types; it must tolerate the GPU taint because EFA
nodes here are GPU nodes.

The libfabric/NCCL environment follows aws/aws-ofi-nccl `doc/efa-env-var.md` ("EFA Cheatsheet"):
- `FI_PROVIDER=efa`: preset for EFA-enabled GPU instances (needed up to aws-ofi-nccl 1.5; newer
  plugins force the efa provider themselves when it is unset, src/platform-aws.cpp), so a pod on an
  EFA pool never silently picks another libfabric provider whatever plugin its image ships.
- `FI_EFA_USE_DEVICE_RDMA=1`: GPUDirect RDMA; required with aws-ofi-nccl 1.6.x on p4/p5, "not harmful"
  with newer software, and only on instance types that have it (the plugin's platform table marks
  them `gdr_required`): set only when every type of the pool supports it.
- `FI_EFA_USE_HUGE_PAGE=0`: the cheatsheet's fix for `os.fork()` failing with "Cannot allocate memory"
  under multi-process PyTorch data loaders, which the trainer uses (`numWorkers`, default 4 per GPU
  process); it also keeps libfabric off huge pages a pod has not requested.
Not set, on purpose: `NCCL_PROTO=simple` (only for aws-ofi-nccl <= 1.5; it disables NCCL's LL/LL128
protocols on newer ones), `FI_EFA_FORK_SAFE` and `RDMAV_FORK_SAFE` ("not needed" / "do not use"), and
the NCCL buffer and chunk sizes the plugin sets per platform itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import GPU_TAINT_EFFECT, GPU_TAINT_KEY, NodePoolInfo, gpu_taint_tolerations
from components.charts import chart

EFA_RESOURCE = "vpc.amazonaws.com/efa"
# Instance types with EFA and GPUDirect RDMA, from aws-ofi-nccl's platform table (src/platform-aws.cpp,
# entries with `gdr_required = true`: p4d, p4de, p5/p5e 48xlarge, p5en, p6-b200), limited to types the
# catalog knows. p5.4xlarge has its own entry without it.
GPUDIRECT_RDMA_TYPES = frozenset(
    {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"}
)


def efa_pod_env(instance_types: Iterable[str]) -> dict[str, str]:
    """The libfabric environment for a training pod on an EFA pool of `instance_types` (module doc)."""
    types = list(instance_types)
    env = {"FI_PROVIDER": "efa", "FI_EFA_USE_HUGE_PAGE": "0"}
    if types and all(t in GPUDIRECT_RDMA_TYPES for t in types):
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env


@dataclass(frozen=True, kw_only=True)
class EfaDevicePluginArgs:
    provider: k8s.Provider
    ready: Sequence[pulumi.Resource] = ()
    # The pools it runs on: every taint of theirs is tolerated with its own effect (a pool's extra taints,
    # NoExecute included, used to keep the plugin, and so the EFA devices, off the pool).
    pools: Sequence[NodePoolInfo] = ()


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
                "tolerations": gpu_taint_tolerations(args.pools, [GPU_TAINT_KEY], GPU_TAINT_EFFECT),
            },
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.ready)),
        )
        self.register_outputs({})
