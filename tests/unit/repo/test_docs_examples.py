"""The example programs of docs/components.md plan under the mock engine: a platform built from the
components with one component added on its own, and a job program that reads its typed outputs."""

from __future__ import annotations

from functools import cache

import pytest

from infra.mockcloud import RunResult, run_program
from tests.helpers.plans import ROOT

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

EXAMPLES = ROOT / "docs" / "examples"


@cache
def own_platform() -> RunResult:
    return run_program({}, "lab", program=EXAMPLES / "own_platform" / "__main__.py")


def test_own_platform_program_plans_the_platform_and_a_component_of_its_own():
    result = own_platform()
    assert [r.name for r in result.of_type("trainplane:index:GpuPlatform")] == ["lab"]
    teams = sorted(r.name for r in result.of_type("trainplane:kubernetes:TeamTenancy"))
    assert teams == ["lab-sandbox", "lab-team-research"]
    # The sandbox's objects use the platform's cluster, not the ambient kubeconfig.
    (provider,) = result.of_type("pulumi:providers:kubernetes")
    ns = next(r for r in result.of_type("kubernetes:core/v1:Namespace") if r.name == "lab-sandbox-ns")
    assert ns.provider and ns.provider.startswith(provider.urn)
    assert result.outputs["sandboxNamespace"] == "sandbox"
    assert result.outputs["cloud"] == "kubernetes" and result.outputs["preemptionGraceSeconds"] == 300


def test_own_job_program_reads_the_platforms_typed_outputs():
    result = run_program(
        {},
        "job",
        stack_refs={"organization/lab-platform/lab": own_platform().outputs},
        program=EXAMPLES / "own_job" / "__main__.py",
    )
    assert result.outputs == {"job": "tiny", "nodeVcpus": None, "grace": 300}
    (job,) = result.of_type("kubernetes:batch/v1:Job")
    assert job.inputs["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    # The lab platform is on the ambient kubeconfig (context lab-admin): its `kubeconfig` output is no
    # kubeconfig, so the job's provider takes the ambient file with that context.
    (provider,) = result.of_type("pulumi:providers:kubernetes")
    assert provider.inputs.get("context") == "lab-admin" and "kubeconfig" not in provider.inputs
