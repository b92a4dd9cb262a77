"""What the in-cluster layer must know about GKE: the cloud profile and the StorageClass GKE provides.

Kept apart from the resource modules so that code which only needs these facts (the mock profile
bundle, verify) does not import pulumi_gcp.
"""

from __future__ import annotations

from components.bundle import CloudProfile, NetworkEndpoint

# Workload Identity: pods get Google credentials from the GKE metadata server at 169.254.169.254, port
# 80. GKE's Workload Identity docs ("Limitations": network policies) require egress to
# 169.254.169.254/32 port 80 on Dataplane V2 clusters, which trainplane always creates
# (components/gcp/cluster.py, ADVANCED_DATAPATH). The other addresses that page lists (127.0.0.1:988
# before 1.21.0-gke.1000, 169.254.169.252:988 on the iptables dataplane, where traffic is DNATed to the
# node's metadata server before policy applies) do not apply to Dataplane V2 on GKE 1.33+.
GKE_METADATA_SERVER = NetworkEndpoint("169.254.169.254/32", 80)

GKE_PROFILE = CloudProfile(
    name="gke",
    object_store="gs",
    identity_annotation="iam.gke.io/gcp-service-account",
    identity_endpoints=(GKE_METADATA_SERVER,),
)

# The block-volume StorageClass GKE installs with the Compute Engine Persistent Disk CSI driver
# (addons_config.gce_persistent_disk_csi_driver_config, on in every trainplane cluster): `standard-rwo`,
# provisioner pd.csi.storage.gke.io, disk type pd-balanced, volumeBindingMode WaitForFirstConsumer
# (GKE docs, "Using the Compute Engine persistent disk CSI Driver"). Prometheus and Loki run on the CPU
# pools (GPU nodes are tainted), whose machine types take Persistent Disk; the Hyperdisk-only families
# (a3-ultragpu, a4) are GPU pools, where no platform volume goes.
GKE_STORAGE_CLASS = "standard-rwo"
