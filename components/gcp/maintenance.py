"""Holding a GKE cluster on a minor version its GPUDirect machines can boot.

GKE 1.35 node images are COS 125, and a3-highgpu-8g (GPUDirect-TCPX) boots COS 121 or older: once a
release channel auto-upgrades such a cluster (control plane, then node pools) to 1.35, the pool's nodes
cannot be created any more (GoogleCloudPlatform/cluster-toolkit PR #5673, "Fix A3 HighGPU test by pinning
GKE version to 1.33 to resolve COS incompatibility"). The toolkit's fix, kept here
(examples/gke-a3-highgpu/gke-a3-highgpu.yaml@v1.92.0..v1.95.0, module gke_cluster):
- the version is pinned (`version_prefix` -> min_master_version; here the stack's `kubernetesVersion`,
  which the spec rules keep at or below the fabric's newest minor);
- the cluster stays in a release channel (REGULAR there) with a maintenance exclusion of scope
  `NO_MINOR_OR_NODE_UPGRADES` and `exclusion_end_time_behavior: UNTIL_END_OF_SUPPORT`
  (modules/scheduler/gke-cluster/main.tf@v1.95.0 maps it to maintenance_policy.maintenance_exclusion
  {exclusion_name, start_time, exclusion_options {scope, end_time_behavior}}, with the daily maintenance
  window at `maintenance_start_time`, default "09:00");
- the node pool keeps `auto_upgrade: true` (gke-a3-highgpu.yaml@v1.95.0 a3_highgpu_pool): GKE does not let
  a pool of a cluster enrolled in a release channel turn node auto-upgrade off (GKE docs, "Auto-upgrading
  nodes"); the exclusion is what holds the nodes, and control plane patches still land.

Which channel: `UNTIL_END_OF_SUPPORT` ends the exclusion at "the cluster control plane version's end of
support time, or end of extended support time when the cluster is on extended support channel"
(google.container.v1 NodePool.ExclusionUntilEndOfSupport.end_time, GKE API reference). On REGULAR (the
toolkit's example) the hold thus ends at the minor's end of standard support (GKE 1.34: 2026-10-01,
components/gcp/data/k8s_support.yaml) and GKE upgrades the cluster to a minor the machines cannot boot. A held
cluster is therefore on the EXTENDED channel (its default here; another channel is a load error naming
`cluster.releaseChannel`, and verify's fabric check fails it): during standard support it gets the Regular
channel's patches ("Introducing GKE extended support", Google Cloud blog, 2024-07-17), after it the
extended support period (about 10 more months) and GKE's extended-support fee (`trainplane plan` warns).

Why no computed `end_time`: the provider takes exactly one of `end_time` and
`exclusion_options.end_time_behavior` (pulumi_gcp 10.2 ClusterMaintenancePolicyMaintenanceExclusionArgs),
and an exclusion of this scope may last until the end of support of the cluster's minor (GKE docs,
"Maintenance windows and exclusions": scopes and their maximum length). `UNTIL_END_OF_SUPPORT` has GKE set
the end to exactly that date, from the version the cluster runs: deterministic in our inputs, no wall
clock, and no table of support dates in this repository to go stale. The start time is a constant (a
wall-clock start would change the cluster's inputs on every `pulumi up`).
"""

from __future__ import annotations

from typing import Any

# Fabric kind -> the newest GKE minor its machines boot (1.35 brings COS 125; cluster-toolkit PR #5673).
NEWEST_MINOR = {"tcpx": "1.34"}
# The release channel whose end of support is the end of extended support (see above).
HELD_RELEASE_CHANNEL = "EXTENDED"
EXCLUSION_NAME = "no-minor-or-node-upgrades-gpudirect"
EXCLUSION_SCOPE = "NO_MINOR_OR_NODE_UPGRADES"
END_TIME_BEHAVIOR = "UNTIL_END_OF_SUPPORT"
# gke-a3-highgpu.yaml@v1.95.0 maintenance_exclusions[0].start_time.
EXCLUSION_START = "2026-04-01T00:00:00Z"
# modules/scheduler/gke-cluster/variables.tf@v1.95.0 maintenance_start_time default (GMT, HH:MM).
MAINTENANCE_START = "09:00"


def holds_upgrades(fabric_kinds: set[str] | frozenset[str]) -> bool:
    """Whether a platform with pools of these fabric kinds must be held on its minor version."""
    return bool(fabric_kinds & NEWEST_MINOR.keys())


def maintenance_policy() -> dict[str, Any]:
    """The cluster's maintenance_policy input that holds minor and node upgrades until end of support."""
    return {
        "daily_maintenance_window": {"start_time": MAINTENANCE_START},
        "maintenance_exclusions": [
            {
                "exclusion_name": EXCLUSION_NAME,
                "start_time": EXCLUSION_START,
                "exclusion_options": {"scope": EXCLUSION_SCOPE, "end_time_behavior": END_TIME_BEHAVIOR},
            }
        ],
    }
