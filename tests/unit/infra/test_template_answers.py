"""The answers of the `pulumi new` templates are checked like stack keys (issue 31 point 4): one declared table
per template (components/answers.py) that matches its Pulumi.yaml; unknown keys, booleans, counts and
choices are one-line errors naming the answer key, before the object is built; the built object's problems
are told under the answer key, in words. Before, `spot: 'ture'` gave on-demand capacity, a mistyped key was
ignored and errors named `platform.cluster.name` with regexes."""

from __future__ import annotations

import json

import pulumi
import pytest
import yaml

from components.answers import GPU_PLATFORM, TEMPLATES, TRAINING_JOB
from components.backends import backend_names
from components.quickstart import (
    job_from_answers,
    job_from_prompts,
    platform_from_answers,
    platform_from_prompts,
)
from components.spec import ConfigError
from infra import stackfile
from infra.mockcloud import run_program
from tests.helpers.templates import TEMPLATES as TEMPLATE_DIR
from tests.helpers.templates import instantiate

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _error(name, tmp_path, answers=None, extra=None, stack_refs=None) -> str:
    """The message the template program stops with, for a stack of `answers` plus `extra` keys."""
    config = {**instantiate(name, tmp_path, answers), **(extra or {})}
    with pytest.raises(pulumi.RunError) as e:
        run_program(config, "dev", stack_refs=stack_refs, program=tmp_path / "__main__.py")
    return str(e.value)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_table_is_its_templates_prompts_with_their_defaults(name):
    prompts = yaml.safe_load((TEMPLATE_DIR / name / "Pulumi.yaml").read_text())["template"]["config"]
    table = TEMPLATES[name]
    assert {a.key: a.default_text() for a in table.answers if a.asked} == {
        key: str(p.get("default", "")) for key, p in prompts.items()
    }


def test_every_answer_the_builders_read_is_in_the_table():
    """What each cloud's quickstart asks for (region, project, context...) is declared, so no answer a
    built-in cloud reads is reported as unknown."""
    read: set[str] = set()
    for cloud in backend_names():
        platform_from_prompts(lambda key, cloud=cloud: read.add(key) or (cloud if key == "cloud" else None))
    assert read <= {a.name for a in GPU_PLATFORM.answers}
    read.clear()
    job_from_prompts(
        lambda key: read.add(key) or ("1:2" if key == "nodes" else "s3://x" if "Uri" in key else None)
    )
    assert read == {a.name for a in TRAINING_JOB.answers}


@pytest.mark.parametrize("name", ["gpu-platform", "training-job"])
def test_a_boolean_is_true_or_false(tmp_path, name):
    message = _error(name, tmp_path, {"trainplane:spot": "ture"})
    assert message.splitlines()[1:] == ["trainplane:spot: 'ture' is not true or false"]


@pytest.mark.parametrize(("answer", "capacity"), [("TRUE", "spot"), ("False", "on-demand")])
def test_true_and_false_in_any_case(answer, capacity):
    config = {"trainplane:cloud": "aws", "trainplane:spot": answer}
    (_, gpu) = platform_from_answers(config)["nodePools"]
    assert gpu["capacity"] == capacity


def test_an_unknown_key_names_the_nearest_known_one(tmp_path):
    message = _error("gpu-platform", tmp_path, extra={"trainplane:maxGPUNodes": "4"})
    assert message.splitlines()[1:] == [
        "unknown key trainplane:maxGPUNodes; did you mean trainplane:maxGpuNodes?"
    ]


def test_keys_of_other_namespaces_and_the_programs_own_are_not_answers():
    config = {"trainplane:cloud": "aws", "trainplane:kubeconfig": "x", "aws:region": "us-east-1"}
    assert platform_from_answers(config)["cloud"] == "aws"
    with pytest.raises(ConfigError) as e:
        job_from_answers({"trainplane:platformStack": "a/b/c", "trainplane:kubeconfig": "x"})
    assert e.value.problems == ["unknown key trainplane:kubeconfig"]


def test_unknown_keys_are_found_in_the_config_the_cli_passes_in_the_environment(monkeypatch):
    """Under `pulumi up` the language host hands the config over as PULUMI_CONFIG (read by
    pulumi/runtime/config.py get_config_env, v3.272.0); the keys are listed from there too."""
    from infra.program import stack_config

    pulumi.runtime.set_all_config({})
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"trainplane:cloud": "aws", "trainplane:sopt": "true"}))
    with pytest.raises(ConfigError) as e:
        platform_from_answers(stack_config())
    assert e.value.problems == ["unknown key trainplane:sopt; did you mean trainplane:spot?"]


def test_a_gpu_that_is_not_known_gets_a_did_you_mean(tmp_path):
    (line,) = _error("gpu-platform", tmp_path, {"trainplane:gpu": "h100x"}).splitlines()[1:]
    assert line.startswith("trainplane:gpu: 'h100x' is not a known GPU; did you mean H100? (known: A10G, ")


def test_a_cloud_that_is_not_known_lists_the_clouds():
    with pytest.raises(ConfigError) as e:
        platform_from_answers({"trainplane:cloud": "gpc"})
    clouds = ", ".join(backend_names())
    assert e.value.problems == [
        f"trainplane:cloud: 'gpc' is not a cloud trainplane has; did you mean gcp? (known: {clouds})"
    ]


def test_a_count_must_be_a_whole_number_in_range(tmp_path):
    message = _error(
        "gpu-platform", tmp_path, {"trainplane:gpusPerNode": "eight", "trainplane:maxGpuNodes": "0"}
    )
    assert message.splitlines()[1:] == [
        "trainplane:gpusPerNode: 'eight' is not a whole number; expected 1 or more, a count the GPU comes in",
        "trainplane:maxGpuNodes: 0 is less than 1; expected 1 or more",
    ]


@pytest.mark.parametrize(
    ("nodes", "problem"),
    [
        ("two", "'two' is not a node count"),
        ("3:1", "'3:1' has its minimum above its maximum"),
        ("0:2", "'0:2' has a count less than 1"),
    ],
)
def test_nodes_is_a_count_or_a_range(nodes, problem):
    with pytest.raises(ConfigError) as e:
        job_from_answers({"trainplane:platformStack": "a/b/c", "trainplane:nodes": nodes})
    (line,) = e.value.problems
    assert line.startswith(f"trainplane:nodes: {problem}")


def test_the_built_objects_problems_name_the_answer_key_in_words(tmp_path):
    message = _error(
        "gpu-platform", tmp_path, {"trainplane:clusterName": "ML_dev", "trainplane:costCenter": "R&D"}
    )
    assert message.splitlines()[1:] == [
        "trainplane:clusterName: 'ML_dev' is not valid here; expected a lowercase DNS label (a-z, 0-9 and '-', "
        "starting with a letter)",
        "trainplane:costCenter: 'R&D' is not valid here; expected lowercase letters, digits, '-' and '_' (at most "
        "63, starting and ending with a letter or digit)",
    ]


def test_a_rule_on_the_gpu_pool_names_the_answer(tmp_path):
    message = _error("gpu-platform", tmp_path, {"trainplane:gpusPerNode": "3"})
    assert message.splitlines()[1:] == [
        "trainplane:gpusPerNode: H100 does not come in 3 per node on aws; allowed: 1, 8"
    ]


def test_a_job_checked_against_its_platform_names_the_answer_key(tmp_path):
    platform_dir, job_dir = tmp_path / "gpu-platform", tmp_path / "training-job"
    platform = run_program(
        instantiate("gpu-platform", platform_dir), "dev", program=platform_dir / "__main__.py"
    )
    refs = {"organization/gpu-platform/dev": platform.outputs}
    message = _error("training-job", job_dir, {"trainplane:team": "research"}, stack_refs=refs)
    assert message.splitlines()[1].startswith("trainplane:team: 'research' is not a team")


def test_correct_answers_build_the_object_they_built_before():
    config = {a.key: a.default_text() for a in GPU_PLATFORM.answers if a.asked and a.default_text()}
    built = platform_from_answers(config)
    assert built == platform_from_prompts(lambda key: config.get(f"trainplane:{key}"))
    built["cluster"].pop("kubernetesVersion")  # its default is another change's
    assert built == {
        "cloud": "aws",
        "cluster": {"name": "ml-dev"},
        "observability": {"grafana": True, "loki": True},
        "region": "us-east-1",
        "nodePools": [
            {"name": "system", "instanceType": "m6i.xlarge", "minNodes": 2, "maxNodes": 3},
            {
                "name": "gpu",
                "gpu": "H100",
                "gpusPerNode": 8,
                "minNodes": 0,
                "maxNodes": 2,
                "capacity": "spot",
            },
        ],
        "teams": [{"name": "ml", "gpuQuota": 16}],
        "team": "ml",
    }
    job = {a.key: a.default_text() for a in TRAINING_JOB.answers if a.asked and a.default_text()}
    assert job_from_answers({**job, "trainplane:nodes": "1:2"}) == {
        "platformStack": "organization/gpu-platform/dev",
        "name": "gpt-small",
        "team": "ml",
        "image": "ghcr.io/example/trainplane-trainer:0.1.0",
        "nodePool": "gpu",
        "nodes": {"min": 1, "max": 2},
        "gpusPerNode": 8,
        "trainer": {"model": "gpt-small", "globalBatchSize": 512, "microBatchSize": 8, "steps": 20000},
        "spot": True,
        "checkpoint": {"uri": "s3://auto", "intervalSteps": 500},
    }


def test_trainplane_plan_reports_the_same_lines_with_the_stack_file(tmp_path):
    """The CLI reads a template's stack through infra/stackfile.py: the same check, each line naming the file."""
    instantiate("gpu-platform", tmp_path, {"trainplane:spot": "ture"})
    path = tmp_path / "Pulumi.dev.yaml"
    with pytest.raises(stackfile.StackFileError) as e:
        stackfile.load(path)
    assert str(e.value) == f"{path}: trainplane:spot: 'ture' is not true or false"


def test_the_configuration_docs_name_every_answer_key():
    from tests.helpers.plans import ROOT

    section = (ROOT / "docs" / "configuration.md").read_text().split("## Template answers", 1)[1]
    for template in TEMPLATES.values():
        row = next(line for line in section.splitlines() if line.startswith(f"| {template.name} |"))
        asked, read = row.split(" | ")[1:3]
        assert asked.replace("`", "").split(", ") == [a.name for a in template.answers if a.asked]
        unasked = [a.name for a in template.answers if not a.asked] + [
            k for k in template.program_keys if k != template.root
        ]
        assert all(f"`{k}`" in read for k in unasked)
