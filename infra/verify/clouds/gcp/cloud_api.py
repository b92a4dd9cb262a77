"""`trainplane verify --cloud` for GCP (GcpVerifier.verify_cloud_api): nothing is asked of the GCP APIs
yet. Each check is in the report, skipped, with a note of what it would check, so a pass is never
mistaken for a check (and `verify --cloud` exits 2: nothing verified)."""

from __future__ import annotations

from typing import Any

from components.spec import PlatformSpec
from infra.verify.cloud import cloud_report
from infra.verify.report import CheckResult, Report

# What `--cloud` does not check on GCP (yet), per check: said in the report, never silently passed.
GCP_NOT_CHECKED = {
    "reservation": "that each `reservation` exists in the pool's zone, is of its machine type and "
    "accelerator, has room for maxNodes and is shared with this project (compute.reservations.get)",
    "offering": "machine types and accelerators offered in the pools' zones (compute.machineTypes.list, "
    "compute.acceleratorTypes.list)",
    "quota": "GPU quota per region for the pools' maximum sizes, including preemptible/DWS quota",
}


def verify_cloud_api(spec: PlatformSpec, client: Any = None) -> Report:
    report = cloud_report(spec, "nothing asked: no GCP API calls")
    report.checks += [
        CheckResult(name, notes=[f"not checked: {what}"], skipped="no GCP API is asked yet")
        for name, what in GCP_NOT_CHECKED.items()
    ]
    return report
