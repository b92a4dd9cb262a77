"""AWS's section of the platform spec: the keys only AWS understands, composed into the cloud-neutral
models when they load (components/spec/sections.py). Pure pydantic: no backend, no rules, no pulumi.
Which of these (and of the neutral keys) AWS accepts is its rules' `KEYS` (components/aws/rules.py)."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field

from components.spec.base import Spec

VPC_ID = r"^vpc-[0-9a-f]{8,17}$"
S3_PREFIX = r"^s3://[a-z0-9.-]{3,63}(/.*)?$"
PATTERN_WORDS = {
    VPC_ID: "a VPC id, vpc- and 8 to 17 hex digits",
    S3_PREFIX: "an S3 URI, s3://<bucket>[/<prefix>]",
}


class ClusterKeys(Spec):
    endpoint_access: Literal["public", "private", "both"] | None = None
    # Networks that reach the private API endpoint (TCP 443 on the cluster security group).
    private_access_cidrs: list[ipaddress.IPv4Network] = Field(default_factory=list)
    admin_principals: list[str] = Field(default_factory=list)
    log_types: list[Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]] | None = None


class NetworkKeys(Spec):
    zones: int | None = Field(default=None, ge=2, le=6)
    vpc_id: str | None = Field(default=None, pattern=VPC_ID)
    subnet_ids: list[str] = Field(default_factory=list)


class NodePoolKeys(Spec):
    instance_type: str | None = None
    efa: bool | None = None


class StorageKeys(Spec):
    # lustre: an S3 prefix linked through a data repository association
    import_path: str | None = Field(default=None, pattern=S3_PREFIX)
    export_path: str | None = Field(default=None, pattern=S3_PREFIX)
