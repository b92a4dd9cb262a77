"""What an existing cluster (`cloud: kubernetes`) accepts: node pools are label selectors of nodes
that exist, storage is NFS servers that already export their paths; nothing is provisioned."""

from __future__ import annotations

from collections.abc import Iterable

from components.spec.base import Spec
from components.spec.platform import ClusterSpec, GpuOperatorSpec, NodePoolSpec, PlatformSpec, StorageSpec
from components.spec.rules import check_declared_pool

KEYS: dict[type[Spec], frozenset[str]] = {
    ClusterSpec: frozenset({"context", "storageClass"}),
    NodePoolSpec: frozenset({"selector"}),
    StorageSpec: frozenset({"server", "path"}),
    GpuOperatorSpec: frozenset({"driver"}),
}


def check_pool(spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
    if not pool.selector:
        yield f"{path}.selector: required on cloud kubernetes (labels of the existing nodes)"
    yield from check_declared_pool(pool, path, "kubernetes")


def check_storage(spec: PlatformSpec, st: StorageSpec, path: str) -> Iterable[str]:
    if st.kind == "lustre":
        yield f"{path}.kind: lustre is provisioned on aws or gcp; on an existing cluster use kind nfs"
        return
    if not st.server:
        yield f"{path}.server: required for nfs on an existing cluster (the NFS server's address)"
    if not st.path:
        yield f"{path}.path: required for nfs on an existing cluster (the exported path)"
