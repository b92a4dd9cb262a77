"""Names and labels that GCP accepts: short ids, lowercase labels, network references."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field


def short_id(base: str, max_len: int, min_len: int = 1) -> str:
    """`base` if it fits, else a stable truncation with a hash suffix (GCP ids must be unique and short).

    >>> short_id("ml-dev-research", 30)
    'ml-dev-research'
    >>> len(short_id("a-very-long-cluster-name-and-a-longer-team-name", 30))
    30
    """
    base = re.sub(r"[^a-z0-9-]", "-", base.lower()).strip("-")
    digest = hashlib.sha1(base.encode()).hexdigest()[:6]
    if len(base) > max_len:
        base = f"{base[: max_len - 7].rstrip('-')}-{digest}"
    elif len(base) < min_len:  # a hash, not a fixed pad, so two short names never meet
        base = f"{base}-{digest}"
    return base


def service_account_id(cluster: str, purpose: str) -> str:
    """A Google service account id (6-30 chars, [a-z][-a-z0-9]*[a-z0-9])."""
    return short_id(f"{cluster}-{purpose}", 30, min_len=6)


def gcp_labels(tags: dict[str, str], cluster: str) -> dict[str, str]:
    """GCP resource labels from the stack's tags: keys and values lowercase, [-_a-z0-9], <= 63 chars."""

    def clean(v: str) -> str:
        return re.sub(r"[^a-z0-9_-]", "_", v.lower())[:63]

    labels = {clean(k): clean(v) for k, v in tags.items() if k}
    labels.setdefault("trainplane-cluster", clean(cluster))
    labels.setdefault("managed-by", "trainplane")
    return labels


def network_name(ref: str) -> str:
    """The bare network name from a name, `projects/p/global/networks/n` or a self link."""
    return ref.rstrip("/").rsplit("/", 1)[-1]


def network_path(ref: str, project: str) -> str:
    """`projects/<project>/global/networks/<name>`, keeping a host project named in `ref` (shared VPC)."""
    m = re.search(r"projects/([^/]+)/global/networks/([^/]+)", ref)
    if m:
        return f"projects/{m.group(1)}/global/networks/{m.group(2)}"
    return f"projects/{project}/global/networks/{network_name(ref)}"


def subnetwork_path(ref: str, project: str, region: str) -> str:
    """`projects/<project>/regions/<region>/subnetworks/<name>`, keeping a host project named in `ref`."""
    m = re.search(r"projects/([^/]+)/regions/([^/]+)/subnetworks/([^/]+)", ref)
    if m:
        return f"projects/{m.group(1)}/regions/{m.group(2)}/subnetworks/{m.group(3)}"
    return f"projects/{project}/regions/{region}/subnetworks/{network_name(ref)}"


@dataclass(frozen=True, kw_only=True)
class GcpPlacement:
    """Where a platform's GCP resources go and how they are named and labelled: what every GCP
    component needs of the platform spec (each takes this plus its own few fields)."""

    project: str
    region: str
    cluster_name: str
    # The stack's tags, as GCP labels on every resource that takes labels.
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        return gcp_labels(dict(self.tags), self.cluster_name)
