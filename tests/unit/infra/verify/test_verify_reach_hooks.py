"""The verify hooks of network reach and enforcement, team identity, storage path and cloud API rules
(infra/verify/verifier.py, block "(v2)"): what a cloud's verifier answers, and what VerifierDefaults (a
plain cluster with no cloud features) answers. Plans here are a few hand-made resources."""

from __future__ import annotations

import json

from components.spec import PlatformSpec
from infra.verify.checks import identity
from infra.verify.cloud import verify_cloud
from infra.verify.context import Context
from infra.verify.model import build
from infra.verify.report import CheckResult, Report
from infra.verify.verifier import VerifierDefaults
from infra.verify.verifiers import verifier
from tests.helpers.plans import platform_object

DEFAULTS = VerifierDefaults()


def _plan(resources, cloud):
    raw = [
        {"urn": f"urn:pulumi:s::p::{t}::{n}", "type": t, "name": n, "inputs": i, "deps": d}
        for t, n, i, d in resources
    ]
    return build("hooks", raw, {"cloud": cloud, "clusterName": "hooks", "teams": [], "nodePools": []})


def test_network_enforcement_aws_reads_the_vpc_cni_add_on_defaults_note_unknown():
    addon = ("aws:eks/addon:Addon", "vpc-cni", {"addonName": "vpc-cni", "configurationValues": "{}"}, [])
    ctx = Context(_plan([addon], "aws"))
    res = CheckResult("network")
    verifier("aws").verify_network_enforcement(ctx, res)
    assert [f.message for f in res.findings] == [
        'EKS add-on vpc-cni has no configuration enableNetworkPolicy: "true": the VPC CNI accepts every '
        "NetworkPolicy and enforces none"
    ]
    on = (
        *addon[:2],
        {"addonName": "vpc-cni", "configurationValues": json.dumps({"enableNetworkPolicy": "true"})},
        [],
    )
    res = CheckResult("network")
    verifier("aws").verify_network_enforcement(Context(_plan([on], "aws")), res)
    assert res.findings == []
    res = CheckResult("network")
    DEFAULTS.verify_network_enforcement(ctx, res)
    assert res.findings == [] and res.notes[0].startswith(
        "existing cluster: whether it enforces NetworkPolicy"
    )


def test_team_identity_is_the_clouds_mechanism_and_none_by_default():
    from infra.verify.clouds.aws import identity as aws_identity
    from infra.verify.clouds.gcp import identity as gcp_identity

    assert verifier("aws").verify_team_identity() is aws_identity.check_team
    assert verifier("gcp").verify_team_identity() is gcp_identity.check_team
    assert DEFAULTS.verify_team_identity() is None
    assert verifier("kubernetes").verify_team_identity() is None
    # With no mechanism, the identity check says so instead of looking for annotations.
    res = identity.run(Context(_plan([], "kubernetes")))
    assert res.findings == [] and res.notes == [
        "existing cluster: teams get no cloud identity from the platform"
    ]
    # The checkpoint URIs checked are those of every backend's object store.
    assert identity.object_store_schemes() == ["gs", "s3"]


def test_csi_controller_identity_and_storage_path_on_aws_nothing_by_default():
    addon = ("aws:eks/addon:Addon", "efs", {"addonName": "aws-efs-csi-driver"}, [])
    ctx = Context(_plan([addon], "aws"))
    res = CheckResult("storage")
    verifier("aws").verify_csi_controller_identity(ctx, res, "efs.csi.aws.com")
    assert [f.message for f in res.findings] == [
        "EKS add-on aws-efs-csi-driver (efs.csi.aws.com) has no IAM role for kube-system/efs-csi-controller-sa "
        "(serviceAccountRoleArn or a pod identity association): its controller cannot create volumes"
    ]
    res = CheckResult("storage")
    DEFAULTS.verify_csi_controller_identity(ctx, res, "efs.csi.aws.com")
    DEFAULTS.verify_storage_path(ctx, res, None, None, "efs.csi.aws.com")  # type: ignore[arg-type]
    assert res.findings == [] and res.notes == []


def test_ingress_rules_and_create_rules_on_aws_none_by_default():
    rule = {"type": "ingress", "ipProtocol": "tcp", "fromPort": 1018, "toPort": 1023}
    (r,) = _plan(
        [("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "r", rule, [])], "aws"
    ).resources
    assert verifier("aws").verify_rule_admits_tcp(r, 1020) is True
    assert verifier("aws").verify_rule_admits_tcp(r, 988) is False
    assert DEFAULTS.verify_rule_admits_tcp(r, 1020) is False
    fsx = {"deploymentType": "PERSISTENT_2", "storageCapacity": 1000, "perUnitStorageThroughput": 125}
    ctx = Context(_plan([("aws:fsx/lustreFileSystem:LustreFileSystem", "fs", fsx, [])], "aws"))
    res = CheckResult("cloud")
    verifier("aws").verify_create_rules(ctx, res)
    assert [f.message.split(" (")[0] for f in res.findings] == [
        "fsx-persistent2: Lustre file system fs: 1000 GiB: 1200 or a multiple of 2400"
    ]
    res = CheckResult("cloud")
    DEFAULTS.verify_create_rules(ctx, res)
    assert res.findings == [] and res.examined == []


def test_cloud_api_gcp_lists_what_it_does_not_check_default_asks_nothing():
    gcp = verifier("gcp").verify_cloud_api(PlatformSpec.load(platform_object("gcp-h100-dws")))
    assert gcp is not None and gcp.mode == "cloud"
    # Every check skipped, each saying what it would check: nothing verified, so not ok (never a pass).
    assert [(c.name, c.status) for c in gcp.checks] == [
        ("reservation", "skip"),
        ("offering", "skip"),
        ("quota", "skip"),
    ]
    assert gcp.check("reservation").notes[0].startswith("not checked: that each `reservation` exists")
    assert not gcp.verified and not gcp.ok
    onprem = PlatformSpec.load(platform_object("onprem-dev"))
    assert DEFAULTS.verify_cloud_api(onprem) is None
    # verify --cloud then says there was nothing to ask (and exits 2: nothing verified).
    default = verify_cloud(onprem, "onprem-dev")
    assert (default.stack, default.mode, default.verified, default.ok) == (
        "onprem-dev",
        "cloud",
        False,
        False,
    )
    assert [(c.name, c.notes) for c in default.checks] == [
        ("cloud-api", ["cloud kubernetes: no cloud API to ask"])
    ]


def test_a_report_of_skipped_checks_is_a_pass_offline_and_live_but_not_with_cloud():
    """One Report type, one rule that differs: `--cloud` that asked nothing is not ok (exit 2 in the CLI),
    while a live run of offline-only checks keeps its exit code (0)."""
    skipped = [CheckResult("reservation", skipped="no GCP API is asked yet")]
    live = Report("s", "gcp", "1.33", "live", "ctx", checks=list(skipped))
    cloud = Report("s", "gcp", "1.33", "cloud", "nothing asked", checks=list(skipped))
    assert (live.verified, live.ok) == (False, True)
    assert (cloud.verified, cloud.ok) == (False, False)
    cloud.checks.append(CheckResult("offering", examined=["system: m6i.xlarge offered in us-east-1a"]))
    assert (cloud.verified, cloud.ok) == (True, True)
    cloud.checks[1].fail("system: us-east-1a offers none of m6i.xlarge", "system", "us-east-1a")
    assert not cloud.ok and cloud.failed() == ["offering"]
