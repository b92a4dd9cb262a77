"""Shared file systems on GCP, each handed over as a StorageHandle for a static ReadWriteMany volume.

- `kind: nfs` -> Filestore (`FilestoreStorage`), mounted through the GKE Filestore CSI add-on.
- `kind: lustre` -> Managed Lustre (`LustreStorage`), mounted through the GKE Managed Lustre CSI add-on.

Both depend on the network only, never on the cluster, so they are created while GKE comes up (Lustre
takes tens of minutes). Zonal file systems go in the zone of the GPU pools (`gcp_storage_zone`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.bundle import StorageHandle
from components.gcp.naming import GcpPlacement, short_id
from components.gcp.network import Network
from components.gcp.rules import (
    FILESTORE_DEFAULT_TIER,
    FILESTORE_LIMITS_GIB,
    FILESTORE_ZONAL_TIERS,
    GCP_LUSTRE_DEFAULT_THROUGHPUT,
    GCP_LUSTRE_TIERS,
)
from components.spec import StorageSpec

FILESTORE_CSI_DRIVER = "filestore.csi.storage.gke.io"
LUSTRE_CSI_DRIVER = "lustre.csi.storage.gke.io"


def share_name(storage: str) -> str:
    """Filestore share names: a letter first, then lowercase letters, digits and underscores, <= 16."""
    name = re.sub(r"[^a-z0-9_]", "_", storage.lower())[:16]
    return name if name[:1].isalpha() else f"s{name}"[:16]


def lustre_fsname(storage: str) -> str:
    """Lustre file system names: up to 8 letters and digits, a letter first."""
    name = re.sub(r"[^a-z0-9]", "", storage.lower())
    name = name if name[:1].isalpha() else f"l{name}"
    return name[:8]


@dataclass(frozen=True, kw_only=True)
class FilestoreStorageArgs:
    placement: GcpPlacement
    storage: StorageSpec
    network: Network
    # The zone of the zonal tiers (next to the GPUs; components.gcp.rules.gcp_storage_zone).
    zone: str | None = None


class FilestoreStorage(pulumi.ComponentResource):
    """A Filestore instance with one share, for `kind: nfs`."""

    instance: gcp.filestore.Instance
    handle: StorageHandle

    def __init__(self, name: str, args: FilestoreStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:FilestoreStorage", name, None, opts)
        place, st, net = args.placement, args.storage, args.network
        tier = st.tier or FILESTORE_DEFAULT_TIER
        capacity = st.capacity_gib or FILESTORE_LIMITS_GIB[tier][0]
        # BASIC and ZONAL instances live in one zone, REGIONAL and ENTERPRISE in the region.
        location = args.zone if tier in FILESTORE_ZONAL_TIERS else place.region
        assert location, "spec checks require zones for zonal Filestore tiers"
        instance_name = short_id(f"{place.cluster_name}-{st.name}", 63)
        share = share_name(st.name)
        self.instance = gcp.filestore.Instance(
            f"{name}-filestore",
            name=instance_name,
            project=place.project,
            location=location,
            tier=tier,
            file_shares={
                "name": share,
                "capacity_gb": capacity,
                # Only the platform's nodes may mount it: the kubelet mounts from the node's subnet address.
                # (A brought subnet's range is not known here; Filestore then exports to the whole VPC.)
                "nfs_export_options": (
                    [
                        {
                            "ip_ranges": [net.cidr],
                            "access_mode": "READ_WRITE",
                            "squash_mode": "NO_ROOT_SQUASH",
                        }
                    ]
                    if net.cidr
                    else None
                ),
            },
            networks=[
                # A Shared VPC of another project is reached through its private services access;
                # a network of this project is peered directly (no PSA range needed).
                {"network": net.network_id, "modes": ["MODE_IPV4"], "connect_mode": "PRIVATE_SERVICE_ACCESS"}
                if net.host_project != place.project
                else {"network": net.network_name, "modes": ["MODE_IPV4"], "connect_mode": "DIRECT_PEERING"}
            ],
            labels=place.labels,
            opts=pulumi.ResourceOptions(parent=self),
        )
        ip = self.instance.networks.apply(lambda n: n[0].ip_addresses[0])
        self.handle = StorageHandle(
            name=st.name,
            kind="nfs",
            capacity_gib=capacity,
            csi_driver=FILESTORE_CSI_DRIVER,
            # GKE Filestore CSI static provisioning: modeInstance/<location>/<instance>/<share>.
            volume_handle=f"modeInstance/{location}/{instance_name}/{share}",
            volume_attributes={"ip": ip, "volume": share},
            mount_options=tuple(st.mount_options),
            endpoint=ip,
        )
        self.register_outputs({"ip": ip})


@dataclass(frozen=True, kw_only=True)
class LustreStorageArgs:
    placement: GcpPlacement
    storage: StorageSpec
    network: Network
    # The zone the instance lives in (next to the GPUs; components.gcp.rules.gcp_storage_zone).
    zone: str
    # GKE before 1.33.2-gke.4780000: the instance serves LNet on 6988 (`gke_support_enabled`).
    legacy_port: bool = False


class LustreStorage(pulumi.ComponentResource):
    """A Managed Lustre instance, for `kind: lustre`."""

    instance: gcp.lustre.Instance
    handle: StorageHandle

    def __init__(self, name: str, args: LustreStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:LustreStorage", name, None, opts)
        place, st, net, zone = args.placement, args.storage, args.network, args.zone
        throughput = st.throughput_per_tib or GCP_LUSTRE_DEFAULT_THROUGHPUT
        capacity = st.capacity_gib or GCP_LUSTRE_TIERS[throughput][0]
        instance_id = short_id(f"{place.cluster_name}-{st.name}", 63)
        fsname = lustre_fsname(st.name)
        depends = [net.private_services] if net.private_services is not None else []
        self.instance = gcp.lustre.Instance(
            f"{name}-lustre",
            instance_id=instance_id,
            project=place.project,
            location=zone,
            filesystem=fsname,
            capacity_gib=str(capacity),
            per_unit_storage_throughput=str(throughput),
            network=net.network_id,
            gke_support_enabled=args.legacy_port or None,
            description=f"trainplane {place.cluster_name} {st.name}",
            labels=place.labels,
            # Managed Lustre reaches the VPC through private services access: the peering must exist first.
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
        )
        # mount_point is "<ip>@tcp:/<fsname>".
        ip = self.instance.mount_point.apply(lambda m: m.split("@", 1)[0])
        self.handle = StorageHandle(
            name=st.name,
            kind="lustre",
            capacity_gib=capacity,
            csi_driver=LUSTRE_CSI_DRIVER,
            # GKE Lustre CSI static provisioning: <project>/<location>/<instance>.
            volume_handle=f"{place.project}/{zone}/{instance_id}",
            volume_attributes={"ip": ip, "filesystem": fsname},
            mount_options=tuple(st.mount_options),
            endpoint=ip,
        )
        self.register_outputs({"ip": ip, "mountPoint": self.instance.mount_point})
