"""What an existing cluster (`cloud: kubernetes`) accepts: node pools are label selectors of nodes
that exist, storage is NFS servers that already export their paths; nothing is provisioned."""

from __future__ import annotations

import re
from collections.abc import Iterable

from components.spec.base import Spec
from components.spec.platform import ClusterSpec, GpuOperatorSpec, NodePoolSpec, PlatformSpec, StorageSpec
from components.spec.rules import check_declared_pool

KEYS: dict[type[Spec], frozenset[str]] = {
    ClusterSpec: frozenset({"context", "storageClass", "apiServer"}),
    NodePoolSpec: frozenset({"selector", "topologyLevels"}),
    StorageSpec: frozenset({"server", "path"}),
    GpuOperatorSpec: frozenset({"driver"}),
}


def check_pool(spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
    if not pool.selector:
        yield f"{path}.selector: required on cloud kubernetes (labels of the existing nodes)"
    yield from check_declared_pool(pool, path, "kubernetes")
    yield from _check_topology_levels(pool, path)


# A label key: an optional DNS-subdomain prefix and a name (Kubernetes apimachinery IsQualifiedName).
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _check_topology_levels(pool: NodePoolSpec, path: str) -> Iterable[str]:
    levels = pool.topology_levels
    if not levels:
        return
    for i, level in enumerate(levels):
        if not _LABEL_KEY.match(level):
            yield f"{path}.topologyLevels[{i}]: {level!r} is not a node label key"
    if len(set(levels)) != len(levels):
        yield f"{path}.topologyLevels: a label is listed more than once"
    if levels[-1] != "kubernetes.io/hostname":
        yield (
            f"{path}.topologyLevels: must end with kubernetes.io/hostname (the node); "
            "list the broadest level first"
        )


def check_storage(spec: PlatformSpec, st: StorageSpec, path: str) -> Iterable[str]:
    if st.kind == "lustre":
        yield f"{path}.kind: lustre is provisioned on aws or gcp; on an existing cluster use kind nfs"
        return
    if not st.server:
        yield f"{path}.server: required for nfs on an existing cluster (the NFS server's address)"
    if not st.path:
        yield f"{path}.path: required for nfs on an existing cluster (the exported path)"
