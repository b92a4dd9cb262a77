"""`trainplane verify STACK --cloud`: read-only checks of a platform stack against the cloud's own APIs,
with the user's credentials, beside the offline (plan) and live-cluster modes of `trainplane verify`.

What the offline checks cannot know is whether the cloud has what the stack names: a reservation that
exists, is of the pool's machine type, in its zone and big enough, and machine types offered in the
pool's zones. AWS (`infra/verify/cloud_aws.py`): DescribeCapacityReservations and
DescribeInstanceTypeOfferings (plus DescribeAvailabilityZones / DescribeSubnets to learn the zones of
pools that name none). GCP: nothing is checked against the GCP APIs yet; the report lists what is not
checked, so a pass is never mistaken for a check. An existing cluster has no cloud to ask.

Only Describe* calls are made: the checks need `ec2:DescribeCapacityReservations`,
`ec2:DescribeInstanceTypeOfferings`, `ec2:DescribeAvailabilityZones` and `ec2:DescribeSubnets`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.spec import PlatformSpec

# What `--cloud` does not check on GCP (yet): said in the report, never silently passed.
GCP_NOT_CHECKED = (
    "reservations: that each `reservation` exists in the pool's zone, is of its machine type and "
    "accelerator, has room for maxNodes and is shared with this project (compute.reservations.get)",
    "machine types and accelerators offered in the pools' zones (compute.machineTypes.list, "
    "compute.acceleratorTypes.list)",
    "GPU quota per region for the pools' maximum sizes, including preemptible/DWS quota",
)


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


# botocore's errors that mean the cloud was not asked at all, not that a check failed
# (boto/botocore@1.43.117 botocore/exceptions.py, the version in the venv): no or partial credentials, no region, no connection.
UNREACHABLE_ERRORS = (
    "NoCredentialsError",
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "NoRegionError",
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "SSOTokenLoadError",
    "UnauthorizedSSOTokenError",
)
# API error codes of credentials the cloud refuses, or of an action they may not call (EC2 API reference,
# "Common client error codes": AuthFailure, UnauthorizedOperation, RequestExpired; STS/IAM-signed
# requests: InvalidClientTokenId, ExpiredToken). The report could not be read: exit 2, not a FAIL row.
REFUSED_CREDENTIAL_CODES = {
    "AuthFailure",
    "UnauthorizedOperation",
    "InvalidClientTokenId",
    "ExpiredToken",
    "RequestExpired",
}


def raise_if_unreachable(e: Exception) -> None:
    """Turn an error that means "the cloud could not be asked" into CloudError (exit 2, one line); any
    other error is a failed check and is left to the caller to report."""
    names = {c.__name__ for c in type(e).__mro__}
    code = (getattr(e, "response", None) or {}).get("Error", {}).get("Code")
    if names & set(UNREACHABLE_ERRORS) or code in REFUSED_CREDENTIAL_CODES:
        first = (str(e).strip().splitlines() or [""])[0]
        raise CloudError(f"verify --cloud: cannot ask the cloud: {type(e).__name__}: {first}") from None


def verify_cloud(spec: PlatformSpec, ec2: Any = None) -> CloudReport:
    """Check `spec` against its cloud. `ec2`: an EC2 client to use instead of boto3's default one."""
    if spec.cloud == "aws":
        from infra.verify.cloud_aws import verify_aws

        return verify_aws(spec, ec2 if ec2 is not None else ec2_client(spec.region))
    if spec.cloud == "gcp":
        return CloudReport("gcp", not_checked=[*GCP_NOT_CHECKED], source="nothing asked: no GCP API calls")
    return CloudReport(spec.cloud, not_checked=["an existing cluster: no cloud API to ask"])


def ec2_client(region: str | None) -> Any:
    """boto3's EC2 client with the user's credentials (AWS_PROFILE, env, SSO...; AWS_ENDPOINT_URL is
    honoured by boto3 itself). boto3 comes with the trainer extra, not with the CLI's own install."""
    try:
        import boto3
    except ImportError:
        raise CloudError(
            "verify --cloud needs boto3 for AWS: pip install boto3 (or trainplane[trainer])"
        ) from None
    return boto3.client("ec2", region_name=region)
