"""Logs: Loki (single binary) on the cloud layer's log bucket, or on a volume on existing clusters, and
Grafana Alloy on every node shipping pod logs with namespace, pod, container, job and node_rank labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import LOKI_SERVICE_ACCOUNT, ClusterBundle
from components.charts import CHARTS
from components.incluster.names import (
    ALLOY_RELEASE,
    JOB_NAME_LABEL,
    LOKI_RELEASE,
    LOKI_URL,
    RANK_LABEL,
    RELEASE_TIMEOUT_S,
)
from components.spec import ObservabilitySpec


def loki_values(obs: ObservabilitySpec, bundle: ClusterBundle) -> pulumi.Output[dict[str, Any]]:
    """Loki chart values; an Output because the bucket name and identity may be unknown until deploy."""
    # The cloud's object storage for Loki, as its backend describes it (CloudProfile.loki_storage).
    cloud_storage = dict(bundle.profile.loki_storage)
    store = cloud_storage.pop("type", None)
    bucket = bundle.buckets.get("logs")
    if store and bucket is None:
        store = None  # no log bucket handed over: keep logs on the volume
    retention_h = obs.log_retention_days * 24
    persistence: dict[str, Any] = {"enabled": True}
    if bundle.storage_class:
        persistence["storageClass"] = bundle.storage_class

    def build(bucket_name: str | None, identity: str | None) -> dict[str, Any]:
        storage_type = store or "filesystem"
        storage: dict[str, Any] = {"type": storage_type}
        if store:
            # The chart renders bucketnames from loki.storage.bucketNames.chunks and .ruler (documented,
            # commented out in the chart's defaults; templates/_helpers.tpl `required`s both). No template
            # of 18.11.0 reads an `admin` bucket, so none is sent.
            storage["bucketNames"] = {"chunks": bucket_name, "ruler": bucket_name}
            storage.update(cloud_storage)
        service_account: dict[str, Any] = {"create": True, "name": LOKI_SERVICE_ACCOUNT}
        if identity is not None and bundle.profile.identity_annotation:
            service_account["annotations"] = {bundle.profile.identity_annotation: identity}
        return {
            "deploymentMode": "Monolithic",
            "serviceAccount": service_account,
            "loki": {
                # One tenant: the platform's own logs; access is fenced by Grafana and NetworkPolicy.
                "auth_enabled": False,
                "commonConfig": {"replication_factor": 1},
                "schemaConfig": {
                    "configs": [
                        {
                            "from": "2024-04-01",
                            "store": "tsdb",
                            "object_store": storage_type,
                            "schema": "v13",
                            "index": {"prefix": "index_", "period": "24h"},
                        }
                    ]
                },
                "storage": storage,
                "structuredConfig": {
                    "limits_config": {"retention_period": f"{retention_h}h"},
                    "compactor": {"retention_enabled": True, "delete_request_store": storage_type},
                },
            },
            # The chart's single binary is a StatefulSet with a volume claim by default
            # (singleBinary.persistence.enabled: true): WAL, index cache and, on existing clusters, the
            # chunks themselves. templates/_workload.tpl names `persistence.storageClass` in it.
            "singleBinary": {"replicas": 1, "persistence": persistence},
            "read": {"replicas": 0},
            "write": {"replicas": 0},
            "backend": {"replicas": 0},
            "chunksCache": {"enabled": False},
            "resultsCache": {"enabled": False},
            "lokiCanary": {"enabled": False},
            "test": {"enabled": False},
            "gateway": {"enabled": True},
        }

    return pulumi.Output.all(bucket, bundle.loki_identity).apply(lambda a: build(a[0], a[1]))


def _meta(label: str) -> str:
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


def alloy_config() -> str:
    """Alloy pipeline: this node's pods, labelled, tailed through the API, pushed to Loki."""
    relabel = [
        ("__meta_kubernetes_namespace", "namespace"),
        ("__meta_kubernetes_pod_name", "pod"),
        ("__meta_kubernetes_pod_container_name", "container"),
        (_meta(JOB_NAME_LABEL), "job"),
        # The pod's completion index is the node's rank in the job; `rank` is the trainer's per-GPU rank.
        (_meta(RANK_LABEL), "node_rank"),
    ]
    rules = "\n".join(
        f'  rule {{\n    source_labels = ["{src}"]\n    target_label  = "{dst}"\n  }}' for src, dst in relabel
    )
    return f"""discovery.kubernetes "pods" {{
  role = "pod"
  selectors {{
    role  = "pod"
    field = "spec.nodeName=" + sys.env("HOSTNAME")
  }}
}}

discovery.relabel "pods" {{
  targets = discovery.kubernetes.pods.targets
{rules}
}}

loki.source.kubernetes "pods" {{
  targets    = discovery.relabel.pods.output
  forward_to = [loki.write.default.receiver]
}}

loki.write "default" {{
  endpoint {{
    url = "{LOKI_URL}/loki/api/v1/push"
  }}
}}
"""


def alloy_values() -> dict[str, Any]:
    return {
        # One Alloy per node. The chart itself sets HOSTNAME to the node name (downward API
        # spec.nodeName, alloy 1.11.1 templates/containers/_agent.yaml), which the discovery selector reads.
        "controller": {"type": "daemonset", "tolerations": [{"operator": "Exists"}]},
        "alloy": {"configMap": {"create": True, "content": alloy_config()}},
    }


@dataclass(frozen=True, kw_only=True)
class LogsArgs:
    observability: ObservabilitySpec
    bundle: ClusterBundle
    namespace: k8s.core.v1.Namespace


@dataclass(frozen=True, kw_only=True)
class LogsResources:
    loki: k8s.helm.v3.Release
    alloy: k8s.helm.v3.Release


class Logs(pulumi.ComponentResource):
    """Loki and the Alloy DaemonSet that feeds it."""

    resources: LogsResources

    def __init__(self, name: str, args: LogsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:Logs", name, None, opts)
        ns = args.namespace.metadata["name"]
        ready = list(args.bundle.ready)
        loki = CHARTS["loki"]
        self.loki = k8s.helm.v3.Release(
            f"{name}-loki",
            name=LOKI_RELEASE,
            namespace=ns,
            **loki.release_args(),
            values=loki_values(args.observability, args.bundle),
            timeout=RELEASE_TIMEOUT_S,
            # Its volume claim binds only once the StorageClass and its provisioner exist.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*ready, *args.bundle.storage_ready]),
        )
        alloy = CHARTS["alloy"]
        # Alloy retries pushes until Loki answers: no need to wait for the Loki release.
        self.alloy = k8s.helm.v3.Release(
            f"{name}-alloy",
            name=ALLOY_RELEASE,
            namespace=ns,
            **alloy.release_args(),
            values=alloy_values(),
            timeout=RELEASE_TIMEOUT_S,
            opts=pulumi.ResourceOptions(parent=self, depends_on=ready),
        )
        self.resources = LogsResources(loki=self.loki, alloy=self.alloy)
        self.register_outputs({"loki": self.loki.name})
