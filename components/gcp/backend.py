"""The GCP backend (`cloud: gcp`): GKE, node pools, Filestore / Managed Lustre, GCS, Workload Identity.

Light on purpose: the registry imports it to validate a stack, and only `build` imports pulumi_gcp.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from components.backends import BuildArgs, MockAnswers
from components.catalog_backend import CatalogBackend
from components.gcp import rules, spec_keys

if TYPE_CHECKING:
    import pulumi

    from components.backends import Prompt
    from components.bundle import ClusterBundle
    from components.spec import PlatformSpec


class GcpBackend(CatalogBackend):
    name = "gcp"
    title = "GCP"
    rules = rules
    keys = rules.KEYS
    spec_keys = spec_keys
    twins = rules.TWINS
    # GKE gives non-system pods of a spot VM about 15-30 s by default (GKE docs, "Spot VMs").
    preemption_grace_seconds = 30
    support_calendar = "gke"
    machine_key = "machineType"
    object_store = "gs"
    system_pool = {"name": "system", "machineType": "e2-standard-4", "minNodes": 1, "maxNodes": 3}
    default_region = "us-central1"

    def machine_type_problem(self, name: str, known: Sequence[str]) -> str | None:
        from components.gcp.regions import machine_type_problem

        return machine_type_problem(name, known)

    def quickstart(self, get: Prompt, gpu_pool: dict[str, Any]) -> dict[str, Any]:
        """The project to deploy into, beside the region; no answer leaves it out, and the platform's rules
        ask for it ("required for cloud gcp") rather than reject an empty id."""
        part = super().quickstart(get, gpu_pool)
        out = {
            "region": part["region"],
            **({"project": p} if (p := get("project")) else {}),
            "nodePools": part["nodePools"],
        }
        if not get("kubernetesVersion") and (capped := _capped_minor(part["nodePools"])):
            # The default minor (the newest in standard support) is newer than the GPU machine boots.
            out["cluster"] = {"kubernetesVersion": capped}
        return out

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        from components.gcp.cloud import GcpCloud, GcpCloudArgs

        return GcpCloud(name, GcpCloudArgs(spec=args.spec), opts).bundle

    def create_seconds(self) -> Mapping[str, float]:
        from components.gcp.cost import CREATE_SECONDS

        return CREATE_SECONDS

    def control_plane_hourly(self, spec: PlatformSpec) -> float:
        from components.gcp.cost import CONTROL_PLANE_HOURLY

        return CONTROL_PLANE_HOURLY

    def cost_assumptions(self, spec: PlatformSpec) -> list[str]:
        from components.gcp.cost import cost_assumptions

        return cost_assumptions(spec)

    def mock_answers(self) -> MockAnswers:
        from components.gcp.mock import ANSWERS

        return ANSWERS


BACKEND = GcpBackend()


def _capped_minor(pools: list[dict[str, Any]]) -> str | None:
    """The newest GKE minor the quickstart's GPU machines boot (facts `newestMinor`, TCPX), None: no cap."""
    from pydantic import ValidationError

    from components.gcp.fabric_rules import platform_fabrics
    from components.gcp.maintenance import NEWEST_MINOR
    from components.spec import PlatformSpec

    try:
        spec = PlatformSpec.model_validate(
            {"cloud": "gcp", "cluster": {"name": "quickstart"}, "nodePools": pools}
        )
    except ValidationError:
        return None  # validation names the problem when the stack loads
    caps = [NEWEST_MINOR[f.kind] for f in platform_fabrics(spec) if f.kind in NEWEST_MINOR]
    return min(caps, key=lambda m: tuple(int(p) for p in m.split("."))) if caps else None
