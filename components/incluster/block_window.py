"""The Capacity Block window controller's objects: Kueue admits to a block's flavor only inside its dates.

What it does and why this design (quota driven by the block's dates, not an AdmissionCheck and not the
block's Ready nodes) is in controllers/block_window_agent.py, the controller itself. It runs as the GPU
health controller does (gpu_health.py): the controller image (`trainplane-controller block-window`;
`platform.images.controller` or `.blockWindow`), its config in a ConfigMap, as a one-replica Deployment
with `strategy: Recreate`: two agents would patch the same ClusterQueues from two clocks, and a rolling
update runs the old and the new side by side. It takes no lease (a second replica is never asked for);
its liveness probe reads the heartbeat each round writes (the controller's --heartbeat:
controllers/agent_runtime.py run).

Least privilege: the controller reads and patches the team ClusterQueues by name (a ClusterRole with
`resourceNames`), nothing else; it runs as nobody with a read-only root file system and no capabilities.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import NodePoolInfo
from components.incluster.placement import flavor_groups
from components.spec import QueueingSpec, TeamSpec
from components.spec.images import CONTROLLER_IMAGE_UNSET

CONTROLLER = "trainplane-block-window"
# EC2 starts terminating a Capacity Block's instances 30 minutes before its end (EC2 user guide, "Capacity
# Blocks for ML"): no job is admitted to the block after that.
DRAIN_SECONDS = 30 * 60
MOUNT = "/opt/block-window"
# The root file system is read-only: the heartbeat goes to an emptyDir.
HEARTBEAT = "/tmp/alive"


def heartbeat_probe(heartbeat: str, max_age_s: int) -> dict[str, Any]:
    """An exec probe that fails once `heartbeat` (the controller's --heartbeat file, its mtime the end of
    its last round) is older than `max_age_s` or absent. It runs the image's own python3."""
    check = f"import os,sys,time; sys.exit(time.time() - os.stat({heartbeat!r}).st_mtime > {max_age_s})"
    return {
        "exec": {"command": ["python3", "-c", check]},
        "initialDelaySeconds": 60,
        "periodSeconds": 60,
        "timeoutSeconds": 10,
        "failureThreshold": 3,
    }


def block_flavors(pools: Sequence[NodePoolInfo]) -> list[tuple[str, list[NodePoolInfo]]]:
    """(flavor name, its capacity-block pools) of every flavor made of Capacity Block pools."""
    return [
        (name, [m for m in members if isinstance(m, NodePoolInfo) and m.capacity == "capacity-block"])
        for name, members in flavor_groups(pools)
        if any(m.capacity == "capacity-block" for m in members)
    ]


def controller_config(
    queueing: QueueingSpec,
    teams: Sequence[TeamSpec],
    pools: Sequence[NodePoolInfo],
    windows: Mapping[str, tuple[datetime, datetime]],
) -> dict[str, Any]:
    """The agent's config: per block flavor its pools' GPUs and dates, and the teams that share it."""
    return {
        "flavors": [
            {
                "name": name,
                "pools": [
                    {
                        "name": p.name,
                        "gpus": p.gpus_per_node * p.max_nodes,
                        "start": windows[p.name][0].timestamp(),
                        "end": windows[p.name][1].timestamp(),
                    }
                    for p in members
                ],
                # The ClusterQueue of a team is named after it (queueing.py).
                "teams": [{"team": t.name, "gpuQuota": t.gpu_quota, "clusterQueue": t.name} for t in teams],
                "borrowing": queueing.borrowing,
            }
            for name, members in block_flavors(pools)
        ],
        "drainSeconds": DRAIN_SECONDS,
        "intervalSeconds": 60,
    }


def controller_pod(config_map: str, image: str) -> dict[str, Any]:
    """The agent's pod: `trainplane-controller block-window` in the controller image (images.
    controller_image: by digest), its config from the ConfigMap; nothing installed or shipped at start."""
    return {
        "serviceAccountName": CONTROLLER,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "controller",
                "image": image,
                "command": ["trainplane-controller", "block-window"],
                "args": [
                    "--config",
                    f"{MOUNT}/config.json",
                    "--heartbeat",
                    HEARTBEAT,
                ],
                "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                # A round every 60 s (controller_config): five missed rounds restart the agent.
                "livenessProbe": heartbeat_probe(HEARTBEAT, 300),
                # The `kubernetes` client's import is most of it: 70 MiB peak resident after importing
                # the agent in the image (ru_maxrss, CPython 3.11); the standard-library agent needed <32Mi.
                "resources": {"requests": {"cpu": "5m", "memory": "96Mi"}, "limits": {"memory": "128Mi"}},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [
                    {"name": "config", "mountPath": MOUNT, "readOnly": True},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }
        ],
        "volumes": [
            {"name": "config", "configMap": {"name": config_map}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Mi"}},
        ],
    }


@dataclass(frozen=True, kw_only=True)
class BlockWindowArgs:
    queueing: QueueingSpec
    teams: Sequence[TeamSpec]
    pools: Sequence[NodePoolInfo]
    # capacity-block pool name -> (blockStart, blockEnd)
    windows: Mapping[str, tuple[datetime, datetime]]
    namespace: pulumi.Input[str]
    # The ClusterQueues it patches (it waits for them).
    cluster_queues: Sequence[pulumi.Resource] = ()
    # The controller image (images.controller_image: `platform.images.blockWindow` or `.controller`).
    image: str = CONTROLLER_IMAGE_UNSET


class BlockWindow(pulumi.ComponentResource):
    """ServiceAccount, ClusterRole(Binding) on the team ClusterQueues, agent ConfigMap and Deployment."""

    controller: k8s.apps.v1.Deployment

    def __init__(self, name: str, args: BlockWindowArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:BlockWindow", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {"app": CONTROLLER}
        ns = args.namespace
        config = json.dumps(
            controller_config(args.queueing, args.teams, args.pools, args.windows), indent=2, sort_keys=True
        )
        # The config only (the code is the image's).
        files = {"config.json": config}
        cm = k8s.core.v1.ConfigMap(
            f"{name}-agent",
            metadata={"name": CONTROLLER, "namespace": ns, "labels": labels},
            data=files,
            opts=child,
        )
        k8s.core.v1.ServiceAccount(
            f"{name}-sa", metadata={"name": CONTROLLER, "namespace": ns, "labels": labels}, opts=child
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-queues",
            metadata={"name": CONTROLLER, "labels": labels},
            rules=[
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["clusterqueues"],
                    # The team queues only, by name (the queue is named after its team).
                    "resourceNames": sorted(t.name for t in args.teams),
                    "verbs": ["get", "patch"],
                }
            ],
            opts=child,
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-queues",
            metadata={"name": CONTROLLER, "labels": labels},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CONTROLLER},
            subjects=[{"kind": "ServiceAccount", "name": CONTROLLER, "namespace": ns}],
            opts=child,
        )
        # A changed agent or config restarts the controller.
        digest = hashlib.sha256("".join(files[k] for k in sorted(files)).encode()).hexdigest()[:16]
        self.controller = k8s.apps.v1.Deployment(
            f"{name}-controller",
            metadata={"name": CONTROLLER, "namespace": ns, "labels": labels},
            spec={
                "replicas": 1,
                # One writer at a time; each patch also guards itself with the queue's resourceVersion.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels, "annotations": {"trainplane.dev/config-digest": digest}},
                    "spec": controller_pod(cm.metadata["name"], args.image),
                },
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role, binding, *args.cluster_queues]),
        )
        self.register_outputs({})
