"""The pack as the engine runs it: the CLI's pulumi-analyzer-policy-python starts
`python -u -m pulumi.policy ENGINE PACK_DIR` in the pack's virtualenv (pulumi/pulumi
sdk/python/dist/pulumi-analyzer-policy-python), which runs PACK_DIR/__main__.py (pulumi 3.272.0
pulumi/policy/__main__.py: runpy.run_path); PolicyPack then serves the Analyzer gRPC service on the port it
prints (pulumi-policy v1.21.0 policy.py). The tests call GetAnalyzerInfo and Analyze as `pulumi preview
--policy-pack policy/` does (pulumi/analyzer.proto: AnalyzeRequest type, properties, urn, name)."""

from __future__ import annotations

import os
import subprocess
import sys

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from policy.trainplane_policies import PACK_NAME, POLICIES
from tests.helpers import procs
from tests.helpers.plans import ROOT


@pytest.fixture(scope="module")
def analyzer():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = procs.spawn(
        # The engine address is the analyzer's to use; the pack only serves.
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", str(ROOT / "policy")],
        cwd=ROOT / "policy",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        port = proc.stdout.readline().strip()
        assert port.isdigit(), proc.stderr.read() if proc.poll() is not None else port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        procs.stop(proc, 30)


def test_the_pack_serves_its_eight_policies_with_their_config_schemas(analyzer):
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == PACK_NAME
    assert [p.name for p in info.policies] == [p.name for p in POLICIES]
    assert all(p.enforcementLevel == analyzer_pb2.MANDATORY for p in info.policies)
    tags = next(p for p in info.policies if p.name == "trainplane-required-tags")
    assert list(tags.configSchema.properties["tagKeys"]["default"]) == ["team", "cost-center"]


def test_analyze_reports_a_bucket_without_a_cost_center_by_the_policy_name(analyzer):
    props = struct_pb2.Struct()
    props.update({"bucketPrefix": "ml-dev-ckpt-", "tags": {"team": "ml-platform"}})
    urn = "urn:pulumi:aws-dev::trainplane::trainplane:aws:PrivateBucket$aws:s3/bucket:Bucket::ckpt"
    response = analyzer.Analyze(
        analyzer_pb2.AnalyzeRequest(type="aws:s3/bucket:Bucket", properties=props, urn=urn, name="ckpt")
    )
    assert [(d.policyName, d.enforcementLevel) for d in response.diagnostics] == [
        ("trainplane-required-tags", analyzer_pb2.MANDATORY)
    ]
    assert "tags lack cost-center" in response.diagnostics[0].message
    props.update({"tags": {"team": "ml-platform", "cost-center": "ml-research"}})
    clean = analyzer.Analyze(
        analyzer_pb2.AnalyzeRequest(type="aws:s3/bucket:Bucket", properties=props, urn=urn, name="ckpt")
    )
    assert list(clean.diagnostics) == []


# ---- AnalyzeStack: stack policies on OUTPUTS, as the engine sends them ------------------------------
# The engine builds each resource of AnalyzeStack from its state's Outputs (pulumi v3.259.0
# pkg/resource/deploy/step_generator.go AnalyzeResources: "AnalyzeStack is called on the final outputs of
# each resource") and runs it in a preview too (deployment_executor.go: whenever the steps succeeded), where
# a computed output the program left unset is unknown: the analyzer client marshals it with KeepUnknowns
# as a sentinel string (sdk/go/common/resource/plugin/analyzer_plugin.go AnalyzeStack, rpc.go).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # plugin.UnknownStringValue


def _resource(type_: str, name: str, props: dict, deps: dict | None = None) -> analyzer_pb2.AnalyzerResource:
    struct = struct_pb2.Struct()
    struct.update(props)
    urn = f"urn:pulumi:gcp-dev::trainplane::{type_}::{name}"
    return analyzer_pb2.AnalyzerResource(
        type=type_,
        properties=struct,
        urn=urn,
        name=name,
        propertyDependencies={
            k: analyzer_pb2.AnalyzerPropertyDependencies(urns=v) for k, v in (deps or {}).items()
        },
    )


def _stack(analyzer, *resources: analyzer_pb2.AnalyzerResource) -> list[tuple[str, str, int]]:
    """(policy, message, level) per diagnostic; the pack puts the policy's description first in each
    message (pulumi-policy policy.py _create_report_violation), the finding is its last line."""
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=list(resources)))
    return [(d.policyName, d.message.split("\n")[-1], d.enforcementLevel) for d in response.diagnostics]


GKE = "gcp:container/cluster:Cluster"
GKE_OUTPUTS = {
    "name": "ml-dev",
    "location": "us-central1",
    "resourceLabels": {"team": "ml-platform", "cost-center": "ml-research"},
    "endpoint": "203.0.113.10",
}


def test_analyze_stack_passes_a_deployed_gke_cluster_that_set_no_database_encryption(analyzer):
    """After a first deploy GKE reports databaseEncryption {state: DECRYPTED, keyName: ""} on a cluster that
    set none (terraform-provider-google v7.45.0: Optional+Computed, copied from the API): GKE's default, its
    Secrets still encrypted at rest by Google; failing it would block every later preview of the stack."""
    deployed = {**GKE_OUTPUTS, "databaseEncryption": {"state": "DECRYPTED", "keyName": ""}}
    assert _stack(analyzer, _resource(GKE, "ml-dev-cluster-gke", deployed)) == []
    # The first preview: the value is unknown until GKE answers.
    preview = {**GKE_OUTPUTS, "databaseEncryption": UNKNOWN, "endpoint": UNKNOWN}
    assert _stack(analyzer, _resource(GKE, "ml-dev-cluster-gke", preview)) == []


def test_analyze_stack_reports_a_bucket_without_access_block_while_its_acl_is_unknown(analyzer):
    """A new S3 bucket's `acl` output is unknown in a preview (Optional+Computed in pulumi-aws 7.51
    s3.Bucket, unset by the program): it skips the ACL check, not the bucket's other checks."""
    bucket = {
        "bucketPrefix": "ml-dev-logs-",
        "acl": UNKNOWN,
        "arn": UNKNOWN,
        "bucket": UNKNOWN,
        "id": UNKNOWN,
    }
    found = _stack(analyzer, _resource("aws:s3/bucket:Bucket", "ml-dev-logs-bucket", bucket))
    assert (
        "trainplane-no-public-buckets",
        "S3 bucket ml-dev-logs-bucket has no public access block",
        analyzer_pb2.MANDATORY,
    ) in found


def test_analyze_stack_counts_a_new_gke_pool_whose_node_count_is_unknown(analyzer):
    """A new GKE node pool's `nodeCount` is unknown in its first preview (Optional+Computed); the GPU cap
    counts it from its autoscaling limit, known from the program, instead of not running at all."""
    pool = {
        "name": "ml-dev-h100-pool",
        "location": "us-central1",
        "nodeLocations": ["us-central1-a", "us-central1-b"],
        "nodeCount": UNKNOWN,
        "initialNodeCount": 0,
        "autoscaling": {"totalMaxNodeCount": 65, "totalMinNodeCount": 0, "locationPolicy": "ANY"},
        "nodeConfig": {"machineType": "a3-highgpu-8g", "guestAccelerators": UNKNOWN},
    }
    found = _stack(analyzer, _resource("gcp:container/nodePool:NodePool", "ml-dev-h100-pool", pool))
    assert found == [
        (
            "trainplane-gpu-cap",
            "the stack scales to 520 GPUs (ml-dev-h100-pool 520), above 512",
            analyzer_pb2.MANDATORY,
        )
    ]
