"""`trainplane verify --cloud` for AWS (AwsVerifier.verify_cloud_api): the pools' reservations and instance
type offerings, with DescribeCapacityReservations and DescribeInstanceTypeOfferings (plus
DescribeAvailabilityZones / DescribeSubnets to learn the zones of pools that name none).

Only Describe* calls are made: the checks need `ec2:DescribeCapacityReservations`,
`ec2:DescribeInstanceTypeOfferings`, `ec2:DescribeAvailabilityZones` and `ec2:DescribeSubnets`.

moto 5.2.5 (the tests' moto_server) answers DescribeInstanceTypeOfferings, DescribeAvailabilityZones
and DescribeSubnets, but has no Capacity Reservations or Capacity Blocks at all; those are tested with
responses shaped per the EC2 API reference, fed through botocore's before-call hook
(tests/integration/infra/verify/test_verify_cloud.py).

The report (infra/verify/report.py, mode "cloud") has three checks: `zones` (the zones of pools that name
none), `reservation` (one per reserved pool) and `offering` (one per pool); what passed is in each check's
`examined` ("POOL (RESERVATION): what it is"), each problem is a finding of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from components.aws.capacity import single_zone
from components.aws.node_group import machine_shapes
from components.spec import NodePoolSpec, PlatformSpec
from components.spec.capacity import RESERVED
from infra.verify.cloud import CloudError, cloud_report
from infra.verify.report import CheckResult, Report

# DescribeCapacityReservations: State of a reservation instances can launch into now or at its start
# (EC2 API reference, CapacityReservation.State; Capacity Blocks are `scheduled` before their start).
USABLE_STATES = {"reservation": {"active"}, "capacity-block": {"active", "scheduled"}}
# CapacityReservation.ReservationType: `default` for an ODCR, `capacity-block` for a Capacity Block.
RESERVATION_TYPES = {"reservation": "default", "capacity-block": "capacity-block"}
# EKS nodes run the Linux AMIs (AL2023): the reservation's platform must match to be used.
PLATFORM = "Linux/UNIX"


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


def verify_cloud_api(spec: PlatformSpec, ec2: Any = None) -> Report:
    """Check `spec` against EC2. `ec2`: an EC2 client to use instead of boto3's default one."""
    return verify_aws(spec, ec2 if ec2 is not None else ec2_client(spec.region))


def verify_aws(spec: PlatformSpec, ec2: Any) -> Report:
    endpoint = getattr(getattr(ec2, "meta", None), "endpoint_url", "")
    report = cloud_report(spec, f"{spec.region} via {endpoint}")
    zones_res, reservation, offering = (CheckResult(n) for n in ("zones", "reservation", "offering"))
    report.checks += [zones_res, reservation, offering]
    default_zones = _default_zones(spec, ec2, zones_res)
    for pool in spec.node_pools:
        types = _instance_types(spec, pool)
        zones = list(pool.zones) or default_zones
        if spec.network.vpc_id and single_zone(pool):
            # With brought subnets a one-zone pool takes the first subnet (components/aws/network.py).
            zones = zones[:1]
        if pool.capacity in RESERVED and pool.reservation:
            _check_reservation(ec2, pool, types, zones, reservation)
        if types and zones:
            _check_offerings(ec2, pool, types, zones, offering)
        else:
            offering.note(f"{pool.name}: not checked: no {'zones' if types else 'instance types'} known")
    if not any(p.capacity in RESERVED and p.reservation for p in spec.node_pools):
        reservation.skipped = "no reservation or capacity-block pool names a reservation"
    return report


def _instance_types(spec: PlatformSpec, pool: NodePoolSpec) -> list[str]:
    return [s.name for s in machine_shapes(pool, spec.gpus_per_node(pool) or 0)]


def _default_zones(spec: PlatformSpec, ec2: Any, res: CheckResult) -> list[str]:
    """The zones of pools that name none: the brought subnets' zones, or the first `network.zones`
    regular zones of the region, as components/aws/network.py picks them."""
    try:
        if spec.network.vpc_id:
            subnets = ec2.describe_subnets(SubnetIds=list(spec.network.subnet_ids))["Subnets"]
            zone_of = {s["SubnetId"]: s["AvailabilityZone"] for s in subnets}
            # In the order of network.subnetIds, first subnet's zone first.
            picked = list(dict.fromkeys(zone_of[i] for i in spec.network.subnet_ids if i in zone_of))
            res.examined.append(f"network.subnetIds: {', '.join(picked)}")
            return picked
        zones = ec2.describe_availability_zones(Filters=[{"Name": "state", "Values": ["available"]}])
    except Exception as e:  # botocore ClientError: reported; no credentials or endpoint: raised (exit 2)
        raise_if_unreachable(e)
        res.fail(f"network: could not list the zones: {_error(e)}", "network")
        return []
    names = [
        z["ZoneName"]
        for z in zones["AvailabilityZones"]
        if z.get("OptInStatus", "opt-in-not-required") == "opt-in-not-required"
        and z.get("ZoneType", "availability-zone") == "availability-zone"
    ]
    picked = sorted(names)[: spec.network.zones]
    res.examined.append(f"network.zones: {', '.join(picked)}")
    return picked


def _check_reservation(
    ec2: Any, pool: NodePoolSpec, types: list[str], zones: list[str], res: CheckResult
) -> None:
    rid = pool.reservation or ""
    subject = f"{pool.name} ({rid})"
    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
    except Exception as e:
        raise_if_unreachable(e)
        res.fail(f"{subject}: not found or not readable: {_error(e)}", pool.name, rid)
        return
    reservations = found.get("CapacityReservations") or []
    if not reservations:
        res.fail(f"{subject}: not found", pool.name, rid)
        return
    problems = list(_reservation_problems(pool, types, zones, reservations[0]))
    for problem in problems:
        res.fail(f"{subject}: {problem}", pool.name, rid)
    if problems:
        return
    r = reservations[0]
    res.examined.append(
        f"{subject}: {r.get('ReservationType', 'default')} {r.get('State')}: {r.get('TotalInstanceCount')} x "
        f"{r.get('InstanceType')} in {r.get('AvailabilityZone')}"
        + (f" until {_when(r['EndDate'])}" if r.get("EndDate") else "")
    )


def _reservation_problems(
    pool: NodePoolSpec, types: list[str], zones: list[str], r: dict[str, Any]
) -> Iterable[str]:
    cap = pool.capacity
    kind = r.get("ReservationType", "default")
    if kind != RESERVATION_TYPES[cap]:
        yield f"is a {kind} reservation, the pool says capacity {cap}"
    if r.get("State") not in USABLE_STATES[cap]:
        yield f"state {r.get('State')}, instances launch only into {' or '.join(sorted(USABLE_STATES[cap]))}"
    if types and r.get("InstanceType") not in types:
        yield f"holds {r.get('InstanceType')}, the pool launches {', '.join(types)}"
    if zones and r.get("AvailabilityZone") not in zones:
        yield f"is in {r.get('AvailabilityZone')}, the pool in {', '.join(zones)}"
    total = int(r.get("TotalInstanceCount") or 0)
    if pool.effective_max_nodes > total:
        yield f"holds {total} instances, the pool's maxNodes is {pool.effective_max_nodes}"
    if r.get("InstancePlatform", PLATFORM) != PLATFORM:
        yield f"is for {r.get('InstancePlatform')}, EKS nodes are {PLATFORM}"
    if cap == "capacity-block":
        # Kueue admits to the block's flavor between the stack's dates (block_window_agent.py): they must
        # be the block's own.
        for key, mine, field in (
            ("blockStart", pool.block_start, "StartDate"),
            ("blockEnd", pool.block_end, "EndDate"),
        ):
            theirs = _as_datetime(r.get(field))
            if mine is not None and theirs is not None and mine != theirs:
                yield f"{field} is {theirs.isoformat()}, the pool's {key} {mine.isoformat()}"


def _check_offerings(
    ec2: Any, pool: NodePoolSpec, types: list[str], zones: list[str], res: CheckResult
) -> None:
    """Every zone of the pool offers one of its types at least, and every type is offered somewhere
    (a spot pool draws on whichever of its types a zone has)."""
    try:
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": types}, {"Name": "location", "Values": zones}],
        )
        offered = {
            (o["InstanceType"], o["Location"]) for page in pages for o in page["InstanceTypeOfferings"]
        }
    except Exception as e:
        raise_if_unreachable(e)
        res.fail(f"{pool.name}: could not list offerings: {_error(e)}", pool.name)
        return
    bare_zones = [z for z in zones if not any((t, z) in offered for t in types)]
    unoffered = [t for t in types if not any((t, z) in offered for z in zones)]
    for z in bare_zones:
        res.fail(f"{pool.name}: {z} offers none of {', '.join(types)}", pool.name, z)
    for t in unoffered:
        res.fail(f"{pool.name}: {t} is offered in none of {', '.join(zones)}", pool.name, t)
    if not (bare_zones or unoffered):
        res.examined.append(f"{pool.name}: {', '.join(types)} offered in {', '.join(zones)}")


def _as_datetime(value: Any) -> datetime | None:
    """A timestamp as botocore gives it (a datetime) or as ISO 8601 text; None when absent or unreadable."""
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def _when(value: Any) -> str:
    """botocore parses timestamps into datetimes; ISO 8601 either way."""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _error(e: Exception) -> str:
    """The error in one line: a finding is one line (botocore's ResponseParserError, for one, carries the
    whole unparsable body on the lines after the first)."""
    err = getattr(e, "response", {}).get("Error", {}) if hasattr(e, "response") else {}
    if err:
        return f"{err.get('Code')}: {err.get('Message')}"
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"
