"""The NVIDIA DRA driver for GPUs, its ComputeDomain half: multi-node NVLink for rack-scale pools.

Installed when a pool has rack-scale GPUs (`NodePoolInfo.rack`, set by the backend that built the pool:
GB200/GB300 NVL72). GPUs themselves stay with the GPU operator's device plugin (`nvidia.com/gpu`); this
driver only adds ComputeDomains: the controller turns each job's ComputeDomain into IMEX daemons on its
nodes, and the kubelet plugin hands each pod its channel (contract/rack.py).

Chart dra-driver-nvidia-gpu 0.4.1 (components/charts.py; defaults in
../shared/reference/charts/dra-driver-nvidia-gpu-0.4.1.values.yaml), every value below read at
kubernetes-sigs/dra-driver-nvidia-gpu tag v0.4.1 (764900e), deployments/helm/dra-driver-nvidia-gpu/:
- `resources.gpus.enabled: false`: templates/validation.yaml fails the install when GPU allocation is on
  without `gpuResourcesEnabledOverride` ("this DRA driver cannot be deployed alongside the standard GPU
  device plugin on the same node"); the GPU operator's device plugin keeps serving `nvidia.com/gpu`.
- `resources.computeDomains.enabled: true` (the default, said out loud): templates/controller.yaml and
  the ComputeDomain container of templates/kubeletplugin.yaml and the two DeviceClasses
  (templates/deviceclass-compute-domain-*.yaml) render only with it.
- `kubeletPlugin.affinity`: the chart's default requires NFD's NVIDIA PCI labels or the GPU operator's
  `nvidia.com/gpu.present` (values.yaml), i.e. every GPU node; here only the rack pools' nodes (by
  trainplane's pool label), the only nodes with an NVLink fabric and IMEX channels.
  `kubeletPlugin.tolerations`: the chart tolerates `nvidia.com/gpu` NoSchedule only; here every taint of
  the rack pools with its own effect (templates/kubeletplugin.yaml copies both keys as given).
- `nvidiaDriverRoot`: where the node image keeps the GPU driver, from the cloud profile
  (`CloudProfile.dra_driver_values`; values.yaml: "/" for a driver installed on the host,
  /run/nvidia/driver for the GPU operator's driver container). The chart's default "/" stays otherwise.
- the controller (templates/controller.yaml `controller.nodeSelector/affinity/tolerations`) keeps the
  chart's placement: it prefers control-plane nodes, which a managed cluster hides, so it runs on the
  system nodes, tolerating no GPU taint.
- the namespace is labelled Pod Security `privileged`: the kubelet plugin's containers run privileged
  (templates/kubeletplugin.yaml `privileged: true`; values.yaml containers.computeDomains.securityContext),
  as trainplane's monitoring namespace is for node-exporter (components/incluster/platform.py).
- the CRDs (ComputeDomain, ComputeDomainClique) come from the chart's crds/ directory, which helm.v3.Release
  installs before the templates.

Host prerequisites the chart cannot set (docs/prerequisites.md at v0.4.1): Kubernetes >= 1.34.2; NVIDIA
driver >= 570.158.01; GPU Feature Discovery for the `nvidia.com/gpu.clique` labels (the GPU operator's
`gfd`, switched on in gpu_operator.py when a rack pool exists); and "on all GPU nodes where the
nvidia-imex-* packages are installed, the nvidia-imex.service systemd unit must be disabled": the driver
runs IMEX itself in its compute-domain daemons (docs/architecture.md). Whether a cloud's node image ships
that unit enabled is the cloud's to say (docs/rack-scale.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components.bundle import POOL_LABEL, ClusterBundle, NodePoolInfo
from components.incluster.chart_release import ChartInNamespace, ChartResources, release_in_namespace
from components.incluster.gpu_operator import deep_merge
from components.incluster.names import DRA_DRIVER_NAMESPACE, DRA_DRIVER_RELEASE


def rack_pools(pools: Sequence[NodePoolInfo]) -> tuple[NodePoolInfo, ...]:
    """The pools whose NVLink domain spans nodes (the driver's kubelet plugin runs on their nodes)."""
    return tuple(p for p in pools if p.rack is not None)


def dra_driver_values(bundle: ClusterBundle) -> dict[str, Any]:
    """Helm values of the dra-driver-nvidia-gpu chart for this platform's rack pools (module doc)."""
    racks = rack_pools(bundle.node_pools)
    names = sorted({p.labels.get(POOL_LABEL, p.name) for p in racks})
    tolerations = sorted(
        ({"key": t.key, "operator": "Exists", "effect": t.effect} for p in racks for t in p.taints),
        key=lambda t: (t["key"], t["effect"]),
    )
    unique = [t for i, t in enumerate(tolerations) if t not in tolerations[:i]]
    values: dict[str, Any] = {
        "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        "kubeletPlugin": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": names}]}
                        ]
                    }
                }
            },
            "tolerations": unique,
        },
    }
    # The cloud's own values (driver root) win over the neutral ones.
    return deep_merge(values, bundle.profile.dra_driver_values)


@dataclass(frozen=True, kw_only=True)
class DraDriverArgs:
    bundle: ClusterBundle


class DraDriver(pulumi.ComponentResource):
    """The pinned dra-driver-nvidia-gpu release (ComputeDomains only) in its own privileged namespace."""

    resources: ChartResources

    def __init__(self, name: str, args: DraDriverArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:DraDriver", name, None, opts)
        # The kubelet plugin is privileged (host paths, the driver's devices); the DaemonSet waits for no node
        # (a Capacity Block pool has none outside its dates), the controller for the system nodes.
        self.resources = release_in_namespace(
            self,
            name,
            "release",
            args.bundle,
            ChartInNamespace(
                chart="dra-driver-nvidia-gpu",
                namespace=DRA_DRIVER_NAMESPACE,
                release=DRA_DRIVER_RELEASE,
                values=dra_driver_values(args.bundle),
                pod_security="privileged",
            ),
        )
        self.register_outputs({"release": self.resources.release.name})
