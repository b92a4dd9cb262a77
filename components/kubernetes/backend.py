"""The existing-cluster backend (`cloud: kubernetes`): adopts a cluster through its kubeconfig.

Light on purpose: the registry imports it to validate a stack; `build` imports pulumi_kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from components.backends import BackendDefaults, BuildArgs, MockAnswers
from components.kubernetes import rules, spec_keys

if TYPE_CHECKING:
    import pulumi

    from components.bundle import ClusterBundle
    from components.catalog import MachineShape
    from components.spec import NodePoolSpec, PlatformSpec, StorageSpec


class ExistingClusterBackend(BackendDefaults):
    name = "kubernetes"
    keys = rules.KEYS
    spec_keys = spec_keys
    twins: Mapping[str, str] = {}
    # Nodes of an existing cluster are drained by people, who can wait for a checkpoint.
    preemption_grace_seconds = 300

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        return ()

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        return rules.check_pool(spec, pool, path)

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        return rules.check_storage(spec, storage, path)

    def machine_of(self, pool: NodePoolSpec) -> MachineShape | None:
        return None  # the nodes exist; the catalog does not know them

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        from components.kubernetes.cluster import ExistingCluster, ExistingClusterArgs

        return ExistingCluster(
            name, ExistingClusterArgs(spec=args.spec, kubeconfig=args.kubeconfig), opts
        ).bundle

    def cost_assumptions(self, spec: PlatformSpec) -> list[str]:
        # No price basis: `trainplane plan` prices nothing and says why.
        return ["existing cluster: the hardware is already paid for; no cloud prices apply"]

    def mock_answers(self) -> MockAnswers:
        from components.kubernetes.mock import ANSWERS

        return ANSWERS


BACKEND = ExistingClusterBackend()
