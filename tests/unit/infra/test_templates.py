"""`pulumi new` templates: instantiate each into a temp dir as the CLI would and plan it under mocks."""

from __future__ import annotations

import pulumi
import pytest
import yaml

from infra.mockcloud import run_program
from tests.helpers.jobs import JOBSET
from tests.helpers.templates import instantiate

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


@pytest.mark.parametrize(
    ("answers", "cluster_type"),
    [
        ({}, "aws:eks/cluster:Cluster"),
        # No region answer: the template has no region default (none could follow the cloud answer),
        # so the program picks the cloud's own.
        ({"trainplane:cloud": "gcp", "trainplane:project": "my-ml-project"}, "gcp:container/cluster:Cluster"),
        ({"trainplane:cloud": "kubernetes", "trainplane:gpu": "A100-80GB"}, "pulumi:providers:kubernetes"),
    ],
    ids=["aws", "gcp", "kubernetes"],
)
def test_gpu_platform_template_plans(tmp_path, answers, cluster_type):
    config = instantiate("gpu-platform", tmp_path, answers)
    result = run_program(config, "dev", program=tmp_path / "__main__.py")
    assert result.of_type(cluster_type)
    assert result.outputs["clusterName"] == "ml-dev"
    (gpu,) = [p for p in result.outputs["nodePools"] if p["gpu"]]
    assert gpu["gpusPerNode"] == 8 and gpu["maxNodes"] == 2
    assert result.outputs["teams"][0]["gpuQuota"] == 16
    region = {"aws": "us-east-1", "gcp": "us-central1"}.get(answers.get("trainplane:cloud", "aws"))
    assert result.outputs.get("region") == region


def test_gpu_platform_template_reports_bad_answers_as_config_errors(tmp_path):
    config = instantiate("gpu-platform", tmp_path, {"trainplane:gpusPerNode": "3"})
    with pytest.raises(pulumi.RunError, match=r"trainplane:gpusPerNode: H100 does not come in 3"):
        run_program(config, "dev", program=tmp_path / "__main__.py")


def test_training_job_template_defaults_run_on_the_platform_template_defaults(tmp_path):
    """The job template's team, pool, node count, GPUs and platformStack are what the platform template
    makes: the job validates against those outputs (it failed with "job.team: 'research' is not a team",
    "job.nodePool: 'h100' is not a node pool", "4 nodes is more than pool gpu can scale to (2)")."""
    platform_dir, job_dir = tmp_path / "gpu-platform", tmp_path / "training-job"
    platform = run_program(
        instantiate("gpu-platform", platform_dir), "dev", program=platform_dir / "__main__.py"
    )
    config = instantiate("training-job", job_dir)
    ref = config["trainplane:platformStack"]
    assert ref == "organization/gpu-platform/dev"
    result = run_program(config, "dev", stack_refs={ref: platform.outputs}, program=job_dir / "__main__.py")
    (jobset,) = result.of_type(JOBSET)
    assert jobset.inputs["metadata"]["namespace"] == platform.outputs["teams"][0]["name"] == "ml"
    (workers,) = jobset.inputs["spec"]["replicatedJobs"]
    assert workers["template"]["spec"]["parallelism"] == 2
    assert result.outputs["checkpointUri"].startswith("s3://ml-dev-ckpt-")


def test_a_template_stack_that_holds_the_full_object_plans_from_the_object(tmp_path):
    """The template programs prefer `trainplane:platform` when it is set; so does `trainplane plan`."""
    from infra import stackfile

    config = instantiate("gpu-platform", tmp_path / "gpu-platform")
    derived = stackfile.load(tmp_path / "gpu-platform" / "Pulumi.dev.yaml").object("trainplane:platform")
    assert isinstance(derived, dict) and derived["cluster"]["name"] == "ml-dev"
    full = {**derived, "cluster": {**derived["cluster"], "name": "by-hand"}}
    doc = {"config": {**config, "trainplane:platform": full}}
    (tmp_path / "gpu-platform" / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    loaded = stackfile.load(tmp_path / "gpu-platform" / "Pulumi.dev.yaml").object("trainplane:platform")
    assert loaded == full


def test_stack_files_are_found_where_pulumi_keeps_them(tmp_path):
    """`stackConfigDir` of Pulumi.yaml, else next to it (Pulumi's default); an org/project/stack name in the
    project of that name, here or beside it (pulumi v3.259.0 sdk/go/common/workspace/project.go
    StackConfigDir). Only stacks/ was looked at before."""
    from infra import stackfile

    here, there = tmp_path / "jobs", tmp_path / "platform-dir"
    here.mkdir()
    there.mkdir()
    (here / "Pulumi.yaml").write_text("name: jobs\nruntime: python\nstackConfigDir: envs\n")
    (there / "Pulumi.yaml").write_text("name: platform\nruntime: python\n")
    assert stackfile.resolve("dev", here) == here / "envs" / "Pulumi.dev.yaml"
    assert stackfile.resolve("organization/jobs/dev", here) == here / "envs" / "Pulumi.dev.yaml"
    assert stackfile.resolve("organization/platform/prod", here) == there / "Pulumi.prod.yaml"
    assert stackfile.resolve("acme/platform/prod", here) == there / "Pulumi.prod.yaml"
