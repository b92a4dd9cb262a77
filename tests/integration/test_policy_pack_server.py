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
from tests.helpers.plans import ROOT


@pytest.fixture(scope="module")
def analyzer():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
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
        proc.terminate()
        proc.wait(timeout=30)


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
