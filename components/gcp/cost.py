"""What `trainplane plan` needs to cost and time a GCP platform (no pulumi_gcp import).

Machine prices are the catalog's (components/gcp/data/catalog.yaml, `pricing`); this module holds the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from components.spec.capacity import DWS

if TYPE_CHECKING:
    from components.spec import PlatformSpec

# Rough creation times in seconds per resource type, from provider docs and deploy logs. Used only to
# find the critical path and estimate its length.
CREATE_SECONDS: dict[str, float] = {
    "gcp:container/cluster:Cluster": 480,
    "gcp:container/nodePool:NodePool": 300,
    "gcp:filestore/instance:Instance": 300,
    "gcp:lustre/instance:Instance": 1200,
    "gcp:compute/network:Network": 30,
    "gcp:compute/subnetwork:Subnetwork": 20,
    "gcp:compute/router:Router": 20,
    "gcp:compute/routerNat:RouterNat": 30,
    "gcp:serviceaccount/account:Account": 5,
    "gcp:storage/bucket:Bucket": 5,
}

# The GKE Standard cluster management fee in USD per hour (GKE pricing page: $0.10 per cluster per hour).
CONTROL_PLANE_HOURLY = 0.10


def cost_assumptions(spec: PlatformSpec) -> list[str]:
    """Flex-start and queued pools are priced at on-demand, which overstates them: say so."""
    dws = [p.name for p in spec.node_pools if p.capacity in DWS]
    if not dws:
        return []
    return [
        f"{', '.join(dws)}: GKE flex-start/queued nodes priced at on-demand (Google bills them at a "
        "discounted flex-start rate the catalog does not hold): an upper bound"
    ]
