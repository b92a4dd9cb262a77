"""GCP's section of the platform spec: the keys only GCP understands, composed into the cloud-neutral
models when they load (components/spec/sections.py). Pure pydantic: no backend, no rules, no pulumi.
Which of these (and of the neutral keys) GCP accepts is its rules' `KEYS` (components/gcp/rules.py)."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field

from components.spec.base import DNS_LABEL, Spec

# A GCP project id (6-30 characters: "Creating and managing projects", project ID requirements).
PROJECT = r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$"
PATTERN_WORDS = {
    PROJECT: "a GCP project id (6 to 30 lowercase letters, digits and '-', starting with a letter)",
}


class ClusterKeys(Spec):
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] | None = None
    authorized_networks: list[ipaddress.IPv4Network] = Field(default_factory=list)
    private_nodes: bool | None = None


class NetworkKeys(Spec):
    pods_cidr: ipaddress.IPv4Network | None = None
    services_cidr: ipaddress.IPv4Network | None = None
    # Range for private services access (Managed Lustre peers into the VPC from here).
    private_services_cidr: ipaddress.IPv4Network | None = None
    network: str | None = None
    subnetwork: str | None = None
    # Names of the subnet's existing secondary ranges, for a bring-your-own subnetwork.
    pods_range_name: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)
    services_range_name: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)
    # Address block of the GPUDirect fabric networks (one /20 subnet each), for GPU machine types with
    # GPU NICs; default 192.168.0.0/16.
    fabric_cidr: ipaddress.IPv4Network | None = None


class NodePoolKeys(Spec):
    machine_type: str | None = None
    local_ssd_count: int | None = Field(default=None, ge=0, le=32)
    # flex-start / queued: how long a DWS node may run, at most the 7 days GKE allows (default 168).
    max_run_hours: int | None = Field(default=None, ge=1, le=168)


class StorageKeys(Spec):
    # nfs (Filestore)
    tier: Literal["BASIC_HDD", "BASIC_SSD", "ZONAL", "REGIONAL", "ENTERPRISE"] | None = None


class PlatformKeys(Spec):
    project: str | None = Field(default=None, pattern=PROJECT)
    zones: list[str] = Field(default_factory=list)
