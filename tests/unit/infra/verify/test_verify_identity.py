"""verify identity: service account -> cloud identity -> trust -> data, one to one per team, and no team
reaches another team's data. Broken (and well-scoped) identities are written into reference plans."""

from __future__ import annotations

import json

import pytest

from tests.helpers.verify_plans import edit, lines, plan, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def _team_role(team: str):
    return lambda r: r.type == ROLE and r.name.endswith(f"-team-{team}-role")


def _team_policy(team: str):
    return lambda r: r.type == ROLE_POLICY and r.name.endswith(f"-team-{team}-policy")


def scoped_policy(prefix: str) -> str:
    bucket = "arn:aws:s3:::ckpt"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["s3:ListBucket"],
                    "Resource": [bucket],
                    "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/*"]}},
                },
                {
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:PutObject"],
                    "Resource": [f"{bucket}/{prefix}/*"],
                },
            ],
        }
    )


def test_a_role_that_trusts_another_service_account_is_refused():
    def other_sub(inputs: dict) -> None:
        doc = json.loads(inputs["assumeRolePolicy"])
        cond = doc["Statement"][0]["Condition"]["StringEquals"]
        for k in cond:
            if k.endswith(":sub"):
                cond[k] = "system:serviceaccount:research:default"
        inputs["assumeRolePolicy"] = json.dumps(doc)

    report = run(edit(plan("aws-dev"), _team_role("research"), other_sub), "identity")
    assert any("does not trust system:serviceaccount:research:trainer" in line for line in lines(report)), (
        lines(report)
    )


def test_team_data_is_its_prefix_only():
    def own(inputs: dict) -> None:
        inputs["policy"] = scoped_policy("llm")

    def evals(inputs: dict) -> None:
        inputs["policy"] = scoped_policy("eval")

    p = edit(edit(plan("aws-h200-efa"), _team_policy("llm"), own), _team_policy("eval"), evals)
    clean = [
        line for line in lines(run(p, "identity")) if "reaches objects" in line or "list every key" in line
    ]
    assert not clean, clean

    stolen = edit(p, _team_policy("eval"), lambda i: i.update(policy=scoped_policy("llm")))
    bad = [line for line in lines(run(stolen, "identity")) if "team eval reaches objects 'llm/*'" in line]
    assert bad, lines(run(stolen, "identity"))


def test_a_job_must_checkpoint_where_its_team_may_write():
    p = edit(plan("aws-dev"), _team_policy("research"), lambda i: i.update(policy=scoped_policy("elsewhere")))
    bad = [line for line in lines(run(p, "identity")) if "checkpoints to s3://" in line]
    assert bad and "outside what team research's identity may write" in bad[0], lines(run(p, "identity"))


def test_gke_workload_identity_binding_must_name_the_service_account():
    def other_member(inputs: dict) -> None:
        inputs["member"] = inputs["member"].replace("[research/trainer]", "[research/default]")

    member = lambda r: r.type == "gcp:serviceaccount/iAMMember:IAMMember" and "research" in r.name  # noqa: E731
    report = run(edit(plan("gcp-dev"), member, other_member), "identity")
    assert any("does not grant roles/iam.workloadIdentityUser" in line for line in lines(report)), lines(
        report
    )


def test_gcs_grants_need_a_condition_on_the_teams_prefix():
    grant = lambda r: r.type == "gcp:storage/bucketIAMMember:BucketIAMMember" and "team-research" in r.name  # noqa: E731
    unscoped = edit(plan("gcp-dev"), grant, lambda i: i.pop("condition", None))
    whole = [line for line in lines(run(unscoped, "identity")) if "on all of bucket" in line]
    assert whole and "team research" in whole[0], lines(run(unscoped, "identity"))

    def scoped(inputs: dict) -> None:
        inputs["condition"] = {
            "title": "research prefix",
            "expression": f'resource.name.startsWith("projects/_/buckets/{inputs["bucket"]}/objects/research/")',
        }

    fixed = [
        line
        for line in lines(run(edit(plan("gcp-dev"), grant, scoped), "identity"))
        if "on all of bucket" in line
    ]
    assert not fixed, fixed
