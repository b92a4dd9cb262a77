"""`trainplane verify --cloud` for GCP (GcpBackend.verify_cloud_api): nothing is asked of the GCP APIs
yet. The report lists what is not checked, so a pass is never mistaken for a check."""

from __future__ import annotations

from typing import Any

from components.spec import PlatformSpec
from infra.verify.cloud import CloudReport

# What `--cloud` does not check on GCP (yet): said in the report, never silently passed.
GCP_NOT_CHECKED = (
    "reservations: that each `reservation` exists in the pool's zone, is of its machine type and "
    "accelerator, has room for maxNodes and is shared with this project (compute.reservations.get)",
    "machine types and accelerators offered in the pools' zones (compute.machineTypes.list, "
    "compute.acceleratorTypes.list)",
    "GPU quota per region for the pools' maximum sizes, including preemptible/DWS quota",
)


def verify_cloud_api(spec: PlatformSpec, client: Any = None) -> CloudReport:
    return CloudReport("gcp", not_checked=[*GCP_NOT_CHECKED], source="nothing asked: no GCP API calls")
