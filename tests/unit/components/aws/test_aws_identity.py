"""Buckets and the IAM roles for service accounts that reach them: parsed policies, least privilege.

Team policies are checked with a small evaluator of the IAM features they use, so "team A cannot
reach team B's prefix" is tested on requests, not on the policy's spelling.
"""

from __future__ import annotations

import fnmatch

import pytest

from components.aws.identity import OBJECT_ACTIONS
from tests.helpers.aws import as_list, doc, one, plan

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

HOST = "oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F6A7B"
BUCKET = "aws:s3/bucket:Bucket"


def _bucket_arn(result, name: str) -> str:
    return f"arn:aws:s3:::{one(result, BUCKET, name).inputs['bucketPrefix']}20260101000000000000000001"


def _role_docs(result, component: str) -> tuple[dict, dict]:
    role = one(result, "aws:iam/role:Role", f"{component}-role")
    policy = one(result, "aws:iam/rolePolicy:RolePolicy", f"{component}-policy")
    return doc(role.inputs["assumeRolePolicy"]), doc(policy.inputs["policy"])


def _assert_scoped_to(policy: dict, bucket_arn: str, key_arn: str) -> None:
    for s in policy["Statement"]:
        assert s["Effect"] == "Allow"
        actions, resources = as_list(s["Action"]), as_list(s["Resource"])
        assert not [a for a in actions if "*" in a], actions
        assert "*" not in resources
        services = {a.split(":")[0] for a in actions}
        if services == {"s3"}:
            assert resources in ([bucket_arn], [f"{bucket_arn}/*"]), resources
        else:
            assert services == {"kms"} and resources == [key_arn]
    granted = {
        (a, r) for s in policy["Statement"] for a in as_list(s["Action"]) for r in as_list(s["Resource"])
    }
    assert ("s3:ListBucket", bucket_arn) in granted
    assert ("s3:PutObject", f"{bucket_arn}/*") in granted and ("s3:GetObject", f"{bucket_arn}/*") in granted
    assert ("kms:GenerateDataKey", key_arn) in granted


def _allowed(policy: dict, action: str, resource: str, context: dict[str, str] | None = None) -> bool:
    """Whether an identity policy allows one request (Allow statements only, as these policies are).

    IAM semantics for what these policies use: `*` in actions and resources matches any characters;
    StringLike/StringEquals conditions match when the request's key matches any listed value, and a key
    the request does not carry never matches.
    """
    context = context or {}
    for s in policy["Statement"]:
        if s["Effect"] != "Allow":
            continue
        if not any(fnmatch.fnmatchcase(action, a) for a in as_list(s["Action"])):
            continue
        if not any(fnmatch.fnmatchcase(resource, r) for r in as_list(s["Resource"])):
            continue
        ok = True
        for op, keys in (s.get("Condition") or {}).items():
            for key, values in keys.items():
                got = context.get(key)
                if op == "StringLike":
                    ok &= got is not None and any(fnmatch.fnmatchcase(got, v) for v in as_list(values))
                elif op == "StringEquals":
                    ok &= got in as_list(values)
                else:
                    ok = False  # an operator this evaluator does not know never grants
        if ok:
            return True
    return False


@pytest.mark.parametrize("team", ["llm", "eval"])
def test_team_role_trusts_its_trainer_and_reaches_only_its_prefix(team):
    result = plan("aws-h200-efa")
    trust, policy = _role_docs(result, f"h200-train-identity-team-{team}")
    (stmt,) = trust["Statement"]
    assert stmt["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert stmt["Principal"] == {"Federated": f"arn:aws:iam::123456789012:oidc-provider/{HOST}"}
    assert stmt["Condition"] == {
        "StringEquals": {
            f"{HOST}:sub": f"system:serviceaccount:{team}:trainer",
            f"{HOST}:aud": "sts.amazonaws.com",
        }
    }
    bucket = _bucket_arn(result, "h200-train-buckets-checkpoints-bucket")
    key = "arn:aws:kms:us-east-1:123456789012:key/h200-train-data-0000"
    for s in policy["Statement"]:
        assert not [a for a in as_list(s["Action"]) if "*" in a]
        assert set(as_list(s["Resource"])) <= {bucket, f"{bucket}/{team}/*", key}
    # What a trainer does with s3://<bucket>/<team>/<job>: write, read, list, resume, clean up.
    for action in ("s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload"):
        assert _allowed(policy, action, f"{bucket}/{team}/gpt-small/step-100/__0_0.distcp")
    assert _allowed(policy, "s3:ListBucket", bucket, {"s3:prefix": f"{team}/gpt-small/"})
    assert _allowed(policy, "s3:ListBucket", bucket, {"s3:prefix": f"{team}/"})
    via_s3 = {"kms:ViaService": "s3.us-east-1.amazonaws.com"}
    assert _allowed(policy, "kms:GenerateDataKey", key, via_s3) and _allowed(
        policy, "kms:Decrypt", key, via_s3
    )
    # The data key is shared: only through S3, where the prefix decides.
    assert not _allowed(policy, "kms:Decrypt", key)
    team_out = next(t for t in result.outputs["teams"] if t["name"] == team)
    assert team_out["identity"] == f"arn:aws:iam::123456789012:role/h200-train-identity-team-{team}-role"


def test_no_team_reaches_another_teams_checkpoints():
    result = plan("aws-h200-efa")
    bucket = _bucket_arn(result, "h200-train-buckets-checkpoints-bucket")
    teams = [t["name"] for t in result.outputs["teams"]]
    assert len(teams) == 2
    for team in teams:
        _, policy = _role_docs(result, f"h200-train-identity-team-{team}")
        for other in (t for t in teams if t != team):
            for action in OBJECT_ACTIONS:
                assert not _allowed(policy, action, f"{bucket}/{other}/job/step-1/.metadata"), (team, action)
            for prefix in (f"{other}/", f"{other}/job/", "", other):
                assert not _allowed(policy, "s3:ListBucket", bucket, {"s3:prefix": prefix}), (team, prefix)
        # Nor objects outside any team prefix, nor a list without a prefix, nor every in-flight upload.
        assert not _allowed(policy, "s3:GetObject", f"{bucket}/loose-object")
        assert not _allowed(policy, "s3:ListBucket", bucket)
        assert not _allowed(policy, "s3:ListBucketMultipartUploads", bucket)


def test_a_team_whose_name_extends_another_cannot_list_it(plan_platform):
    from tests.helpers.plans import platform_object

    obj = platform_object("aws-h200-efa")
    obj["teams"] = [{"name": "llm", "gpuQuota": 16}, {"name": "llm2", "gpuQuota": 16}]
    result = plan_platform(obj)
    bucket = _bucket_arn(result, "h200-train-buckets-checkpoints-bucket")
    _, policy = _role_docs(result, "h200-train-identity-team-llm")
    # "llm" as a bare prefix would list llm2/...; the policy admits only "llm/" and below.
    assert not _allowed(policy, "s3:ListBucket", bucket, {"s3:prefix": "llm"})
    assert not _allowed(policy, "s3:ListBucket", bucket, {"s3:prefix": "llm2/"})
    assert not _allowed(policy, "s3:GetObject", f"{bucket}/llm2/job/x")


def test_loki_role_reaches_only_the_logs_bucket():
    result = plan("aws-dev")
    trust, policy = _role_docs(result, "ml-dev-identity-loki")
    assert (
        trust["Statement"][0]["Condition"]["StringEquals"][f"{HOST}:sub"]
        == "system:serviceaccount:monitoring:loki"
    )
    _assert_scoped_to(
        policy,
        _bucket_arn(result, "ml-dev-buckets-logs-bucket"),
        "arn:aws:kms:us-east-1:123456789012:key/ml-dev-data-0000",
    )


def test_no_logs_bucket_or_loki_role_without_loki():
    result = plan("aws-byo-vpc")
    assert [b.name for b in result.of_type(BUCKET)] == ["ml-shared-buckets-checkpoints-bucket"]
    assert set(result.outputs["buckets"]) == {"checkpoints"}
    assert not [r for r in result.of_type("aws:iam/role:Role") if "loki" in r.name]


@pytest.mark.parametrize("purpose", ["checkpoints", "logs"])
def test_buckets_are_private_kms_encrypted_and_tls_only(purpose):
    result = plan("aws-dev")
    comp = f"ml-dev-buckets-{purpose}"
    bucket = one(result, BUCKET, f"{comp}-bucket")
    bucket_id = result.outputs["buckets"][purpose]  # an S3 bucket's id is its name
    assert bucket_id.startswith(bucket.inputs["bucketPrefix"])
    block = one(
        result, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", f"{comp}-public-access"
    ).inputs
    assert block["bucket"] == bucket_id
    assert all(
        block[k] is True
        for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    sse = one(
        result,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        f"{comp}-sse",
    ).inputs
    (rule,) = sse["rules"]
    assert rule["applyServerSideEncryptionByDefault"] == {
        "sseAlgorithm": "aws:kms",
        "kmsMasterKeyId": "arn:aws:kms:us-east-1:123456789012:key/ml-dev-data-0000",
    }
    assert rule["bucketKeyEnabled"] is True
    owner = one(result, "aws:s3/bucketOwnershipControls:BucketOwnershipControls", f"{comp}-ownership").inputs
    assert owner["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
    policy = doc(one(result, "aws:s3/bucketPolicy:BucketPolicy", f"{comp}-tls-only").inputs["policy"])
    (deny,) = policy["Statement"]
    arn = _bucket_arn(result, f"{comp}-bucket")
    assert deny["Effect"] == "Deny" and deny["Resource"] == [arn, f"{arn}/*"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_checkpoints_are_versioned_and_old_versions_expire():
    result = plan("aws-dev")
    versioning = one(result, "aws:s3/bucketVersioning:BucketVersioning").inputs
    # Wired to the checkpoint bucket by its id (an S3 bucket's id is its name).
    assert versioning["bucket"] == result.outputs["buckets"]["checkpoints"]
    assert versioning["bucket"].startswith("ml-dev-ckpt-")
    assert versioning["versioningConfiguration"] == {"status": "Enabled"}
    lifecycle = one(
        result,
        "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
        "ml-dev-buckets-checkpoints-lifecycle",
    )
    rules = {r["id"]: r for r in lifecycle.inputs["rules"]}
    assert rules["expire-old-versions"]["noncurrentVersionExpiration"] == {"noncurrentDays": 7}
    assert rules["abort-incomplete-multipart"]["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": 2}
    assert all(r["status"] == "Enabled" for r in rules.values())
    versioning_urn = one(result, "aws:s3/bucketVersioning:BucketVersioning").urn
    assert versioning_urn in lifecycle.deps


def test_bundle_profile_and_bucket_outputs():
    result = plan("aws-dev")
    out = result.outputs
    assert out["objectStore"] == "s3"
    assert set(out["buckets"]) == {"checkpoints", "logs"}
    assert out["buckets"]["logs"].startswith("ml-dev-logs-")
