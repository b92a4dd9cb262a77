"""Build a full stack object from the few answers `pulumi new` asks for (stacks/templates/).

A template's stack starts with flat keys (`trainplane:cloud`, `trainplane:gpu`, ...). Once a team needs
more, it replaces them with the full `trainplane:platform` / `trainplane:job` object (docs/configuration.md);
the template programs prefer that object when it is there. What a first platform needs on each cloud
(a system pool, a region, a project...) comes from its backend (`CloudBackend.quickstart`).

`platform_from_answers` / `job_from_answers` check the answers first (components/answers.py: unknown keys,
true/false, counts, choices) and tell what the built object's validation finds under the answer keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from components.answers import GPU_PLATFORM, TRAINING_JOB, Template, answer_values
from components.backends import Prompt, backend, backend_names
from components.k8s_support import default_minor
from components.spec import ConfigError, JobSpec, PlatformSpec

Get = Prompt  # the answer to a template question, None when not answered


def prompt_bool(text: str | None, default: bool) -> bool:
    """A yes/no answer of a template prompt: true or false in any case (checked before, `Answer.problem`)."""
    if text in (None, ""):
        return default
    value = str(text).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return value == "true"


def platform_from_answers(config: Mapping[str, Any]) -> dict[str, Any]:
    """`trainplane:platform` from a gpu-platform stack's config (all its keys), checked: a ConfigError with
    one line per problem, each naming the answer key (`trainplane:spot: 'ture' is not true or false`)."""
    return _from_answers(GPU_PLATFORM, config, platform_from_prompts, PlatformSpec.load)


def job_from_answers(config: Mapping[str, Any]) -> dict[str, Any]:
    """`trainplane:job` from a training-job stack's config, checked as `platform_from_answers` does (the
    job alone: what needs the platform's outputs is `in_job_answer_terms`'s to tell)."""
    return _from_answers(TRAINING_JOB, config, job_from_prompts, JobSpec.load)


def in_job_answer_terms(problems: list[str]) -> list[str]:
    """A job's problems found against its platform (`job.team: 'x' is not a team`) under the answer keys."""
    return TRAINING_JOB.in_answer_terms(problems)


def _from_answers(
    template: Template,
    config: Mapping[str, Any],
    build: Callable[[Get], dict[str, Any]],
    load: Callable[[Any], Any],
) -> dict[str, Any]:
    values = answer_values(config)
    bad = template.problems(values)
    read: set[str] = set()

    def get(key: str) -> str | None:
        read.add(key)  # a cloud backend's quickstart may read answers of its own
        return None if key in bad else values.get(key)

    raw = build(get)
    problems = [*bad.values(), *template.unknown(values, read)]
    if problems:
        raise ConfigError(problems)
    try:
        load(raw)
    except ConfigError as e:
        raise ConfigError(template.in_answer_terms(e.problems, raw)) from None
    return raw


def _int(get: Get, key: str, default: int) -> int | str:
    text = get(key)
    if text in (None, ""):
        return default
    try:
        return int(str(text))
    except ValueError:
        return str(text)  # left for validation to reject with the key's name


def platform_from_prompts(get: Get) -> dict[str, Any]:
    """`trainplane:platform` from the gpu-platform template's prompts."""
    # No answer: the template's default (stacks/templates/gpu-platform/Pulumi.yaml), the first cloud.
    cloud = get("cloud") or next(iter(backend_names()), "")
    gpus_per_node = _int(get, "gpusPerNode", 8)
    max_nodes = _int(get, "maxGpuNodes", 2)
    gpu_pool: dict[str, Any] = {
        "name": "gpu",
        "gpu": get("gpu") or "H100",
        "gpusPerNode": gpus_per_node,
        "minNodes": 0,
        "maxNodes": max_nodes,
    }
    platform: dict[str, Any] = {
        "cloud": cloud,
        "cluster": {
            "name": get("clusterName") or "ml",
            "kubernetesVersion": get("kubernetesVersion") or default_minor(),
        },
        "observability": {"grafana": True, "loki": True},
    }
    # A cloud that is not registered gets the GPU pool alone: validation then names the cloud.
    part = backend(cloud).quickstart(get, gpu_pool) if cloud in backend_names() else {"nodePools": [gpu_pool]}
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(platform.get(key), dict):
            platform[key].update(value)
        else:
            platform[key] = value
    quota = gpus_per_node * max_nodes if isinstance(gpus_per_node, int) and isinstance(max_nodes, int) else 0
    platform["teams"] = [{"name": get("team") or "ml", "gpuQuota": quota}]
    # The first team owns the shared resources; the cost center is asked for (empty: none, and the policy
    # pack's trainplane-required-tags says so, docs/policy.md).
    platform["team"] = get("team") or "ml"
    if get("costCenter"):
        platform["costCenter"] = get("costCenter")
    return platform


def job_from_prompts(get: Get) -> dict[str, Any]:
    """`trainplane:job` from the training-job template's prompts."""
    nodes = str(get("nodes") or "1")
    low, _, high = nodes.partition(":")
    node_range: dict[str, Any] = {
        "min": _int(lambda _: low, "min", 1),
        "max": _int(lambda _: high or low, "max", 1),
    }
    job: dict[str, Any] = {
        "platformStack": get("platformStack") or "",
        "name": get("jobName") or "train",
        "team": get("team") or "ml",
        "image": get("image") or "",
        "nodePool": get("nodePool") or "gpu",
        "nodes": node_range,
        "gpusPerNode": _int(get, "gpusPerNode", 8),
        "trainer": {
            "model": get("model") or "gpt-small",
            "globalBatchSize": _int(get, "globalBatchSize", 512),
            "microBatchSize": _int(get, "microBatchSize", 8),
            "steps": _int(get, "steps", 20000),
        },
        "spot": prompt_bool(get("spot"), True),
    }
    if get("checkpointUri"):
        job["checkpoint"] = {
            "uri": get("checkpointUri"),
            "intervalSteps": _int(get, "checkpointIntervalSteps", 500),
        }
    return job
