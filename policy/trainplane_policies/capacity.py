"""GPU capacity policies:

- trainplane-allowed-gpu-machines: GPU node groups, node pools and launch templates use an allowed
  machine family (AWS p5.48xlarge: p5; GCP a3-highgpu-8g: a3).
- trainplane-allowed-regions: clusters, buckets and file systems live in an allowed region.
- trainplane-gpu-cap (stack): the GPUs all node groups/pools can scale to (max nodes x GPUs per node, from
  the catalog components/data and GKE's guestAccelerators) stay under a cap.
- trainplane-spot-by-environment: in an environment set to `spot-only`, GPU capacity is spot; `no-spot`
  forbids it. The environment is the stack tag `environment`, else the stack name's last part (aws-dev: dev).
"""

from __future__ import annotations

import re
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.catalog import catalog

from .common import config_schema, dig, environment, items, known, linked, settings, truthy

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_POOL = "gcp:container/nodePool:NodePool"
# A family that carries GPUs even where the catalog does not know the machine: AWS P and G instances
# (EC2 "Accelerated computing" families), GCP A and G series (Compute Engine "GPU machine types").
GPU_FAMILY = {"aws": re.compile(r"^[pg]\d"), "gcp": re.compile(r"^[ag]\d")}

MACHINES_NAME = "trainplane-allowed-gpu-machines"
MACHINES: dict[str, dict[str, Any]] = {
    "families": {
        "type": "array",
        "items": {"type": "string"},
        # Every GPU family in trainplane's catalog (components/aws/data/instance_types.yaml, the GCP
        # section): the reference stacks' and anything the catalog can plan.
        "default": [
            *("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200", "p6e-gb300"),
            *("g5", "g6", "g6e", "g7e", "a2", "a3", "a4", "a4x", "g2", "g4"),
        ],
        "description": "GPU machine families allowed (AWS: before the '.', GCP: before the first '-')",
    },
}
REGIONS_NAME = "trainplane-allowed-regions"
REGIONS: dict[str, dict[str, Any]] = {
    "regions": {
        "type": "array",
        "items": {"type": "string"},
        "default": [
            "us-east-1",
            "us-east-2",
            "us-west-2",
            "us-central1",
            "us-east4",
            "us-east5",
            "europe-west4",
        ],
        "description": "Regions a platform may build in (AWS and GCP names)",
    },
}
CAP_NAME = "trainplane-gpu-cap"
CAP: dict[str, dict[str, Any]] = {
    "maxGpus": {"type": "integer", "default": 512, "description": "GPUs one stack may scale to, at most"}
}
SPOT_NAME = "trainplane-spot-by-environment"
SPOT: dict[str, dict[str, Any]] = {
    "environments": {
        "type": "object",
        "additionalProperties": {"type": "string", "enum": ["spot-only", "no-spot", "any"]},
        "default": {"dev": "spot-only"},
        "description": "Environment -> spot-only | no-spot | any, for GPU node groups and pools",
    },
    "environmentTag": {
        "type": "string",
        "default": "environment",
        "description": "The stack tag naming the environment (else the stack name's last '-' part)",
    },
}
# Where a resource's region is: AWS resources say it in their provider's (or v7's own) `region`;
# GCP ones in `location`, a region, a zone or a bucket's upper-case location.
REGIONAL = {
    "aws:eks/cluster:Cluster": None,
    "aws:s3/bucket:Bucket": None,
    "aws:fsx/lustreFileSystem:LustreFileSystem": None,
    "aws:efs/fileSystem:FileSystem": None,
    "gcp:container/cluster:Cluster": "location",
    "gcp:storage/bucket:Bucket": "location",
    "gcp:filestore/instance:Instance": "location",
    "gcp:lustre/instance:Instance": "location",
}


def _cloud(resource_type: str) -> str:
    return resource_type.split(":", 1)[0]


def machines(resource_type: str, props: Any) -> list[str]:
    """The machine types a node group, node pool or launch template makes."""
    if resource_type == NODE_GROUP:
        return [str(m) for m in items(props.get("instanceTypes"))]
    if resource_type == LAUNCH_TEMPLATE and props.get("instanceType"):
        return [str(props["instanceType"])]
    if resource_type == NODE_POOL and dig(props, "nodeConfig.machineType"):
        return [str(dig(props, "nodeConfig.machineType"))]
    return []


def family(cloud: str, machine: str) -> str:
    return machine.split(".")[0] if cloud == "aws" else machine.split("-")[0]


def gpus_per_node(cloud: str, machine: str) -> int:
    shape = catalog().machine(cloud, machine)
    return shape.gpus if shape is not None else 0


def is_gpu(cloud: str, machine: str) -> bool:
    return gpus_per_node(cloud, machine) > 0 or bool(GPU_FAMILY[cloud].match(family(cloud, machine)))


def validate_machines(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    allowed = settings(args, MACHINES)["families"]
    cloud = _cloud(args.resource_type)
    for m in machines(args.resource_type, args.props):
        if is_gpu(cloud, m) and family(cloud, m) not in allowed:
            report_violation(f"{args.name}: {m} is of family {family(cloud, m)}, not allowed", None)


def region_of(args: ResourceValidationArgs) -> str | None:
    key = REGIONAL[args.resource_type]
    if key is None:  # AWS: the resource's own region (pulumi-aws v7), else its provider's
        provider = args.provider.props if args.provider is not None else {}
        return args.props.get("region") or provider.get("region")
    location = str(args.props.get(key) or "").lower()
    zone = re.match(r"^([a-z]+-[a-z]+\d+)-[a-z]$", location)
    return zone.group(1) if zone else location or None


def validate_regions(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type not in REGIONAL:
        return
    region = region_of(args)
    allowed = settings(args, REGIONS)["regions"]
    if region is not None and region not in allowed:
        report_violation(f"{args.resource_type} {args.name} is in {region}, not allowed", None)


def max_gpus(r: PolicyResource, resources: list[PolicyResource]) -> int:
    """The GPUs a node group or node pool can scale to, from its outputs (a stack policy's view). In a
    preview a computed output the program left unset is unknown (pulumi-aws eks.NodeGroup `instanceTypes`
    when the launch template names the type; pulumi-gcp container.NodePool `nodeCount`, `nodeLocations`,
    `nodeConfig.guestAccelerators`: Optional+Computed in terraform-provider-google v7.45.0
    resource_container_node_pool.go): only what the count needs is read, with the program's own settings
    first, so that such an unknown does not stop the policy. An unknown it does need still raises (the
    engine reports the policy as not run in that preview)."""
    cloud, props = _cloud(r.resource_type), r.props
    if r.resource_type == NODE_GROUP:
        own: list[str] = known(lambda: machines(NODE_GROUP, props), [])
        types = own or [
            m for lt in linked(r, "launchTemplate", resources) for m in machines(LAUNCH_TEMPLATE, lt.props)
        ]
        per_node = max((gpus_per_node(cloud, m) for m in types), default=0)
        return int(dig(props, "scalingConfig.maxSize") or 0) * per_node
    accelerators = known(
        lambda: sum(int(a.get("count") or 0) for a in items(dig(props, "nodeConfig.guestAccelerators"))), 0
    )
    per_node = accelerators or gpus_per_node(cloud, str(dig(props, "nodeConfig.machineType") or ""))
    total = dig(props, "autoscaling.totalMaxNodeCount")
    if total:
        return int(total) * per_node
    per_zone = (
        dig(props, "autoscaling.maxNodeCount") or props.get("nodeCount") or props.get("initialNodeCount")
    )
    zones = max(len(items(props.get("nodeLocations"))), 1)
    return int(per_zone or 0) * zones * per_node


def validate_cap(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    cap = int(settings(args, CAP)["maxGpus"])
    pools = [r for r in args.resources if r.resource_type in (NODE_GROUP, NODE_POOL)]
    counted = {r.name: n for r in pools if (n := max_gpus(r, args.resources))}
    if sum(counted.values()) > cap:
        parts = ", ".join(f"{name} {n}" for name, n in sorted(counted.items()))
        report_violation(f"the stack scales to {sum(counted.values())} GPUs ({parts}), above {cap}", None)


def is_spot(resource_type: str, props: Any) -> bool:
    if resource_type == NODE_GROUP:
        return props.get("capacityType") == "SPOT"
    return truthy(dig(props, "nodeConfig.spot")) or truthy(dig(props, "nodeConfig.preemptible"))


def validate_spot(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type not in (NODE_GROUP, NODE_POOL):
        return
    conf = settings(args, SPOT)
    env = environment(args.stack_tags, conf["environmentTag"])
    mode = conf["environments"].get(env, "any")
    cloud = _cloud(args.resource_type)
    gpu = any(is_gpu(cloud, m) for m in machines(args.resource_type, args.props)) or bool(
        dig(args.props, "nodeConfig.guestAccelerators")
    )
    if not gpu or mode == "any":
        return
    spot = is_spot(args.resource_type, args.props)
    if mode == "spot-only" and not spot:
        report_violation(f"{args.name}: GPU capacity is not spot in environment {env} (spot-only)", None)
    if mode == "no-spot" and spot:
        report_violation(f"{args.name}: GPU capacity is spot in environment {env} (no-spot)", None)


def _resource_policy(
    name: str, description: str, props: dict[str, dict[str, Any]], validate: Any
) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(
        name=name,
        description=description,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=config_schema(props),
        validate=validate,
    )


MACHINES_POLICY = _resource_policy(
    MACHINES_NAME, "GPU machines come from the allowed families.", MACHINES, validate_machines
)
REGIONS_POLICY = _resource_policy(
    REGIONS_NAME, "Platforms build in allowed regions.", REGIONS, validate_regions
)
SPOT_POLICY = _resource_policy(
    SPOT_NAME, "GPU capacity is spot or not as the stack's environment requires.", SPOT, validate_spot
)
CAP_POLICY = StackValidationPolicy(
    name=CAP_NAME,
    description="A stack's GPU node groups and pools scale to at most the allowed number of GPUs.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(CAP),
    validate=validate_cap,
)
