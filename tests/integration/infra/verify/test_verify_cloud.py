"""`trainplane verify STACK --cloud` (issue 13 point 6) against moto_server on loopback.

moto 5.2.5 answers DescribeAvailabilityZones and DescribeInstanceTypeOfferings (from its recorded
offering tables: in us-east-1 p5en.48xlarge is offered in us-east-1a and c, not b) but has no Capacity
Reservations (its server answers 500): DescribeCapacityReservations is served from
tests/data/ec2/describe_capacity_reservations.json through botocore's before-call hook, the mechanism
botocore's own Stubber uses, on the same client."""

from __future__ import annotations

import copy
import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from components.spec import PlatformSpec
from infra import cli
from infra.verify import cloud
from infra.verify.clouds.aws import cloud_api
from infra.verify.clouds.aws.cloud_api import verify_aws
from tests.helpers import procs
from tests.helpers.plans import ROOT, platform_object

RECORDED = json.loads((ROOT / "tests/data/ec2/describe_capacity_reservations.json").read_text())


@pytest.fixture(scope="module")
def moto_url(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("moto_server")
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        proc = procs.spawn([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        procs.stop(proc, 10)


def _client(url, reservations=None):
    """An EC2 client on moto_server whose DescribeCapacityReservations answers from `reservations`."""
    import boto3
    from botocore.awsrequest import AWSResponse

    ec2 = boto3.client(
        "ec2", endpoint_url=url, region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    table = RECORDED if reservations is None else reservations

    asked: list[str] = []

    def remember(params, **_):  # the API parameters, before botocore serializes them
        asked[:] = params.get("CapacityReservationIds") or []

    def answer(**_):
        ids = list(asked)
        found = [table[i] for i in ids if i in table]
        if len(found) < len(ids):
            error = {"Code": "InvalidCapacityReservationId.NotFound", "Message": f"{ids[0]} does not exist"}
            return AWSResponse(url, 400, {}, None), {
                "Error": error,
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
        return AWSResponse(url, 200, {}, None), {"CapacityReservations": found}

    ec2.meta.events.register("before-parameter-build.ec2.DescribeCapacityReservations", remember)
    ec2.meta.events.register("before-call.ec2.DescribeCapacityReservations", answer)
    return ec2


def _report(url, obj=None, reservations=None):
    spec = PlatformSpec.load(obj or platform_object("aws-h100-reserved"))
    return verify_aws(spec, _client(url, reservations))


def test_moto_has_no_capacity_reservations(moto_url):
    """Why the reservations are served from recorded responses: moto_server fails on the call."""
    import boto3
    from botocore.config import Config

    ec2 = boto3.client(
        "ec2",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="t",
        aws_secret_access_key="t",
        config=Config(retries={"total_max_attempts": 1}),
    )
    with pytest.raises(Exception):  # noqa: B017 - a 500 page botocore cannot parse, or a ClientError
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0123456789abcdef0"])


def test_reference_stack_passes(moto_url):
    report = _report(moto_url)
    assert report.ok and report.verified, [f.line() for f in report.findings]
    # The same Report as offline and live verify, one CheckResult per check.
    assert (report.mode, [c.name for c in report.checks]) == ("cloud", ["zones", "reservation", "offering"])
    assert report.check("zones").examined == ["network.zones: us-east-1a, us-east-1b, us-east-1c"]
    assert report.check("reservation").examined == [
        "h100-block (cr-0123456789abcdef0): capacity-block scheduled: 4 x p5.48xlarge in us-east-1b "
        "until 2026-12-15T11:30:00+00:00",
        "h100-odcr (cr-0fedcba9876543210): default active: 2 x p5.48xlarge in us-east-1a",
    ]
    offered = dict(e.split(": ", 1) for e in report.check("offering").examined)
    # The spot pool shares the block's zone (one EFA layout and zone for the job's fallback).
    assert offered["h100-spot"] == "p5.48xlarge offered in us-east-1b"
    # The system pool names no zone: it gets the first 3 zones of the region, as the VPC does.
    assert offered["system"] == "m6i.xlarge offered in us-east-1a, us-east-1b, us-east-1c"
    assert sorted(offered) == ["h100-block", "h100-od", "h100-odcr", "h100-spot", "system"]


def _with(rid, **changes):
    table = copy.deepcopy(RECORDED)
    table[rid].update(changes)
    return table


BLOCK, ODCR = "cr-0123456789abcdef0", "cr-0fedcba9876543210"


@pytest.mark.parametrize(
    ("table", "subject", "message"),
    [
        (
            _with(BLOCK, InstanceType="p5en.48xlarge"),
            BLOCK,
            "holds p5en.48xlarge, the pool launches p5.48xlarge",
        ),
        (_with(BLOCK, AvailabilityZone="us-east-1c"), BLOCK, "is in us-east-1c, the pool in us-east-1b"),
        (_with(BLOCK, TotalInstanceCount=2), BLOCK, "holds 2 instances, the pool's maxNodes is 4"),
        (
            _with(BLOCK, State="expired"),
            BLOCK,
            "state expired, instances launch only into active or scheduled",
        ),
        (
            _with(ODCR, ReservationType="capacity-block"),
            ODCR,
            "is a capacity-block reservation, the pool says capacity reservation",
        ),
        (_with(ODCR, State="scheduled"), ODCR, "state scheduled, instances launch only into active"),
        (
            # An extended block: Kueue would close its flavor at the stack's old blockEnd.
            _with(BLOCK, EndDate="2026-12-22T11:30:00+00:00"),
            BLOCK,
            "EndDate is 2026-12-22T11:30:00+00:00, the pool's blockEnd 2026-12-15T11:30:00+00:00",
        ),
        (
            {k: v for k, v in RECORDED.items() if k != ODCR},
            ODCR,
            "not found or not readable: InvalidCapacityReservationId.NotFound: cr-0fedcba9876543210 does not exist",
        ),
    ],
)
def test_reservation_mismatches_fail_with_one_line(moto_url, table, subject, message):
    report = _report(moto_url, reservations=table)
    pool = "h100-block" if subject == BLOCK else "h100-odcr"
    assert [(f.line(), f.objects) for f in report.findings] == [
        (f"reservation: {pool} ({subject}): {message}", (pool, subject))
    ]
    assert report.failed() == ["reservation"] and not report.ok
    # The other reservation still passes: it is examined, the failed one is not.
    assert len(report.check("reservation").examined) == 1


def test_instance_type_not_offered_in_the_pools_zone(moto_url):
    obj = platform_object("aws-h100-reserved")
    obj["nodePools"][3].update(gpu="H200", instanceType="p5en.48xlarge")  # h100-od, in us-east-1b
    report = _report(moto_url, obj)
    assert [f.line() for f in report.findings] == [
        "offering: h100-od: us-east-1b offers none of p5en.48xlarge",
        "offering: h100-od: p5en.48xlarge is offered in none of us-east-1b",
    ]


def test_cli_cloud_flag(moto_url, monkeypatch, capsys):
    monkeypatch.setattr(cloud_api, "ec2_client", lambda region: _client(moto_url))
    assert cli.main(["verify", "aws-h100-reserved", "--cloud", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # The JSON of `verify --json` (offline and live): the same keys, mode "cloud".
    assert list(out) == ["stack", "cloud", "kubernetesVersion", "mode", "source", "ok", "checks"]
    assert (out["stack"], out["mode"], out["ok"]) == ("aws-h100-reserved", "cloud", True)
    assert [(c["name"], c["status"], len(c["examined"])) for c in out["checks"]] == [
        ("zones", "pass", 1),
        ("reservation", "pass", 2),
        ("offering", "pass", 5),
    ]
    from tests.helpers.cli import _bad_keys

    assert _bad_keys(out) == []  # one key style (camelCase) in every command's JSON
    # The table of offline verify, the failure as one line naming the pool and its reservation; exit 1.
    table = _with(BLOCK, TotalInstanceCount=2)
    monkeypatch.setattr(cloud_api, "ec2_client", lambda region: _client(moto_url, table))
    assert cli.main(["verify", "aws-h100-reserved", "--cloud"]) == 1
    out = capsys.readouterr().out
    assert "trainplane verify aws-h100-reserved (aws 1.35, cloud: us-east-1 via" in out
    assert (
        "reservation: h100-block (cr-0123456789abcdef0): holds 2 instances, the pool's maxNodes is 4\n" in out
    )
    assert out.rstrip().endswith("failed: reservation")
    # GCP: nothing asked, and it says so rather than passing: exit 2 (no check could run), never 0.
    assert cli.main(["verify", "gcp-h100-dws", "--cloud"]) == 2
    printed = capsys.readouterr()
    assert printed.err.strip() == "verify --cloud: no cloud check ran on gcp: nothing is verified"
    assert "reservation: note: not checked: that each `reservation` exists" in printed.out
    assert cli.main(["verify", "gcp-h100-dws", "--cloud", "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and {c["status"] for c in data["checks"]} == {"skip"}


def test_cli_without_credentials_is_one_line_exit_2(monkeypatch, tmp_path, capsys):
    # It used to print six FAIL rows (one per pool) and exit 1, as if the reservations were wrong.
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert cli.main(["verify", "aws-h100-reserved", "--cloud"]) == 2
    printed = capsys.readouterr()
    assert printed.err.strip().splitlines() == [
        "verify --cloud: cannot ask the cloud: NoCredentialsError: Unable to locate credentials"
    ]
    assert printed.out == ""  # no report: nothing was asked


def test_cli_without_boto3_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "boto3", None)
    assert cli.main(["verify", "aws-h100-reserved", "--cloud"]) == cli.EXIT_CONFIG
    assert capsys.readouterr().err.strip() == (
        "verify --cloud needs boto3 for AWS: pip install boto3 (or trainplane[trainer])"
    )


def test_brought_subnets_put_a_reserved_pool_in_the_first_subnets_zone(moto_url):
    """With vpcId a one-zone pool takes the first of network.subnetIds: that subnet's zone must be the
    reservation's, which only the cloud can tell."""
    ec2 = _client(moto_url)
    vpc = ec2.create_vpc(CidrBlock="10.90.0.0/16")["Vpc"]["VpcId"]
    subnet = {
        z: ec2.create_subnet(VpcId=vpc, CidrBlock=c, AvailabilityZone=z)["Subnet"]["SubnetId"]
        for z, c in (
            ("us-east-1c", "10.90.0.0/20"),
            ("us-east-1a", "10.90.16.0/20"),
            ("us-east-1b", "10.90.32.0/20"),
        )
    }
    obj = platform_object("aws-h100-reserved")
    obj["network"] = {"vpcId": vpc, "subnetIds": list(subnet.values())}
    obj["nodePools"] = [p for p in obj["nodePools"] if p["name"] in ("system", "h100-odcr")]
    obj["nodePools"][1].pop("zones")
    obj["storage"] = []
    obj["teams"] = [{"name": "research", "gpuQuota": 16}]
    report = verify_aws(PlatformSpec.load(obj), ec2)
    assert [f.line() for f in report.findings] == [
        "reservation: h100-odcr (cr-0fedcba9876543210): is in us-east-1a, the pool in us-east-1c"
    ]
    assert report.check("zones").examined == ["network.subnetIds: us-east-1c, us-east-1a, us-east-1b"]
    obj["network"]["subnetIds"] = [subnet["us-east-1a"], subnet["us-east-1c"]]
    assert verify_aws(PlatformSpec.load(obj), ec2).ok


@pytest.mark.parametrize(
    ("code", "unreachable"),
    [
        ("AuthFailure", True),
        ("UnauthorizedOperation", True),
        ("InvalidCapacityReservationId.NotFound", False),
    ],
)
def test_refused_credentials_are_not_a_failed_check(code, unreachable):
    from botocore.exceptions import ClientError

    e = ClientError({"Error": {"Code": code, "Message": "m"}}, "DescribeCapacityReservations")
    if unreachable:
        with pytest.raises(cloud.CloudError, match=f"cannot ask the cloud: ClientError: .*{code}"):
            cloud_api.raise_if_unreachable(e)
    else:
        cloud_api.raise_if_unreachable(e)  # a check that failed: reported as a finding by the caller


def test_an_unreadable_answer_is_a_one_line_finding(moto_url):
    """moto_server answers DescribeCapacityReservations with an HTML 500 page: botocore's
    ResponseParserError carries the page on the lines after its first; the finding keeps the first."""
    import boto3
    from botocore.config import Config

    ec2 = boto3.client(
        "ec2",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="t",
        aws_secret_access_key="t",
        config=Config(retries={"total_max_attempts": 1}),
    )
    report = verify_aws(PlatformSpec.load(platform_object("aws-h100-reserved")), ec2)
    lines = [f.line() for f in report.findings]
    assert [line.split(": not found or not readable: ")[0] for line in lines] == [
        "reservation: h100-block (cr-0123456789abcdef0)",
        "reservation: h100-odcr (cr-0fedcba9876543210)",
    ]
    assert all("\n" not in line for line in lines), lines
