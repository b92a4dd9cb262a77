"""`trainplane verify STACK --cloud`: read-only checks of a platform stack against the cloud's own APIs,
with the user's credentials, beside the offline (plan) and live-cluster modes of `trainplane verify`.

What the offline checks cannot know is whether the cloud has what the stack names: a reservation that
exists, is of the pool's machine type, in its zone and big enough, and machine types offered in the
pool's zones. Each backend asks its own cloud (`CloudBackend.verify_cloud_api`, in its package's
verify_api.py: components/aws/verify_api.py, components/gcp/verify_api.py) and fills a report of this
module; what it does not check is listed in the report, so a pass is never mistaken for a check. An
existing cluster has no cloud to ask (the backends' default).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.spec import PlatformSpec


@dataclass(frozen=True)
class CloudFinding:
    check: str  # reservation | offering | zones
    subject: str  # the pool (and the reservation) it is about
    ok: bool
    message: str


@dataclass
class CloudReport:
    cloud: str
    findings: list[CloudFinding] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    # Where the answers came from, e.g. the endpoint (AWS_ENDPOINT_URL) or the region.
    source: str = ""

    @property
    def ran(self) -> bool:
        """Whether any check ran at all: a report of nothing verifies nothing (never a pass)."""
        return bool(self.findings)

    @property
    def ok(self) -> bool:
        return self.ran and all(f.ok for f in self.findings)

    def add(self, check: str, subject: str, ok: bool, message: str) -> None:
        self.findings.append(CloudFinding(check, subject, ok, message))

    def as_json(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "ok": self.ok,
            "ran": self.ran,
            "source": self.source,
            "findings": [f.__dict__ for f in self.findings],
            "notChecked": self.not_checked,
        }


class CloudError(Exception):
    """The cloud cannot be asked at all (no SDK, no credentials): one line, exit 2."""


def verify_cloud(spec: PlatformSpec, client: Any = None) -> CloudReport:
    """Check `spec` against its cloud, through its backend. `client`: an API client to use instead of
    the backend's default one (an EC2 client on AWS)."""
    from components.backends import backend

    report = backend(spec.cloud).verify_cloud_api(spec, client)
    # A backend with no cloud API behind it (an existing cluster) has nothing to ask.
    return report or CloudReport(spec.cloud, not_checked=[f"cloud {spec.cloud}: no cloud API to ask"])
