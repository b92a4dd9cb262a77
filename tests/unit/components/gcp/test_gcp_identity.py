"""Buckets and identities as GCP would receive them: bucket settings, Workload Identity members, IAM scope."""

from __future__ import annotations

import pytest

from tests.helpers.gcp import (
    BUCKET,
    BUCKET_IAM,
    CLUSTER,
    PROJECT_IAM,
    SA,
    SA_IAM,
    one,
    plan,
    upstream,
)

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _account(result, account_id):
    return one(result, SA, next(r.name for r in result.of_type(SA) if r.inputs["accountId"] == account_id))


@pytest.mark.parametrize("stack", ["gcp-dev", "gcp-h100-mega", "gcp-byo-network"])
def test_buckets_are_private_uniform_and_kept_on_destroy(stack):
    for b in plan(stack).of_type(BUCKET):
        inp = b.inputs
        assert inp["uniformBucketLevelAccess"] is True
        assert inp["publicAccessPrevention"] == "enforced"
        assert inp["forceDestroy"] is False
        assert inp["location"] == plan(stack).outputs["region"].upper()


def test_checkpoint_bucket_keeps_versions_with_a_bounded_lifecycle():
    result = plan("gcp-dev")
    ckpt = one(result, BUCKET, "ml-dev-buckets-checkpoints").inputs
    assert ckpt["name"] == "example-ml-dev-ml-dev-checkpoints"
    assert ckpt["versioning"] == {"enabled": True}
    rules = ckpt["lifecycleRules"]
    assert {
        "action": {"type": "Delete"},
        "condition": {"daysSinceNoncurrentTime": 7.0, "withState": "ARCHIVED"},
    } in rules
    assert {
        "action": {"type": "Delete"},
        "condition": {"numNewerVersions": 3.0, "withState": "ARCHIVED"},
    } in rules
    # Deletes only ever target noncurrent versions: the live checkpoint is never aged out.
    for rule in rules:
        if rule["action"]["type"] == "Delete":
            assert rule["condition"]["withState"] == "ARCHIVED"
    logs = one(result, BUCKET, "ml-dev-buckets-logs").inputs
    assert logs["versioning"] == {"enabled": False}
    assert result.outputs["buckets"] == {
        "checkpoints": "example-ml-dev-ml-dev-checkpoints",
        "logs": "example-ml-dev-ml-dev-logs",
    }


@pytest.mark.parametrize(
    ("stack", "project", "cluster", "teams"),
    [
        ("gcp-dev", "example-ml-dev", "ml-dev", ["research"]),
        ("gcp-h100-mega", "example-ml-prod", "mega", ["pretrain", "research"]),
        ("gcp-byo-network", "example-ml-lab", "l4-lab", ["vision", "speech"]),
    ],
)
def test_each_team_gsa_is_bound_to_its_trainer_ksa_and_the_checkpoint_bucket_only(
    stack, project, cluster, teams
):
    result = plan(stack)
    ckpt_bucket = f"{project}-{cluster}-checkpoints"
    identities = {t["name"]: t["identity"] for t in result.outputs["teams"]}
    for team in teams:
        account = _account(result, f"{cluster}-{team}")
        email = f"{cluster}-{team}@{project}.iam.gserviceaccount.com"
        assert identities[team] == email
        (wi,) = [r for r in result.of_type(SA_IAM) if r.inputs["serviceAccountId"].endswith(f"/{email}")]
        assert wi.inputs == {
            "serviceAccountId": f"projects/{project}/serviceAccounts/{email}",
            "role": "roles/iam.workloadIdentityUser",
            "member": f"serviceAccount:{project}.svc.id.goog[{team}/trainer]",
        }
        grants = [
            r.inputs for r in result.of_type(BUCKET_IAM) if r.inputs["member"] == f"serviceAccount:{email}"
        ]
        (grant,) = grants
        assert {k: grant[k] for k in ("bucket", "role", "member")} == {
            "bucket": ckpt_bucket,
            "role": "roles/storage.objectUser",
            "member": f"serviceAccount:{email}",
        }
        # Teams share the bucket; each reaches its own prefix only (see the condition test below).
        assert grant["condition"]["expression"] == (
            f'resource.name.startsWith("projects/_/buckets/{ckpt_bucket}/objects/{team}/") || '
            f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{team}/")'
        )
        assert not [r for r in result.of_type(PROJECT_IAM) if email in r.inputs["member"]]
        assert account.inputs["project"] == project


def test_loki_gsa_is_bound_to_monitoring_loki_and_the_log_bucket_only():
    result = plan("gcp-dev")
    email = "ml-dev-loki@example-ml-dev.iam.gserviceaccount.com"
    (wi,) = [r for r in result.of_type(SA_IAM) if r.inputs["serviceAccountId"].endswith(f"/{email}")]
    assert wi.inputs["member"] == "serviceAccount:example-ml-dev.svc.id.goog[monitoring/loki]"
    assert wi.inputs["role"] == "roles/iam.workloadIdentityUser"
    grants = [r.inputs for r in result.of_type(BUCKET_IAM) if r.inputs["member"] == f"serviceAccount:{email}"]
    assert grants == [
        {
            "bucket": "example-ml-dev-ml-dev-logs",
            "role": "roles/storage.objectUser",
            "member": f"serviceAccount:{email}",
        }
    ]


def test_without_loki_there_is_no_log_bucket_or_loki_identity():
    result = plan("gcp-byo-network")
    assert [b.inputs["name"] for b in result.of_type(BUCKET)] == ["example-ml-lab-l4-lab-checkpoints"]
    assert not [a for a in result.of_type(SA) if a.inputs["accountId"].endswith("-loki")]
    assert result.outputs["buckets"] == {"checkpoints": "example-ml-lab-l4-lab-checkpoints"}


def test_nodes_run_as_a_least_privilege_service_account():
    result = plan("gcp-dev")
    email = "ml-dev-nodes@example-ml-dev.iam.gserviceaccount.com"
    roles = sorted(r.inputs["role"] for r in result.of_type(PROJECT_IAM))
    assert roles == ["roles/artifactregistry.reader", "roles/container.defaultNodeServiceAccount"]
    for r in result.of_type(PROJECT_IAM):
        assert r.inputs["member"] == f"serviceAccount:{email}"


def test_only_the_workload_identity_bindings_wait_for_the_cluster():
    result = plan("gcp-dev")
    cluster = one(result, CLUSTER).urn
    for wi in result.of_type(SA_IAM):
        assert cluster in wi.deps  # the <project>.svc.id.goog pool exists once the cluster does
    for r in result.of_type(BUCKET_IAM) + result.of_type(BUCKET) + result.of_type(SA):
        assert cluster not in upstream(result, r), r.name


def _cel_allows(expression: str, resource_name: str, list_prefix: str | None) -> bool:
    """Evaluate the two-clause condition the way IAM would for one request: an object call (resource
    name of the object) or a list call (resource name of the bucket, the request's prefix)."""
    import re

    (obj,) = re.findall(r'resource\.name\.startsWith\("([^"]+)"\)', expression)
    (lst,) = re.findall(r'objectListPrefix", ""\)\.startsWith\("([^"]+)"\)', expression)
    return resource_name.startswith(obj) or (list_prefix or "").startswith(lst)


def test_team_identity_reaches_only_its_own_prefix_of_the_checkpoint_bucket():
    result = plan("gcp-h100-mega")
    bucket = "example-ml-prod-mega-checkpoints"
    cond = {
        r.inputs["member"].split(":")[1].split("@")[0]: r.inputs["condition"]["expression"]
        for r in result.of_type(BUCKET_IAM)
        if r.inputs["bucket"] == bucket
    }
    assert set(cond) == {"mega-pretrain", "mega-research"}
    objects = f"projects/_/buckets/{bucket}/objects/"
    bucket_res = f"projects/_/buckets/{bucket}"
    pretrain = cond["mega-pretrain"]
    assert _cel_allows(pretrain, objects + "pretrain/llm/step-100/__0_0.distcp", None)
    assert _cel_allows(pretrain, bucket_res, "pretrain/llm/")  # the trainer lists its own steps
    assert not _cel_allows(pretrain, objects + "research/gpt/step-100/.metadata", None)
    assert not _cel_allows(pretrain, bucket_res, "research/")
    assert not _cel_allows(pretrain, bucket_res, "")  # no listing of the whole bucket
    assert not _cel_allows(pretrain, objects + "pretrain-old/x", None)  # a sibling prefix is not its own


def test_loki_identity_is_not_narrowed_to_a_prefix():
    (grant,) = [r.inputs for r in plan("gcp-dev").of_type(BUCKET_IAM) if r.inputs["bucket"].endswith("-logs")]
    assert "condition" not in grant
