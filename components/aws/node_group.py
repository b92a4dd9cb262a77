"""EKS managed node groups: the CPU system pool and GPU pools from the catalog, with EFA where asked.

Every pool gets its own launch template so nodes are hardened the same way everywhere: IMDSv2 only with
a hop limit of 1 (pods cannot reach the node role; they use IRSA), an encrypted gp3 root volume sized
for multi-GB training images, and both the EKS cluster security group and the node security group that
storage admits. GPU pools use the AL2023 NVIDIA AMI (driver and container toolkit on the host), carry
the taint nvidia.com/gpu=present:NoSchedule, and leave `desiredSize` to the cluster autoscaler.

With `efa: true` the launch template adds one EFA interface per network card, the pool gets a cluster
placement group and a single subnet, and a security group that lets the nodes talk to each other on
every port (EFA's SRD traffic is not TCP and is refused otherwise). A pool has ONE EFA layout: its
instance types all have the EFA count of the preferred one (see `machine_shapes`), so the launch
template, the `vpc.amazonaws.com/efa` count the pool reports to the in-cluster layer and the ASG's
scale-from-zero template hold on every node of the pool.

Reserved pools (`capacity: reservation` or `capacity-block`) launch into the ODCR or Capacity Block the
stack names, from one subnet and without a placement group of trainplane's (components/aws/capacity.py).

GPU pools carry the label `k8s.amazonaws.com/accelerator` (node label and ASG template tag): the
cluster autoscaler's AWS provider treats a node with it as a GPU node whose GPUs are still coming
(cloudprovider/aws `GPULabel`; README "Special note on GPU instances"), instead of scaling out again
while the device plugin starts.

The auto scaling group EKS creates for each node group is tagged so the cluster autoscaler can scale it
up from zero: it cannot look at a node that does not exist, so labels, taints and extended resources
come from `k8s.io/cluster-autoscaler/node-template/...` tags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.aws.capacity import (
    CAPACITY_TYPES,
    launch_template_capacity,
    node_group_instance_types,
    placement_group,
    single_zone,
    template_instance_type,
    topology_levels,
)
from components.aws.efa import EFA_RESOURCE, efa_pod_env
from components.aws.node_image import (
    ACCELERATOR_LABEL,
    accelerator_label,
    ami_type,
)
from components.aws.ultraserver import rack_domain, rack_topology, rack_user_data
from components.bundle import NodePoolInfo, TaintInfo, gpu_taint, pool_labels
from components.catalog import MachineShape, catalog
from components.outputs import NodeReplacement
from components.spec import NodePoolSpec

GPU_ROOT_GIB = 200
CPU_ROOT_GIB = 50
EKS_CAPACITY_LABEL = "eks.amazonaws.com/capacityType"
TAINT_EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}
CA_PREFIX = "k8s.io/cluster-autoscaler"
# The autoscaler's --scale-down-unneeded-time (autoscaler.py): an empty node, quarantined too, goes after it.
SCALE_DOWN_UNNEEDED_MINUTES = 10
# EKS node repair (EKS user guide, "Automatically repair nodes in EKS clusters", managed node groups): the
# conditions it acts on, in minutes. Only AcceleratedHardwareReady is a GPU fault (the node monitoring
# agent's); our own signals and condition trigger nothing.
NODE_REPAIR_CONDITIONS = {"AcceleratedHardwareReady": 10, "Ready": 30}
# The type GPU pools were registered as before CPU and GPU pools shared one (stacks deployed before
# keep their pools through this alias).
OLD_GPU_POOL_TYPE = pulumi.Alias(type_="trainplane:aws:GpuNodePool")


def machine_shapes(pool: NodePoolSpec, gpus_per_node: int) -> list[MachineShape]:
    """The instance types a pool may launch, preferred first.

    An explicit instanceType pins the pool to it. Otherwise a spot pool takes every catalog type with
    the same GPU kind and count (more spot pools to draw from, and a training job does not care), an
    on-demand pool the cheapest one. EFA pools keep only EFA-capable types, and of those only the ones
    with the EFA count of the preferred (cheapest) type: one launch template serves the whole group, and
    a pod that requests all EFA devices of a node must find that many on every node of the pool. Mixing
    layouts (H200: p5e has 32 EFA interfaces, p5en 16) would give a p5e node 16 interfaces (half of its
    fabric idle) under a template sized for p5en, or break p5en nodes under one sized for p5e. To draw
    spot capacity from both, declare one pool per layout (instanceType: p5e.48xlarge, p5en.48xlarge).
    """
    if pool.instance_type:
        shape = catalog().machine("aws", pool.instance_type)
        if shape is None:  # a CPU type the catalog does not price
            shape = MachineShape(
                cloud="aws", name=pool.instance_type, vcpus=0, memory_gib=0, on_demand_hourly=0
            )
        return [shape]
    assert pool.gpu is not None, "a pool without instanceType is a GPU pool (checked by the spec)"
    shapes = catalog().shapes("aws", pool.gpu, gpus_per_node)
    if pool.efa:
        shapes = [s for s in shapes if s.efa_interfaces > 0]
        shapes = [s for s in shapes if s.efa_interfaces == shapes[0].efa_interfaces]
    return shapes if pool.capacity == "spot" else shapes[:1]


def node_repair(pool: NodePoolSpec) -> bool:
    """EKS node auto repair is on for GPU pools: GPU faults (XID errors) replace or reboot the node.

    It acts only on conditions the eks-node-monitoring-agent add-on reports, which the cluster installs
    wherever this is true (components/aws/addons.py).
    """
    return pool.is_gpu


def node_replacement(pool: NodePoolSpec) -> NodeReplacement:
    """The cluster autoscaler scales every node group; GPU groups also have node repair (`node_repair`)."""
    return NodeReplacement(
        autoscaler_unneeded_minutes=SCALE_DOWN_UNNEEDED_MINUTES,
        repair_conditions=dict(NODE_REPAIR_CONDITIONS) if node_repair(pool) else {},
    )


def efa_interfaces(count: int, security_group_ids: Sequence[pulumi.Input[str]]) -> list:
    """One interface per network card, as AWS documents for p5: card 0 carries the primary ENA+EFA
    interface at device index 0, every other card an EFA-only interface at device index 1."""
    return [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=i,
            device_index=0 if i == 0 else 1,
            interface_type="efa" if i == 0 else "efa-only",
            security_groups=list(security_group_ids),
            delete_on_termination="true",
            associate_public_ip_address="false",
        )
        for i in range(count)
    ]


def autoscaler_tags(
    cluster_name: str,
    labels: dict[str, str],
    taints: Sequence[TaintInfo],
    resources: dict[str, str] | None = None,
) -> dict[str, str]:
    """ASG tags for cluster-autoscaler auto-discovery and scale-from-zero node templates."""
    tags = {f"{CA_PREFIX}/enabled": "true", f"{CA_PREFIX}/{cluster_name}": "owned"}
    tags.update({f"{CA_PREFIX}/node-template/label/{k}": v for k, v in labels.items()})
    tags.update({f"{CA_PREFIX}/node-template/taint/{t.key}": f"{t.value}:{t.effect}" for t in taints})
    tags.update({f"{CA_PREFIX}/node-template/resources/{k}": v for k, v in (resources or {}).items()})
    return tags


@dataclass(frozen=True, kw_only=True)
class NodePoolArgs:
    pool: NodePoolSpec
    gpus_per_node: int
    cluster_name: str
    # The cluster's name as an output, so the node group waits for the control plane.
    cluster: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_ids: Sequence[pulumi.Input[str]]
    vpc_id: pulumi.Input[str]
    # The EKS cluster security group and the node security group.
    security_group_ids: Sequence[pulumi.Input[str]]
    # What must exist before nodes can join (node role policies, the CNI add-on).
    depends_on: Sequence[pulumi.Resource] = ()
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class NodePoolResources:
    node_group: aws.eks.NodeGroup
    launch_template: aws.ec2.LaunchTemplate
    # EFA and compact pools: the cluster placement group; EFA pools: the group's self-referencing SG.
    placement_group: aws.ec2.PlacementGroup | None
    efa_security_group: aws.ec2.SecurityGroup | None
    # The ASG tags the cluster autoscaler discovers and scales from zero by.
    autoscaler_tags: tuple[aws.autoscaling.Tag, ...]


class NodePool(pulumi.ComponentResource):
    """One managed node group with its launch template (and EFA plumbing), tagged for the autoscaler.

    Registered as `trainplane:aws:NodePool` for CPU and GPU pools alike; GPU pools were once
    `trainplane:aws:GpuNodePool` and carry that type as an alias, so deployed pools are not replaced.
    """

    node_group: aws.eks.NodeGroup
    node_group_name: str
    info: NodePoolInfo
    resources: NodePoolResources

    def __init__(self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        pool = args.pool
        if pool.is_gpu:
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[OLD_GPU_POOL_TYPE]))
        super().__init__("trainplane:aws:NodePool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        shapes = machine_shapes(pool, args.gpus_per_node)
        # What workloads select the pool by (the bundle); the nodes carry these and a few more.
        labels = pool_labels(pool)
        node_labels = dict(labels)
        if pool.gpu:
            # First, so a user's own value for it (already in `labels`) wins.
            node_labels = {ACCELERATOR_LABEL: accelerator_label(pool.gpu), **labels}
        taints = [gpu_taint()] if pool.is_gpu else []
        taints += [TaintInfo(key=t.key, value=t.value, effect=t.effect) for t in pool.taints]
        efa_counts = {s.efa_interfaces for s in shapes} if pool.efa else {0}
        assert len(efa_counts) == 1, f"pool {pool.name} mixes EFA layouts {sorted(efa_counts)}"
        (efa_count,) = efa_counts
        # EFA, compact and reserved pools run in one zone (components.aws.capacity).
        subnet_ids = list(args.subnet_ids)[:1] if single_zone(pool) else list(args.subnet_ids)
        tags = {**args.tags, "trainplane.dev/pool": pool.name}
        self.node_group_name = f"{args.cluster_name}-{pool.name}"

        security_groups: list[pulumi.Input[str]] = list(args.security_group_ids)
        placement = None
        efa_sg = group = None
        if pool.efa:
            efa_sg = aws.ec2.SecurityGroup(
                f"{name}-efa",
                vpc_id=args.vpc_id,
                description=f"EFA traffic between nodes of {self.node_group_name}",
                tags={**tags, "Name": f"{self.node_group_name}-efa"},
                opts=child,
            )
            for direction, rule in (
                ("in", aws.vpc.SecurityGroupIngressRule),
                ("out", aws.vpc.SecurityGroupEgressRule),
            ):
                rule(
                    f"{name}-efa-self-{direction}",
                    security_group_id=efa_sg.id,
                    referenced_security_group_id=efa_sg.id,
                    ip_protocol="-1",
                    description="EFA: all traffic between members of this group",
                    tags=tags,
                    opts=child,
                )
            security_groups.append(efa_sg.id)
        if placement_group(pool):
            group = aws.ec2.PlacementGroup(
                f"{name}-placement",
                strategy="cluster",
                tags=tags,
                opts=child,
            )
            placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=group.name)

        # An NVL72 pool's NVLink domain (components/aws/ultraserver.py); GPU Feature Discovery labels its
        # nodes with their clique, the level just above the host in the pool's topology.
        rack = rack_domain(shapes, pool.effective_max_nodes)
        template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            description=f"Nodes of {self.node_group_name}",
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=1,
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=pool.disk_size_gib or (GPU_ROOT_GIB if pool.is_gpu else CPU_ROOT_GIB),
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            # With EFA the security groups go on the interfaces; a template may not set both.
            network_interfaces=efa_interfaces(efa_count, security_groups) if efa_count else None,
            vpc_security_group_ids=None if efa_count else security_groups,
            placement=placement,
            # A reservation or Capacity Block the pool launches into, and a block's instance type
            # (components.aws.capacity).
            instance_type=template_instance_type(pool, [s.name for s in shapes]),
            **launch_template_capacity(pool),
            # Rack nodes: the host's nvidia-imex service off (the DRA driver runs IMEX).
            user_data=rack_user_data(rack),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
                for kind in ("instance", "volume")
            ],
            update_default_version=True,
            tags=tags,
            opts=child,
        )
        self.node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster,
            node_group_name=self.node_group_name,
            node_role_arn=args.node_role_arn,
            subnet_ids=subnet_ids,
            ami_type=ami_type(pool.is_gpu, shapes),
            capacity_type=CAPACITY_TYPES[pool.capacity],
            instance_types=node_group_instance_types(pool, [s.name for s in shapes]),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=pool.min_nodes, max_size=pool.effective_max_nodes, desired_size=pool.min_nodes
            ),
            labels=node_labels,
            taints=[
                aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=TAINT_EFFECTS[t.effect])
                for t in taints
            ],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            # GPU nodes: EKS replaces nodes whose GPUs report faults (XID errors) instead of keeping them.
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True)
            if node_repair(pool)
            else None,
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(args.depends_on),
                # The cluster autoscaler owns the current size; Pulumi owns only min and max.
                ignore_changes=["scalingConfig.desiredSize"],
                # The group has a fixed name and EKS cannot change some fields in place (instance types,
                # AMI type, capacity type): a replacement must delete the old group before creating the
                # new one, or the create fails on the name (e.g. an H200 EFA spot pool dropping p5e).
                delete_before_replace=True,
            ),
        )
        resources = {EFA_RESOURCE: str(efa_count)} if efa_count else {}
        ca_tags = autoscaler_tags(
            args.cluster_name,
            {**node_labels, EKS_CAPACITY_LABEL: CAPACITY_TYPES[pool.capacity]},
            taints,
            resources,
        )
        asg_name = self.node_group.resources.apply(_asg_name)
        asg_tags = []
        for key, value in ca_tags.items():
            tag = aws.autoscaling.Tag(
                f"{name}-tag-{_slug(key)}",
                autoscaling_group_name=asg_name,
                # Template tags describe the group; launching instances need no copy of them.
                tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                opts=child,
            )
            asg_tags.append(tag)
        self.resources = NodePoolResources(
            node_group=self.node_group,
            launch_template=template,
            placement_group=group,
            efa_security_group=efa_sg,
            autoscaler_tags=tuple(asg_tags),
        )
        self.info = NodePoolInfo(
            name=pool.name,
            gpu=pool.gpu,
            gpus_per_node=args.gpus_per_node,
            capacity=pool.capacity,
            min_nodes=pool.min_nodes,
            max_nodes=pool.effective_max_nodes,
            labels=labels,
            taints=tuple(taints),
            machine_types=tuple(s.name for s in shapes),
            # Every EFA device of the node (the same count on every node, see machine_shapes).
            extended_resources={EFA_RESOURCE: efa_count} if efa_count else {},
            pod_env=efa_pod_env(s.name for s in shapes) if efa_count else {},
            # The smallest instance type of the pool: a pod sized for it fits on every node.
            node_vcpus=min(s.vcpus for s in shapes) or None,
            node_memory_gib=min(s.memory_gib for s in shapes) or None,
            reservation=pool.reservation,
            topology_levels=rack_topology(topology_levels(s.name for s in shapes), rack),
            replacement=node_replacement(pool),
            rack=rack,
        )
        self.register_outputs({"nodeGroupName": self.node_group_name})


def _asg_name(resources) -> str | None:
    # EKS reports the group's ASG once it exists; offline checkers may leave `resources` empty.
    first = resources[0] if resources else None
    groups = (
        first.get("autoscaling_groups") or first.get("autoscalingGroups")
        if isinstance(first, dict)
        else getattr(first, "autoscaling_groups", None)
    )
    if not groups:
        return None
    group = groups[0]
    return group.get("name") if isinstance(group, dict) else group.name


def _slug(key: str) -> str:
    return key.removeprefix(f"{CA_PREFIX}/").replace("/", "-").replace(".", "-")
