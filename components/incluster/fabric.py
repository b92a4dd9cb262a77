"""FabricObjects: what the pools' GPU fabrics need in the cluster, as the cloud profile gives it.

The cloud layer decides the objects (`CloudProfile.fabric_objects`: multi-network objects, NCCL plugin
installer DaemonSets, device injectors); this component only registers them, without knowing the cloud:
built-in kinds as their typed class, other kinds as custom resources, metadata exactly as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import ClusterBundle, SystemObject
from components.incluster.gpu_operator import SYSTEM_OBJECT_KINDS


def fabric_object(
    resource_name: str, obj: SystemObject, opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    """One object: a typed class for built-in kinds, a CustomResource for the rest."""
    cls = SYSTEM_OBJECT_KINDS.get((obj.api_version, obj.kind))
    metadata: dict[str, Any] = {**obj.metadata}
    if cls is None:
        return k8s.apiextensions.CustomResource(
            resource_name,
            api_version=obj.api_version,
            kind=obj.kind,
            metadata=metadata,
            spec=dict(obj.spec),
            opts=opts,
        )
    body: dict[str, Any] = {"data": dict(obj.spec)} if obj.kind == "ConfigMap" else {"spec": dict(obj.spec)}
    return cls(resource_name, metadata=metadata, **body, opts=opts)


@dataclass(frozen=True, kw_only=True)
class FabricObjectsArgs:
    bundle: ClusterBundle


class FabricObjects(pulumi.ComponentResource):
    """The profile's fabric objects, each registered as `<name>-<resource_name>`."""

    objects: tuple[pulumi.CustomResource, ...]

    def __init__(self, name: str, args: FabricObjectsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:FabricObjects", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.bundle.ready))
        self.objects = tuple(
            fabric_object(f"{name}-{o.resource_name}", o, child) for o in args.bundle.profile.fabric_objects
        )
        self.register_outputs({"objects": [o.resource_name for o in args.bundle.profile.fabric_objects]})
