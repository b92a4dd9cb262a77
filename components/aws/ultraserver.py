"""P6e-GB200/GB300 UltraServers on EKS: what a rack pool must be, and the NVLink domain its nodes join.

Pure (no pulumi_aws): the AWS rules and the node group share it.

Sources:
- EKS user guide, "Use P6e-GB200 UltraServers with Amazon EKS" (ml-eks-nvidia-ultraserver): the
  p6e-gb200.36xlarge instance (4 Blackwell GPUs) comes only inside UltraServers; `u-p6e-gb200x36` has 9
  instances, `u-p6e-gb200x72` has 18; EKS supports them from Kubernetes 1.33, with DRA, on managed or
  self-managed node groups (not Karpenter or Auto Mode, which do not support DRA); a managed node group
  with Capacity Blocks needs a custom launch template (components/aws/capacity.py makes one); the AL2023
  ARM NVIDIA AMI (AMI type AL2023_ARM_64_NVIDIA, components/aws/node_image.py) is the recommended one;
  upgrading such a node group needs its desired size set to 0 first.
- EC2 user guide, "Capacity Blocks for ML": UltraServers are reserved as Capacity Blocks
  (CapacityBlock.ultraserverType in the EC2 API reference).
- GB300: the UltraServer sizes of p6e-gb300.36xlarge were NOT found in the stored AWS pages; a rack pool
  of GB300 is held to whole NVL72 racks (18 nodes), the one size its NVLink domain (72 GPUs of 4-GPU
  nodes, components/aws/data/catalog.yaml nvlinkDomain) guarantees.

Kubernetes: the NVIDIA DRA driver's ComputeDomains need resource.k8s.io/v1 (GA in 1.34) and Kubernetes
>= 1.34.2 (../shared/FACTS.md "NVL72"); an EKS stack names a minor only and EKS picks the patch, so the
rule here is the minor and the patch floor is noted for the operator (docs/rack-scale.md).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence

from components.catalog import MachineShape
from components.outputs import RackDomain
from components.spec import NodePoolSpec

# Nodes per UltraServer, smallest first, per instance type (module doc).
ULTRASERVER_NODES: dict[str, tuple[int, ...]] = {
    "p6e-gb200.36xlarge": (9, 18),
    "p6e-gb300.36xlarge": (18,),  # unconfirmed whether a 9-node GB300 UltraServer is sold (module doc)
}
# The DRA API ComputeDomains need (resource.k8s.io/v1, GA in Kubernetes 1.34).
RACK_MIN_MINOR = (1, 34)
RACK_MIN_PATCH = "1.34.2"


def rack_shape(shapes: Sequence[MachineShape]) -> MachineShape | None:
    """The pool's machine when its NVLink domain spans nodes (an NVL72 rack), else None."""
    shape = shapes[0] if shapes else None
    if shape is None or not shape.gpus or shape.nvlink_domain <= shape.gpus:
        return None
    return shape


def rack_domain(shapes: Sequence[MachineShape], max_nodes: int) -> RackDomain | None:
    """The NVLink domain a pool's nodes join: the largest UltraServer its maxNodes is a whole number of
    (u-p6e-gb200x72: 72 GPUs on 18 nodes; u-p6e-gb200x36: 36 GPUs on 9), else the catalog's whole rack
    (nvlinkDomain; the rules refuse such a pool)."""
    shape = rack_shape(shapes)
    if shape is None:
        return None
    sizes = ULTRASERVER_NODES.get(shape.name, (shape.nvlink_domain // shape.gpus,))
    nodes = next((n for n in sorted(sizes, reverse=True) if max_nodes and max_nodes % n == 0), None)
    nodes = nodes or shape.nvlink_domain // shape.gpus
    return RackDomain(gpus=nodes * shape.gpus, nodes=nodes)


def check_rack_pool(
    pool: NodePoolSpec, shape: MachineShape, kubernetes_version: str, path: str, root: str
) -> Iterable[str]:
    """A rack pool is sized in whole UltraServers, has the 4 GPUs of its node, and runs where DRA is GA."""
    sizes = ULTRASERVER_NODES.get(shape.name, (shape.nvlink_domain // shape.gpus,))
    step = sizes[0]
    names = " or ".join(map(str, sizes))
    for key, n in (("minNodes", pool.min_nodes), ("maxNodes", pool.effective_max_nodes)):
        if n % step:
            yield (
                f"{path}.{key}: {n} is not a whole number of {shape.name} UltraServers ({names} nodes each; "
                "EC2 sells them as Capacity Blocks of whole UltraServers)"
            )
    if pool.gpus_per_node and pool.gpus_per_node != shape.gpus:
        yield f"{path}.gpusPerNode: {shape.name} has {shape.gpus} GPUs per node, not {pool.gpus_per_node}"
    minor = tuple(int(p) for p in kubernetes_version.split(".")[:2])
    if minor < RACK_MIN_MINOR:
        yield (
            f"{root}.cluster.kubernetesVersion: {kubernetes_version} is too old for {pool.gpu} rack pools: "
            f"the NVIDIA DRA driver's ComputeDomains need resource.k8s.io/v1 (Kubernetes >= {RACK_MIN_PATCH})"
        )


def rack_topology(levels: Sequence[str], rack: RackDomain | None) -> tuple[str, ...]:
    """The pool's topology levels with the NVLink clique just above the host when the pool is a rack:
    Kueue's Topology then places a job's pods within one clique (contract/rack.py CLIQUE_LABEL).

    >>> rack_topology(("topology.k8s.aws/network-node-layer-1", "kubernetes.io/hostname"), RackDomain(gpus=72, nodes=18))
    ('topology.k8s.aws/network-node-layer-1', 'nvidia.com/gpu.clique', 'kubernetes.io/hostname')
    """
    if rack is None or not levels or rack.clique_label in levels:
        return tuple(levels)
    return (*levels[:-1], rack.clique_label, levels[-1])


def ultraserver_count(max_nodes: int, rack: RackDomain) -> int:
    """How many UltraServers (NVLink domains) a pool of `max_nodes` holds: what its Capacity Block buys."""
    return max_nodes // rack.nodes


# The host's own IMEX service must not run where the DRA driver runs IMEX in its compute-domain daemons:
# "On all GPU nodes where the nvidia-imex-* packages are installed, the nvidia-imex.service systemd unit must
# be disabled" (kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1 docs/prerequisites.md). The EKS AL2023 NVIDIA
# AMI installs the nvidia-imex package (awslabs/amazon-eks-ami@81fec2e, 2026-07-23,
# templates/al2023/provisioners/install-nvidia-driver.sh) and enables only nvidia-fabricmanager and
# nvidia-persistenced there; whether the package's own preset enables the unit was not confirmed, so rack
# nodes disable and mask it at boot, as the driver's docs say. A managed node group's launch template takes
# user data as MIME multi-part, which EKS merges with its own (EKS user guide, "Customize managed nodes with
# launch templates", user data).
IMEX_BOUNDARY = "==TRAINPLANE-RACK=="
IMEX_SCRIPT = (
    "#!/bin/bash\nsystemctl disable --now nvidia-imex.service || true\nsystemctl mask nvidia-imex.service\n"
)


def rack_user_data(rack: RackDomain | None) -> str | None:
    """The launch template's user data (base64 MIME) of a rack pool's nodes; None for every other pool."""
    if rack is None:
        return None
    mime = (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{IMEX_BOUNDARY}"\n\n'
        f"--{IMEX_BOUNDARY}\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\n\n'
        f"{IMEX_SCRIPT}\n"
        f"--{IMEX_BOUNDARY}--\n"
    )
    return base64.b64encode(mime.encode()).decode()
