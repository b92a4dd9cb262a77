"""The policy pack (policy/, issue 21 point 3) without the Pulumi CLI: every reference stack's planned
resources pass every policy, and each policy reports a planted violation under its own name.

Planned resources come from the offline engine once per test process (tests/helpers/plans.planned) and are
handed to each policy as the engine would (tests/helpers/policy.py).
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from components.catalog import catalog
from policy.trainplane_policies import POLICIES, buckets, capacity, encryption, tags
from tests.helpers.plans import ROOT, config_for, plan_object, platform_object, stack_files
from tests.helpers.policy import find, records, records_of, stack_named, violations

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

STACKS = [p.name[len("Pulumi.") : -len(".yaml")] for p in stack_files()]


@pytest.mark.parametrize("stack", STACKS)
def test_every_reference_stack_passes_every_policy(stack):
    with stack_named(stack):
        assert violations(records(stack)) == {}


def test_the_pack_has_eight_policies_for_the_seven_guardrails_each_described_with_defaults():
    names = [p.name for p in POLICIES]
    assert len(set(names)) == len(names) == 8
    for p in POLICIES:
        assert p.description and p.enforcement_level is not None
        for prop in (p.config_schema.properties if p.config_schema else {}).values():
            assert "default" in prop and prop.get("description")


# ---- 1. required tags and labels -------------------------------------------------------------------


def test_a_bucket_without_a_cost_center_fails_required_tags():
    recs = records("aws-dev")
    del find(recs, "aws:s3/bucket:Bucket", "checkpoints")["inputs"]["tags"]["cost-center"]
    assert violations(recs, tags.NAME) == {
        tags.NAME: [
            "aws:s3/bucket:Bucket ml-dev-buckets-checkpoints-bucket: tags lack cost-center (set the platform's "
            "`team` and `costCenter`, or a team's `costCenter`)"
        ]
    }


def test_the_providers_default_tags_count():
    """Tags the AWS provider adds to everything (`aws:defaultTags`, JSON in the stack config) satisfy the
    policy for a resource that sets none of its own."""
    recs = records("aws-dev")
    bucket = find(recs, "aws:s3/bucket:Bucket", "checkpoints")
    del bucket["inputs"]["tags"]
    assert tags.NAME in violations([bucket], tags.NAME)
    bucket["config"]["aws:defaultTags"] = '{"tags": {"team": "ml-platform", "cost-center": "ml-research"}}'
    assert violations([bucket], tags.NAME) == {}


def test_a_platform_without_team_and_cost_center_fails_on_cloud_resources_and_namespaces():
    """The keys flow from the spec: left out, every taggable resource and namespace is reported."""
    platform = platform_object("gcp-dev")
    del platform["team"], platform["costCenter"]
    found = violations(records_of(plan_object(platform), config_for(platform)), tags.NAME)[tags.NAME]
    assert any(
        m.startswith(
            "gcp:container/nodePool:NodePool ml-dev-h100-pool: nodeConfig.resourceLabels lack cost-center, team"
        )
        for m in found
    )
    assert any(m.startswith("gcp:storage/bucket:Bucket ") for m in found)
    assert any(
        m.startswith(
            "kubernetes:core/v1:Namespace ml-dev-queueing-ns: metadata.labels lack "
            "trainplane.dev/cost-center, trainplane.dev/owner"
        )
        for m in found
    )


def test_a_team_namespace_takes_its_own_cost_center():
    platform = platform_object("aws-dev")
    platform["teams"][0]["costCenter"] = "cc-research-42"
    recs = records_of(plan_object(platform), config_for(platform))
    ns = find(recs, "kubernetes:core/v1:Namespace", "team-research")
    assert ns["inputs"]["metadata"]["labels"]["trainplane.dev/cost-center"] == "cc-research-42"
    assert find(recs, "kubernetes:core/v1:Namespace", "queueing")["inputs"]["metadata"]["labels"] == {
        "trainplane.dev/owner": "ml-platform",
        "trainplane.dev/cost-center": "ml-research",
    }


def _sdk_tag_input(resource_type: str) -> str | None:
    """The tags/labels input of a provider type, from the SDK's Args class (snake_case); a GKE node pool's
    are on its VMs, in NodePoolNodeConfigArgs (`nodeConfig.resourceLabels`)."""
    package, module, cls = (
        resource_type.split(":")[0],
        resource_type.split(":")[1].split("/")[0],
        resource_type.split(":")[2],
    )
    sdk = importlib.import_module(f"pulumi_{package}.{module}")
    nested = tags.GCP_LABELS.get(resource_type, "").startswith("nodeConfig.")
    args = getattr(sdk, f"{cls}NodeConfigArgs" if nested else f"{cls}Args")
    params = inspect.signature(args.__init__).parameters
    wanted = ("tags",) if package == "aws" else ("labels", "resource_labels")
    return next((p for p in wanted if p in params), None)


def test_the_taggable_types_are_the_sdk_types_with_tags_or_labels():
    """Every AWS type listed takes `tags` in pulumi_aws; every type the reference stacks create that takes
    tags (AWS) or labels (GCP) is listed, so none escapes the policy."""
    for t in tags.AWS_TAGGED | set(tags.GCP_LABELS):
        assert _sdk_tag_input(t) is not None, t
    planned_types = {r["type"] for s in STACKS for r in records(s) if r["type"].startswith(("aws:", "gcp:"))}
    untracked = {
        t
        for t in planned_types
        if _sdk_tag_input(t) and t not in tags.AWS_TAGGED and t not in tags.GCP_LABELS
    }
    assert untracked == set()


# ---- 2. no public buckets --------------------------------------------------------------------------


def test_a_public_access_block_turned_off_fails_no_public_buckets():
    recs = records("aws-dev")
    find(recs, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "checkpoints")["inputs"][
        "blockPublicPolicy"
    ] = False
    assert violations(recs, buckets.PUBLIC_NAME) == {
        buckets.PUBLIC_NAME: [
            "S3 public access block ml-dev-buckets-checkpoints-public-access leaves off blockPublicPolicy"
        ]
    }


def test_a_bucket_without_a_public_access_block_fails():
    recs = [
        r
        for r in records("aws-dev")
        if not (r["type"].endswith("BucketPublicAccessBlock") and "logs" in r["name"])
    ]
    assert violations(recs, buckets.PUBLIC_NAME) == {
        buckets.PUBLIC_NAME: ["S3 bucket ml-dev-buckets-logs-bucket has no public access block"]
    }


def test_a_gcs_bucket_open_to_all_users_fails():
    recs = records("gcp-dev")
    find(recs, "gcp:storage/bucket:Bucket", "checkpoints")["inputs"]["publicAccessPrevention"] = "inherited"
    member = find(recs, "gcp:storage/bucketIAMMember:BucketIAMMember")
    member["inputs"]["member"] = "allUsers"
    found = violations(recs, buckets.PUBLIC_NAME)[buckets.PUBLIC_NAME]
    assert found == [
        "GCS bucket ml-dev-buckets-checkpoints: publicAccessPrevention is not enforced",
        f"gcp:storage/bucketIAMMember:BucketIAMMember {member['name']} grants a bucket to allUsers",
    ]


def test_a_value_unknown_in_preview_skips_its_resource_not_the_whole_stack_policy():
    """A new service account's email is unknown during a preview: the IAM member naming it is skipped
    (pulumi-policy raises UnknownValueError on reading it), the other buckets are still checked."""
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    recs = records("gcp-dev")
    for r in recs:
        if r["type"] == "gcp:storage/bucketIAMMember:BucketIAMMember":
            r["inputs"]["member"] = UNKNOWN_STRING_VALUE
    find(recs, "gcp:storage/bucket:Bucket", "checkpoints")["inputs"]["publicAccessPrevention"] = "inherited"
    assert violations(recs, buckets.PUBLIC_NAME) == {
        buckets.PUBLIC_NAME: ["GCS bucket ml-dev-buckets-checkpoints: publicAccessPrevention is not enforced"]
    }


def test_a_bucket_policy_allowing_everyone_fails():
    recs = records("aws-dev")
    find(recs, "aws:s3/bucketPolicy:BucketPolicy", "logs")["inputs"]["policy"] = (
        '{"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "*"}]}'
    )
    assert violations(recs, buckets.PUBLIC_NAME) == {
        buckets.PUBLIC_NAME: [
            "S3 bucket policy ml-dev-buckets-logs-tls-only allows everyone without a condition"
        ]
    }


# ---- 3. encryption at rest -------------------------------------------------------------------------


def test_unencrypted_ebs_and_a_bucket_without_kms_fail_encryption():
    recs = records("aws-dev")
    lt = find(recs, "aws:ec2/launchTemplate:LaunchTemplate", "h100")
    lt["inputs"]["blockDeviceMappings"][0]["ebs"]["encrypted"] = "false"
    recs = [
        r
        for r in recs
        if not (r["type"].endswith("BucketServerSideEncryptionConfiguration") and "logs" in r["name"])
    ]
    assert sorted(violations(recs, encryption.NAME)[encryption.NAME]) == sorted(
        [
            "aws:s3/bucket:Bucket ml-dev-buckets-logs-bucket: no encryption configuration (allowed: aws:kms, "
            "aws:kms:dsse)",
            "aws:ec2/launchTemplate:LaunchTemplate ml-dev-h100-lt: EBS devices /dev/xvda not encrypted",
        ]
    )


def test_eks_without_secrets_encryption_fails_and_gke_only_where_application_layer_encryption_is_required():
    """GKE's default (databaseEncryption DECRYPTED once deployed: Secrets encrypted at rest with Google's
    keys) passes unless the config asks for application-layer encryption with a Cloud KMS key."""
    aws_recs = records("aws-dev")
    del find(aws_recs, "aws:eks/cluster:Cluster")["inputs"]["encryptionConfig"]
    gcp_recs = records("gcp-dev")
    found = violations(aws_recs + gcp_recs, encryption.NAME)[encryption.NAME]
    assert [m.split(":")[0] + ":" + m.split(":")[1].split()[0] for m in found] == ["aws:eks/cluster"]
    strict = {encryption.NAME: {"gkeApplicationLayerSecrets": True}}
    # Unset: unknown in the first preview, DECRYPTED once deployed (tests/unit/policy/trainplane_policies/test_policy_outputs.py).
    assert violations(gcp_recs, encryption.NAME, strict) == {
        encryption.NAME: [
            f"gcp:container/cluster:Cluster ml-dev-cluster-gke: databaseEncryption is {state} "
            "(application-layer secrets encryption required)"
            for state in ("not set", "DECRYPTED")
        ]
    }
    key = "projects/p/locations/us-central1/keyRings/gke/cryptoKeys/secrets"
    find(gcp_recs, "gcp:container/cluster:Cluster")["inputs"]["databaseEncryption"] = {
        "state": "ENCRYPTED",
        "keyName": key,
    }
    assert violations(gcp_recs, encryption.NAME, strict) == {}


def test_aes256_is_accepted_where_the_config_allows_it():
    recs = records("aws-dev")
    for r in recs:
        if r["type"].endswith("BucketServerSideEncryptionConfiguration"):
            r["inputs"]["rules"][0]["applyServerSideEncryptionByDefault"] = {"sseAlgorithm": "AES256"}
    assert len(violations(recs, encryption.NAME)[encryption.NAME]) == 2
    assert violations(recs, encryption.NAME, {encryption.NAME: {"s3Algorithms": ["AES256"]}}) == {}


# ---- 4. allowed GPU machine families and regions ----------------------------------------------------


def test_a_gpu_family_outside_the_list_fails_allowed_machines():
    recs = records("aws-dev")
    find(recs, "aws:eks/nodeGroup:NodeGroup", "h100")["inputs"]["instanceTypes"] = ["p3dn.24xlarge"]
    assert violations(recs, capacity.MACHINES_NAME) == {
        capacity.MACHINES_NAME: ["ml-dev-h100-ng: p3dn.24xlarge is of family p3dn, not allowed"]
    }


def test_the_allowed_families_are_configurable_and_cover_the_catalog():
    found = violations(
        records("gcp-dev"), capacity.MACHINES_NAME, {capacity.MACHINES_NAME: {"families": ["a4"]}}
    )
    assert found == {capacity.MACHINES_NAME: ["ml-dev-h100-pool: a3-highgpu-8g is of family a3, not allowed"]}
    default = capacity.MACHINES["families"]["default"]
    for cloud in ("aws", "gcp"):
        for m in catalog().machine_names(cloud):
            if catalog().machine(cloud, m).gpus:
                assert capacity.family(cloud, m) in default, m


def test_a_region_outside_the_list_fails_allowed_regions():
    aws_recs = records("aws-dev")  # aws:region us-east-1, from the default provider
    found = violations(aws_recs, capacity.REGIONS_NAME, {capacity.REGIONS_NAME: {"regions": ["eu-west-1"]}})
    assert (
        "aws:eks/cluster:Cluster ml-dev-cluster-eks is in us-east-1, not allowed"
        in found[capacity.REGIONS_NAME]
    )
    gcp_recs = records("gcp-dev")
    find(gcp_recs, "gcp:container/cluster:Cluster")["inputs"]["location"] = "asia-east1-a"
    found = violations(gcp_recs, capacity.REGIONS_NAME)[capacity.REGIONS_NAME]
    assert found == ["gcp:container/cluster:Cluster ml-dev-cluster-gke is in asia-east1, not allowed"]


# ---- 5. GPU cap per stack ---------------------------------------------------------------------------


def test_gpus_per_stack_are_max_nodes_times_gpus_per_node():
    """aws-dev: 4 p5.48xlarge (8 H100) = 32; a capacity block's group names its type only in its launch
    template (aws-h100-reserved); gcp-h100-dws: 4 + 16 + 4 a3-highgpu-8g nodes = 192."""
    for stack, cap, total in (
        ("aws-dev", 31, 32),
        ("aws-h100-reserved", 111, 112),
        ("gcp-h100-dws", 191, 192),
    ):
        found = violations(records(stack), capacity.CAP_NAME, {capacity.CAP_NAME: {"maxGpus": cap}})
        assert found[capacity.CAP_NAME][0].startswith(f"the stack scales to {total} GPUs ("), found
        assert violations(records(stack), capacity.CAP_NAME, {capacity.CAP_NAME: {"maxGpus": total}}) == {}


def test_a_node_group_above_the_default_cap_fails():
    recs = records("aws-dev")
    find(recs, "aws:eks/nodeGroup:NodeGroup", "h100")["inputs"]["scalingConfig"]["maxSize"] = 65
    assert violations(recs, capacity.CAP_NAME) == {
        capacity.CAP_NAME: ["the stack scales to 520 GPUs (ml-dev-h100-ng 520), above 512"]
    }


# ---- 6. spot by environment -------------------------------------------------------------------------


def test_on_demand_gpus_in_dev_fail_spot_by_environment():
    recs = records("aws-dev")
    find(recs, "aws:eks/nodeGroup:NodeGroup", "h100")["inputs"]["capacityType"] = "ON_DEMAND"
    with stack_named("aws-dev"):
        assert violations(recs, capacity.SPOT_NAME) == {
            capacity.SPOT_NAME: ["ml-dev-h100-ng: GPU capacity is not spot in environment dev (spot-only)"]
        }
    with stack_named("aws-prod"):  # another environment: any capacity
        assert violations(recs, capacity.SPOT_NAME) == {}


def test_no_spot_environments_and_the_stack_tag():
    recs = records("gcp-dev")  # its H100 pool is spot
    for r in recs:
        r["stack_tags"] = {"environment": "prod"}
    config = {capacity.SPOT_NAME: {"environments": {"prod": "no-spot"}}}
    with stack_named("gcp-dev"):  # the tag wins over the name
        assert violations(recs, capacity.SPOT_NAME, config) == {
            capacity.SPOT_NAME: ["ml-dev-h100-pool: GPU capacity is spot in environment prod (no-spot)"]
        }


# ---- 7. checkpoint buckets protected ----------------------------------------------------------------


def test_a_checkpoint_bucket_without_versioning_fails_unless_protected():
    recs = [
        r
        for r in records("aws-dev")
        if not (r["type"].endswith("BucketVersioning") and "checkpoints" in r["name"])
    ]
    assert violations(recs, buckets.PROTECTED_NAME) == {
        buckets.PROTECTED_NAME: [
            "checkpoint bucket ml-dev-buckets-checkpoints-bucket: no versioning Enabled "
            "(aws:s3/bucketVersioning) and not protected"
        ]
    }
    find(recs, "aws:s3/bucket:Bucket", "checkpoints")["protect"] = True
    assert violations(recs, buckets.PROTECTED_NAME) == {}


def test_a_gcs_checkpoint_bucket_force_destroyed_or_unversioned_fails():
    recs = records("gcp-dev")
    bucket = find(recs, "gcp:storage/bucket:Bucket", "checkpoints")
    bucket["inputs"]["versioning"] = {"enabled": False}
    assert violations(recs, buckets.PROTECTED_NAME) == {
        buckets.PROTECTED_NAME: [
            "checkpoint bucket ml-dev-buckets-checkpoints: neither versioning nor a retention policy, and not protected"
        ]
    }
    bucket["inputs"]["versioning"] = {"enabled": True}
    bucket["inputs"]["forceDestroy"] = True
    assert violations(recs, buckets.PROTECTED_NAME)[buckets.PROTECTED_NAME] == [
        "checkpoint bucket ml-dev-buckets-checkpoints: forceDestroy is on: a destroy deletes every checkpoint in it"
    ]


def test_the_pack_files_name_the_pack_and_pin_pulumi_policy():
    import tomllib

    import yaml

    pack = ROOT / "policy"
    project = yaml.safe_load((pack / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    # The CLI takes a Python pack's version from here (pulumi sdk/go/common/workspace/project.go
    # PolicyPackProject: runtime, version, main, description, author, website, license), else "0.0.1".
    assert set(project) <= {"runtime", "version", "main", "description", "author", "website", "license"}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert project["version"] == version
    assert f"trainplane=={version}" in (pack / "requirements.txt").read_text().split("\n")
    assert "pulumi-policy==1.21.0" in (pack / "requirements.txt").read_text().split("\n")
    assert "pulumi-policy==1.21.0" in (ROOT / "pyproject.toml").read_text()
    assert "PACK_NAME" in (pack / "__main__.py").read_text()


def test_the_offline_engine_records_protect_and_property_dependencies():
    """What the stack policies link and trust: `protect` and the resource an input was computed from."""
    import pulumi
    import pulumi_aws as aws

    from infra.mockcloud import run_function

    def build() -> None:
        bucket = aws.s3.Bucket("b", opts=pulumi.ResourceOptions(protect=True))
        aws.s3.BucketVersioning("v", bucket=bucket.id, versioning_configuration={"status": "Enabled"})

    result, _ = run_function(build)
    bucket, versioning = result.named("b"), result.named("v")
    assert bucket.protect and not versioning.protect
    assert versioning.property_deps["bucket"] == (bucket.urn,)


def test_the_offline_check_prints_violations_and_exits_1_and_2_on_bad_input(tmp_path, capsys):
    from policy.trainplane_policies.__main__ import main

    config = tmp_path / "guardrails.json"
    # Regions would fail (us-east-1 is not listed) but the policy is disabled.
    config.write_text(
        '{"trainplane-gpu-cap": {"maxGpus": 8}, '
        '"trainplane-allowed-regions": {"regions": ["eu-west-1"], "enforcementLevel": "disabled"}}'
    )
    assert main(["check", "aws-dev", "--config", str(config)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "trainplane-gpu-cap: the stack scales to 32 GPUs (ml-dev-h100-ng 32), above 8",
        "aws-dev: 1 violation(s) of 8 policies",
    ]
    config.write_text("[1]")
    assert main(["check", "aws-dev", "--config", str(config)]) == 2
    assert capsys.readouterr().err.strip().endswith("not a JSON object of policy names")
    assert main(["check", "no-such-stack"]) == 2
    assert "no such stack file" in capsys.readouterr().err


def test_a_gpu_platform_template_stack_with_a_cost_center_passes_the_pack(tmp_path):
    """`pulumi new gpu-platform` asks for the cost center; the first team owns the shared resources."""
    from infra.mockcloud import run_program
    from tests.helpers.templates import instantiate

    config = instantiate("gpu-platform", tmp_path, {"trainplane:costCenter": "ml-research"})
    result = run_program(config, "dev", program=tmp_path / "__main__.py")
    with stack_named("dev"):
        assert violations(records_of(result, config)) == {}
    config = instantiate("gpu-platform", tmp_path / "none")
    result = run_program(config, "dev", program=tmp_path / "none" / "__main__.py")
    assert "lack cost-center" in violations(records_of(result, config), tags.NAME)[tags.NAME][0]
