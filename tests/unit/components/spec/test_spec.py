"""Stack config validation: what is accepted, and the one line each problem gets."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from components.spec import ConfigError, PlatformSpec
from tests.helpers.plans import platform_object


def problems_of(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        PlatformSpec.load(raw)
    return info.value.problems


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_reference_stacks_are_accepted(stack):
    spec = PlatformSpec.load(platform_object(stack))
    assert spec.cluster.name
    assert spec.teams[0].name == "research"


def test_aws_dev_contract_reads_as_written():
    spec = PlatformSpec.load(platform_object("aws-dev"))
    h100 = spec.node_pools[1]
    assert (spec.cloud, spec.region, spec.cluster.kubernetes_version) == ("aws", "us-east-1", "1.35")
    assert (h100.gpu, h100.gpus_per_node, h100.capacity, h100.min_nodes, h100.max_nodes) == (
        "H100",
        8,
        "spot",
        0,
        4,
    )
    assert spec.storage[0].capacity_gib == 2400 and spec.storage[0].throughput_per_tib == 250
    assert spec.storage[0].import_path == "s3://example-datasets/train"
    assert (spec.min_gpus(), spec.max_gpus()) == (0, 32)
    assert spec.observability.loki is True


def _set(path: str, value) -> Callable[[dict], None]:
    """A mutation that sets a dotted path ("nodePools.1.gpu") in a platform object."""

    def apply(obj: dict) -> None:
        *parents, last = path.split(".")
        cur = obj
        for p in parents:
            cur = cur[int(p)] if p.isdigit() else cur.setdefault(p, {})
        if last.isdigit():
            cur[int(last)] = value
        else:
            cur[last] = value

    return apply


CASES = [
    # (stack, mutation, the exact line expected)
    (
        "aws-dev",
        _set("nodePools.0.maxNodez", 3),
        "platform.nodePools[0].maxNodez: unknown key; did you mean 'maxNodes'?",
    ),
    (
        "aws-dev",
        _set("nodePools.1.gpu", "H1000"),
        "platform.nodePools[1].gpu: 'H1000' is not a known GPU; known: A10G, L4, L40S, A100-40GB, A100-80GB, "
        "H100, H100-MEGA, H200, B200, B300, GB200, GB300, RTX-PRO-6000",
    ),
    (
        "aws-dev",
        _set("nodePools.1.gpusPerNode", 4),
        "platform.nodePools[1].gpusPerNode: H100 does not come in 4 per node on aws; allowed: 1, 8",
    ),
    (
        "gcp-dev",
        _set("nodePools.1.gpusPerNode", 3),
        "platform.nodePools[1].gpusPerNode: H100 does not come in 3 per node on gcp; allowed: 1, 2, 4, 8",
    ),
    (
        "aws-dev",
        _set("nodePools.0.minNodes", 5),
        "platform.nodePools[0].minNodes: 5 is greater than maxNodes 4",
    ),
    (
        "aws-dev",
        _set("storage.0.capacityGiB", 3000),
        "platform.storage[0].capacityGiB: FSx for Lustre PERSISTENT_2 takes 1200 or a multiple of 2400 GiB, not 3000",
    ),
    (
        "aws-dev",
        _set("storage.0.throughputPerTiB", 300),
        "platform.storage[0].throughputPerTiB: FSx allows 125, 250, 500, 1000 MB/s per TiB, not 300",
    ),
    (
        "gcp-dev",
        _set("storage.0", {"name": "datasets", "kind": "lustre", "capacityGiB": 4800}),
        "platform.storage[0].capacityGiB: GCP Managed Lustre at 1000 MB/s per TiB takes 9000 to 10008000 GiB, not 4800",
    ),
    (
        "aws-dev",
        _set("nodePools.1.name", "system"),
        "platform.nodePools: name 'system' is used more than once",
    ),
    (
        "aws-dev",
        _set("teams.0.gpuQuota", 40),
        "platform.teams[0].gpuQuota: 40 GPUs is more than the platform's maximum of 32 "
        "(sum of gpusPerNode x maxNodes over GPU pools)",
    ),
    (
        "gcp-dev",
        _set("nodePools.0.instanceType", "m6i.xlarge"),
        "platform.nodePools[0].instanceType: only for cloud aws, this stack is cloud gcp; use machineType",
    ),
    (
        "aws-dev",
        _set("project", "my-project"),
        "platform.project: only for cloud gcp, this stack is cloud aws",
    ),
    (
        "aws-dev",
        _set("cluster.context", "kind-lab"),
        "platform.cluster.context: only for cloud kubernetes, this stack is cloud aws",
    ),
    (
        "onprem-dev",
        _set("nodePools.0.efa", True),
        "platform.nodePools[0].efa: only for cloud aws, this stack is cloud kubernetes",
    ),
    (
        "aws-dev",
        _set("cloud", "azure"),
        "platform.cloud: 'azure' is not allowed; allowed: 'aws', 'gcp' or 'kubernetes'",
    ),
    (
        "aws-dev",
        _set("nodePools.1", {"name": "a10", "gpu": "A10G", "gpusPerNode": 1, "efa": True}),
        "platform.nodePools[1].efa: g5.xlarge has no EFA interfaces; EFA needs e.g. p4d, p5, p5e, p5en",
    ),
    (
        "aws-dev",
        _set("network.vpcId", "vpc-0123456789abcdef0"),
        "platform.network.subnetIds: required with vpcId (the private subnets nodes run in)",
    ),
    (
        "gcp-dev",
        _set("nodePools.1.placement", "compact"),
        "platform.nodePools[1].placement: compact placement needs exactly one zone; set nodePools[1].zones to a "
        "single zone",
    ),
    (
        "gcp-dev",
        _set("storage.0.capacityGiB", 1024),
        "platform.storage[0].capacityGiB: Filestore BASIC_SSD takes 2560 to 65433 GiB, not 1024",
    ),
    (
        "gcp-dev",
        _set(
            "nodePools.1", {"name": "h100", "gpu": "H100", "machineType": "a3-highgpu-8g", "gpusPerNode": 4}
        ),
        "platform.nodePools[1].gpusPerNode: a3-highgpu-8g has 8 GPUs, not 4",
    ),
    (
        "aws-dev",
        _set("nodePools.1.gpu", "H100-MEGA"),
        "platform.nodePools[1].gpu: H100-MEGA is not offered on aws; it is on gcp",
    ),
    (
        "onprem-dev",
        _set("teams.0.storage", ["datasets", "scratch"]),
        "platform.teams[0].storage[1]: 'scratch' is not a storage of this platform; known: datasets",
    ),
    (
        "onprem-dev",
        _set("gpuOperator", {"mig": {"strategy": "single"}, "timeSlicing": {"replicas": 4}}),
        "platform.gpuOperator.timeSlicing: time-slicing cannot be combined with MIG (mig.strategy is single); "
        "choose one way of sharing GPUs",
    ),
    (
        "onprem-dev",
        _set("storage.0.server", None),
        "platform.storage[0].server: required for nfs on an existing cluster (the NFS server's address)",
    ),
    (
        "aws-dev",
        _set("queueing", {"podsReady": {"timeoutMinutes": 10}}),
        "platform.queueing.podsReady.timeoutMinutes: Input should be greater than or equal to 30 (got 10)",
    ),
    (
        "aws-dev",
        _set("queueing", {"podsReady": {"timeoutMinutes": 45, "recoveryTimeoutMinutes": 30}}),
        "platform.queueing.podsReady.recoveryTimeoutMinutes: 30 is shorter than timeoutMinutes 45: a lost node "
        "is replaced from zero, which takes as long as a first start",
    ),
    (
        "aws-dev",
        _set("cluster.kubernetesVersion", 1.33),
        "platform.cluster.kubernetesVersion: 1.33 is a number, not a version: YAML reads 1.30 as 1.3; "
        'write it in quotes: kubernetesVersion: "1.33"',
    ),
]


@pytest.mark.parametrize(("stack", "mutate", "expected"), CASES, ids=[c[2].split(":")[0] for c in CASES])
def test_invalid_config_names_the_key_and_what_is_allowed(stack, mutate, expected):
    raw = platform_object(stack)
    mutate(raw)
    problems = problems_of(raw)
    assert expected in problems, problems


def test_every_problem_is_reported_at_once():
    raw = platform_object("aws-dev")
    raw["nodePools"][1]["gpusPerNode"] = 3
    raw["nodePools"][0]["minNodes"] = 9
    raw["storage"][0]["capacityGiB"] = 3000
    problems = problems_of(raw)
    assert len(problems) == 3
    assert all(p.startswith("platform.") for p in problems)


def test_missing_required_keys_are_named():
    assert problems_of({"cloud": "aws"}) == ["platform.cluster: required", "platform.nodePools: required"]


def test_not_a_mapping():
    assert problems_of(["cloud"]) == ["platform: must be a mapping, got list"]


def test_gpus_per_node_defaults_from_the_machine_type():
    raw = platform_object("gcp-dev")
    raw["nodePools"][1] = {"name": "l4", "gpu": "L4", "machineType": "g2-standard-48", "maxNodes": 2}
    raw["teams"][0]["gpuQuota"] = 8
    spec = PlatformSpec.load(raw)
    assert spec.gpus_per_node(spec.node_pools[1]) == 4
    assert spec.max_gpus() == 8


def _models(model, seen=None):
    from components.spec import Spec

    seen = seen if seen is not None else {}
    if model in seen:
        return seen
    seen[model] = True
    for f in model.model_fields.values():
        stack = [f.annotation]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, Spec):
                _models(t, seen)
            stack.extend(getattr(t, "__args__", ()) or ())
    return seen


@pytest.mark.parametrize("root", ["PlatformSpec", "JobSpec"])
def test_every_stack_key_is_documented(root):
    import components.spec as spec_module
    from tests.helpers.plans import ROOT

    doc = (ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"{m.__name__}.{f.alias or n}"
        for m in _models(getattr(spec_module, root))
        for n, f in m.model_fields.items()
        if f"`{f.alias or n}`" not in doc and f".{f.alias or n}`" not in doc
    ]
    assert missing == []


def _patterns(schema: object) -> set[str]:
    if isinstance(schema, dict):
        found = {schema["pattern"]} if isinstance(schema.get("pattern"), str) else set()
        return found.union(*(_patterns(v) for v in schema.values()))
    if isinstance(schema, list):
        return set().union(*(_patterns(v) for v in schema))
    return set()


def test_every_pattern_of_a_stack_object_has_words():
    """A value that does not match is told in words (`expected a GCP project id ...`), never as the regular
    expression (`expected the form ^[a-z][-a-z0-9]{4,28}[a-z0-9]$`, what project, vpcId, importPath, for,
    mountPath and rotation said)."""
    from components.spec import JobSpec
    from components.spec.base import PATTERN_WORDS
    from components.spec.fleet import FleetSpec

    found = set().union(*(_patterns(m.model_json_schema()) for m in (PlatformSpec, JobSpec, FleetSpec)))
    assert found and found <= set(PATTERN_WORDS), sorted(found - set(PATTERN_WORDS))


def test_a_gcp_project_id_that_does_not_match_is_told_in_words():
    raw = {**platform_object("gcp-dev"), "project": "My Project"}
    assert problems_of(raw) == [
        "platform.project: 'My Project' is not valid here; expected a GCP project id (6 to 30 lowercase "
        "letters, digits and '-', starting with a letter)"
    ]
