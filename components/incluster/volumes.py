"""Shared file systems as statically bound ReadWriteMany volumes in the team namespaces that use them.

A PersistentVolume binds exactly one claim, so each (storage, team) pair gets its own PV pointing at the
same file system, pre-bound to that team's claim through `claimRef`. Claims are named after the storage,
so a job mounts `datasets` in whichever team namespace it runs. CSI drivers the cloud profile ships as
charts (`csi_charts`, e.g. the FSx for Lustre node plugin on EKS) are installed here when a handle
names them; drivers that come as cloud add-ons arrive with the cluster, and NFS is in-tree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import ClusterBundle, StorageHandle
from components.charts import CHARTS
from components.incluster.names import RELEASE_TIMEOUT_S
from components.spec import TeamSpec

STORAGE_LABEL = "trainplane.dev/storage"


def teams_of(teams: Sequence[TeamSpec], storage: str) -> list[str]:
    return [t.name for t in teams if t.storage is None or storage in t.storage]


def pv_name(storage: str, team: str) -> str:
    return f"{storage}-{team}"


def volume_source(handle: StorageHandle) -> dict[str, Any]:
    if handle.csi_driver is None:
        attrs = handle.volume_attributes
        return {"nfs": {"server": attrs["server"], "path": attrs["path"]}}
    csi: dict[str, Any] = {"driver": handle.csi_driver, "volumeHandle": handle.volume_handle}
    if handle.volume_attributes:
        csi["volumeAttributes"] = dict(handle.volume_attributes)
    return {"csi": csi}


def persistent_volume_spec(handle: StorageHandle, team: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capacity": {"storage": f"{handle.capacity_gib}Gi"},
        "accessModes": ["ReadWriteMany"],
        # The file system outlives the claim: deleting a team must never delete the data.
        "persistentVolumeReclaimPolicy": "Retain",
        # Empty class: never dynamically provisioned, bound only to the claim named below.
        "storageClassName": "",
        "claimRef": {"namespace": team, "name": handle.name},
        **volume_source(handle),
    }
    if handle.mount_options:
        spec["mountOptions"] = list(handle.mount_options)
    return spec


@dataclass(frozen=True, kw_only=True)
class SharedVolumesArgs:
    teams: Sequence[TeamSpec]
    bundle: ClusterBundle
    # team name -> its namespace resource (claims wait for their namespace)
    namespaces: Mapping[str, k8s.core.v1.Namespace]


@dataclass(frozen=True, kw_only=True)
class SharedVolumesResources:
    # CSI driver releases installed for the handles (the cloud profile's charts).
    csi_drivers: tuple[pulumi.Resource, ...]
    # (storage, team) -> its PersistentVolume / the team's claim on it
    volumes: Mapping[tuple[str, str], k8s.core.v1.PersistentVolume]
    claims: Mapping[tuple[str, str], k8s.core.v1.PersistentVolumeClaim]


class SharedVolumes(pulumi.ComponentResource):
    """PersistentVolumes and claims for every storage handle, plus the CSI drivers the profile ships."""

    def __init__(self, name: str, args: SharedVolumesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:SharedVolumes", name, None, opts)
        bundle = args.bundle
        child = pulumi.ResourceOptions(parent=self)
        driver_ready: list[pulumi.Resource] = []
        used = {h.csi_driver for h in bundle.storage}
        for csi in bundle.profile.csi_charts:
            if csi.driver not in used:
                continue
            driver_ready.append(
                k8s.helm.v3.Release(
                    f"{name}-{csi.resource_name}",
                    name=csi.release_name,
                    namespace=csi.namespace,
                    **CHARTS[csi.chart].release_args(),
                    values=dict(csi.values),
                    timeout=RELEASE_TIMEOUT_S,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=list(bundle.ready)),
                )
            )
        volumes: dict[tuple[str, str], k8s.core.v1.PersistentVolume] = {}
        claims: dict[tuple[str, str], k8s.core.v1.PersistentVolumeClaim] = {}
        for handle in bundle.storage:
            for team in teams_of(args.teams, handle.name):
                labels = {STORAGE_LABEL: handle.name, "trainplane.dev/team": team}
                pv = volumes[(handle.name, team)] = k8s.core.v1.PersistentVolume(
                    f"{name}-{pv_name(handle.name, team)}-pv",
                    metadata={"name": pv_name(handle.name, team), "labels": labels},
                    spec=persistent_volume_spec(handle, team),
                    # The PV itself is inert; mounts need the driver, so wait only when we install it.
                    opts=pulumi.ResourceOptions(parent=self, depends_on=driver_ready),
                )
                ns = args.namespaces[team]
                claims[(handle.name, team)] = k8s.core.v1.PersistentVolumeClaim(
                    f"{name}-{pv_name(handle.name, team)}-pvc",
                    metadata={"name": handle.name, "namespace": ns.metadata["name"], "labels": labels},
                    spec={
                        "accessModes": ["ReadWriteMany"],
                        "storageClassName": "",
                        "volumeName": pv.metadata["name"],
                        "resources": {"requests": {"storage": f"{handle.capacity_gib}Gi"}},
                    },
                    opts=child,
                )
        self.resources = SharedVolumesResources(
            csi_drivers=tuple(driver_ready), volumes=volumes, claims=claims
        )
        self.register_outputs({})
