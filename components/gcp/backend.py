"""The GCP backend (`cloud: gcp`): GKE, node pools, Filestore / Managed Lustre, GCS, Workload Identity.

Light on purpose: the registry imports it to validate a stack, and only `build` imports pulumi_gcp.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from components.backends import BuildArgs, load_data_file
from components.catalog import MachineShape, catalog
from components.gcp import rules

if TYPE_CHECKING:
    import pulumi

    from components.bundle import ClusterBundle
    from components.spec import NodePoolSpec, PlatformSpec, StorageSpec


class GcpBackend:
    name = "gcp"
    keys = rules.KEYS
    twins = rules.TWINS
    # GKE gives non-system pods of a spot VM about 15-30 s by default (GKE docs, "Spot VMs").
    preemption_grace_seconds = 30

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        return rules.check(spec, root)

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        return rules.check_pool(spec, pool, path)

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        return rules.check_storage(spec, storage, path)

    def machine_of(self, pool: NodePoolSpec) -> MachineShape | None:
        """The pool's machine type, else the cheapest one carrying its GPUs."""
        if pool.machine_type:
            return catalog().machine("gcp", pool.machine_type)
        if pool.gpu and pool.gpus_per_node:
            shapes = catalog().shapes("gcp", pool.gpu, pool.gpus_per_node)
            return shapes[0] if shapes else None
        return None

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        from components.gcp.cloud import GcpCloud, GcpCloudArgs

        return GcpCloud(name, GcpCloudArgs(spec=args.spec), opts).bundle

    @cache  # noqa: B019 - one instance for the life of the process
    def verify_facts(self) -> Mapping[str, Any]:
        return load_data_file("components.gcp", "verify_facts.yaml")


BACKEND = GcpBackend()
