"""The pack's stack policies on OUTPUTS, as the engine hands them (issue 30 point 11).

The engine runs AnalyzeStack on each resource's outputs (pulumi v3.259.0 pkg/resource/deploy/
step_generator.go AnalyzeResources: `Properties: v.Outputs`), in a preview too (deployment_executor.go), where
the outputs are the provider's planned state: what the program set is known, a computed output it left unset
is unknown (a sentinel string, pulumi sdk/go/common/resource/plugin/rpc.go). After a first deploy they hold
what the cloud answered. The offline runner (policy/trainplane_policies/offline.py) builds both phases from
the offline engine's computed outputs per type (components/<cloud>/mock.py); the gRPC server is exercised the
same way in tests/integration/policy/trainplane_policies/test_policy_pack_server.py.
"""

from __future__ import annotations

import pytest
from pulumi_policy import StackValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from policy.trainplane_policies import POLICIES, buckets, capacity, encryption
from policy.trainplane_policies.offline import outputs
from tests.helpers.plans import stack_files
from tests.helpers.policy import find, records, stack_args, stack_named, violations

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

STACKS = [p.name[len("Pulumi.") : -len(".yaml")] for p in stack_files()]
STACK_POLICIES = [p for p in POLICIES if isinstance(p, StackValidationPolicy)]


@pytest.mark.parametrize("stack", STACKS)
def test_no_unknown_of_a_first_preview_stops_a_stack_policy(stack):
    """In the preview of a first deploy every computed output the program left unset is unknown; no stack
    policy may need one to decide (the engine would report it as not run, advisory, and a GPU cap or a
    public bucket would pass the one preview that comes before the resources exist)."""
    recs = records(stack)
    with stack_named(stack):
        for policy in STACK_POLICIES:
            policy.validate(stack_args(recs, None, "preview"), lambda message, urn=None: None)


def test_a_deployed_gke_cluster_reports_decrypted_and_passes_by_default():
    """GKE answers databaseEncryption {state: DECRYPTED, keyName: ""} for a cluster that set none
    (terraform-provider-google v7.45.0 resource_container_cluster.go: Optional+Computed, flattened from the
    API); the reference GKE stacks set none, so a pack failing DECRYPTED would block each of their
    previews after the first. Unknown in the first preview."""
    recs = records("gcp-dev")
    cluster = find(recs, "gcp:container/cluster:Cluster")
    assert "databaseEncryption" not in cluster["inputs"]
    assert outputs(cluster, "deployed")["databaseEncryption"] == {"state": "DECRYPTED", "keyName": ""}
    assert outputs(cluster, "preview")["databaseEncryption"] == UNKNOWN_STRING_VALUE
    assert violations(recs, encryption.NAME, phases=("deployed",)) == {}
    # Where the config requires application-layer encryption, the unset block fails the first preview
    # already (unknown as a whole: the program did not set it), before the cluster exists.
    strict = {encryption.NAME: {"gkeApplicationLayerSecrets": True}}
    assert violations(recs, encryption.NAME, strict, phases=("preview",)) == {
        encryption.NAME: [
            "gcp:container/cluster:Cluster ml-dev-cluster-gke: databaseEncryption is not set "
            "(application-layer secrets encryption required)"
        ]
    }


def test_a_bucket_without_a_public_access_block_fails_its_first_preview():
    """A new S3 bucket's `acl` is unknown in its first preview (pulumi-aws 7.51 s3.Bucket: Optional+Computed,
    unset by the program): the ACL check waits, the missing public access block is reported now."""
    recs = [
        r
        for r in records("aws-dev")
        if not (r["type"].endswith("BucketPublicAccessBlock") and "logs" in r["name"])
    ]
    bucket = find(recs, "aws:s3/bucket:Bucket", "logs")
    assert outputs(bucket, "preview")["acl"] == UNKNOWN_STRING_VALUE
    assert violations(recs, buckets.PUBLIC_NAME, phases=("preview",)) == {
        buckets.PUBLIC_NAME: ["S3 bucket ml-dev-buckets-logs-bucket has no public access block"]
    }


def test_a_public_acl_the_program_sets_is_known_in_preview():
    recs = records("aws-dev")
    find(recs, "aws:s3/bucket:Bucket", "logs")["inputs"]["acl"] = "public-read"
    assert violations(recs, buckets.PUBLIC_NAME, phases=("preview",)) == {
        buckets.PUBLIC_NAME: [
            "aws:s3/bucket:Bucket ml-dev-buckets-logs-bucket has the public ACL public-read"
        ]
    }


@pytest.mark.parametrize("phase", ["preview", "deployed"])
def test_the_gpu_cap_counts_new_pools_and_groups_in_both_phases(phase):
    """gcp-h100-dws: new pools' `nodeCount` is unknown in the first preview, counted from the autoscaling
    limits; aws-h100-reserved: a capacity-block group names its type only in its launch template, its own
    `instanceTypes` output is unknown, then empty (EKS reports none)."""
    for stack, total in (("gcp-h100-dws", 192), ("aws-h100-reserved", 112)):
        config = {capacity.CAP_NAME: {"maxGpus": total - 1}}
        found = violations(records(stack), capacity.CAP_NAME, config, phases=(phase,))
        assert found[capacity.CAP_NAME][0].startswith(f"the stack scales to {total} GPUs ("), (stack, found)
