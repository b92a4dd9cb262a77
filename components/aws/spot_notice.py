"""Spot notice: EC2's two-minute interruption notice becomes a SIGTERM for the pods on the node.

A trainer on a spot node survives a reclaim only if its pod gets SIGTERM early enough to write the
preemption checkpoint (the launcher gives its workers TRAINPLANE_GRACE_S = the pod's
terminationGracePeriodSeconds - 10 s; 120 s on AWS, components/aws/profile.py) and then exits 143, which
the failure policy retries without counting. EC2 gives two minutes between the notice and the
interruption (EC2 user guide, "Spot Instance interruption notices"). Options weighed:

- EKS managed node groups with capacityType SPOT (ours: components/aws/node_group.py) turn on Capacity
  Rebalancing; on a rebalance recommendation EKS launches a replacement and, once it is Ready, cordons
  and drains the at-risk node; "If a Spot two-minute interruption notice arrives before the replacement
  Spot node is in a Ready state, Amazon EKS starts draining the Spot node" (EKS user guide, "Managed node
  groups", Managed node group capacity types > Spot). That drain runs from the control plane on events
  it receives; the guide states no latency for it, and for a scarce GPU type the replacement may never
  become Ready before the notice. It stays on; it is not relied on for the timing.
- kubelet graceful node shutdown (shutdownGracePeriod through AL2023 nodeadm's NodeConfig
  `spec.kubelet.config` in the launch template's user data): the kubelet's systemd inhibitor sees only
  the OS shutdown, which comes with the termination itself, i.e. at the END of the two minutes, not with
  the notice; how long EC2 then waits for the OS is not documented (aws-node-termination-handler's
  README, "Queue Processor with Instance State Change Events", advises a pod grace of at most ~90 s
  there). It would waste the notice; not chosen.
- aws-node-termination-handler in IMDS mode (chosen): a DaemonSet pod on each spot node polls the
  instance's own metadata every 2 s (aws/aws-node-termination-handler@v1.25.6 cmd/node-termination-handler.go:
  monitors on a 2 s tick, events handled on a 1 s tick) and on `spot/instance-action` cordons and
  drains the node at the interruption time minus nodeTerminationGracePeriod (120 s: at once;
  pkg/interruptioneventstore TimeUntilDrain), evicting each pod with its own grace period
  (podTerminationGracePeriod -1). So the trainer gets SIGTERM within ~3 s of the notice, node-local, no
  queue or IAM needed. The eviction marks the pod DisruptionTarget (EvictionByEvictionAPI), which the
  job's failure policy already retries without counting. The handler's own README notes that managed node
  groups "don't need" it: running both only means two drains of the same node, and ours is the one with
  a known latency. Only the spot notice is enabled: rebalance recommendations, scheduled events and ASG
  lifecycle changes are the managed node group's to handle (it drains on them itself).

The chart is aws/aws-node-termination-handler's own (its copy in aws/eks-charts was removed, eks-charts
0b3680f "Deprecate and remove aws-node-termination-handler chart in favor of upstream chart"), published
at oci://public.ecr.aws/aws-ec2/helm (chart README); version pinned in components/charts.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.charts import chart
from components.spec import NodePoolSpec

CHART = "aws-node-termination-handler"
# Label EKS puts on managed nodes (EKS user guide, "Managed node groups"): SPOT on spot capacity.
CAPACITY_LABEL = "eks.amazonaws.com/capacityType"


def needs_spot_notice(pools: Iterable[NodePoolSpec]) -> bool:
    """Whether any pool runs on spot capacity (and so can be reclaimed with a two-minute notice)."""
    return any(p.capacity == "spot" for p in pools)


def spot_notice_values() -> dict[str, Any]:
    """The chart values (keys of aws-node-termination-handler chart 0.27.6 values.yaml, module doc)."""
    return {
        # IMDS mode (a DaemonSet): enableSqsTerminationDraining false is the chart's default, stated.
        "enableSqsTerminationDraining": False,
        # On spot nodes only: nothing to watch on the others.
        "daemonsetNodeSelector": {CAPACITY_LABEL: "SPOT"},
        "enableSpotInterruptionDraining": True,
        # The managed node group handles these itself (module doc).
        "enableRebalanceMonitoring": False,
        "enableRebalanceDraining": False,
        "enableScheduledEventDraining": False,
        "enableASGLifecycleDraining": False,
        # Drain at once (interruption time - 120 s) and give each pod its own terminationGracePeriodSeconds.
        "nodeTerminationGracePeriod": 120,
        "podTerminationGracePeriod": -1,
        # Events on the node say why its pods went away.
        "emitKubernetesEvents": True,
        # daemonsetTolerations keeps its default, [{operator: Exists}]: it runs on tainted GPU nodes too.
        # useHostNetwork keeps its default, true: our launch templates allow IMDSv2 with a hop limit of 1
        # (components/aws/node_group.py), which a pod reaches only from the host network.
    }


@dataclass(frozen=True, kw_only=True)
class SpotNoticeHandlerArgs:
    provider: k8s.Provider
    ready: Sequence[pulumi.Resource] = ()


class SpotNoticeHandler(pulumi.ComponentResource):
    """aws-node-termination-handler in IMDS mode on the spot nodes (module doc)."""

    release: k8s.helm.v3.Release

    def __init__(
        self, name: str, args: SpotNoticeHandlerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainplane:aws:SpotNoticeHandler", name, None, opts)
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=CHART,
            namespace="kube-system",
            **chart(CHART).release_args(),
            values=spot_notice_values(),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.ready)),
        )
        self.register_outputs({})
