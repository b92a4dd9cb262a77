"""A fourth cloud, written and registered here and nowhere else: the registry, the catalog (its own
machines and prices), the spec rules (its capacity kinds, regions, object store), the quickstart, the
in-cluster layer, the platform outputs, the offline engine (its mock answers), `trainplane plan` (its
prices, control plane and creation times) and `trainplane verify` (with its own verifier, or the defaults
and a note without one) take it without an edit outside this module."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components.backends import (
    BackendDefaults,
    BuildArgs,
    MockAnswers,
    Prompt,
    backend_names,
    register_backend,
    unregister_backend,
)
from components.bundle import CloudProfile, ClusterBundle, NodePoolInfo, SystemObject, TaintInfo
from components.catalog import CatalogSection, MachineShape, PriceBasis, catalog
from components.outputs import PlatformOutputs
from components.quickstart import platform_from_prompts
from components.regions import region_problems
from components.spec import ConfigError, JobSpec, NodePoolSpec, PlatformSpec, Spec, StorageSpec, check_job
from components.spec.capacity import CapacityKinds, check_capacity
from components.spec.rules import check_declared_pool
from infra.resources import Resource
from infra.verify.verifier import UNKNOWN_FACTS, VerifierDefaults
from infra.verify.verifiers import register_verifier, unregister_verifier
from tests.helpers.plans import one, plan_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

# The toy cloud's own catalog section: its machines are named by the key `machine`.
TOY_SECTION = CatalogSection(
    cloud="toy",
    machine_key="machine",
    gpus={
        "H100": [{"machine": "toy-8gpu", "gpus": 8, "vcpus": 64, "memoryGiB": 512, "onDemandHourly": 1.0}],
        "A10G": [{"machine": "toy-1gpu", "gpus": 1, "vcpus": 8, "memoryGiB": 32, "onDemandHourly": 0.25}],
    },
    cpu=[{"machine": "toy-cpu", "vcpus": 4, "memoryGiB": 16, "onDemandHourly": 0.05}],
    pricing={
        "region": "toy-east",
        "source": "the toy price list",
        "asOf": "2026-11",
        "spotFraction": 0.5,
        "spotSource": "toy spot",
    },
)
TOY_MACHINE = MachineShape(
    cloud="toy",
    name="toy-8gpu",
    vcpus=64,
    memory_gib=512,
    on_demand_hourly=1.0,
    gpu="H100",
    gpus=8,
    gpu_memory_gib=80.0,  # data/gpus.yaml H100 memoryMiB 81920
    nvlink_domain=8,  # H100: 8 per NVLink domain (data/gpus.yaml), as many as the machine has
)
# Spot is all it sells; a stack asking for another cloud's reservation kinds is told to use it.
TOY_CAPACITY = CapacityKinds(
    offered=("on-demand", "spot"),
    instead={"capacity-block": "spot", "flex-start": "spot"},
)


# The toy cloud's section of the spec: a key only it understands (components/spec/sections.py), which a
# package would keep in its spec_keys module.
class ToyNodePoolKeys(Spec):
    rack: str | None = None  # the rack a pool's nodes stand in


class ToySpecKeys:
    NodePoolKeys = ToyNodePoolKeys


TOY_CLUSTER = "toy:index/cluster:Cluster"
TOY_VERSION = "toy:index/getVersion:getVersion"


def toy_cluster_answer(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """What the toy cloud computes for a cluster it creates: its API endpoint."""
    return {"endpoint": f"https://{inputs['name']}.toy.example"}


def toy_kubeconfig(endpoint: str) -> str:
    """The toy cluster's kubeconfig document: its endpoint, a context, a user with no credentials."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "toy", "cluster": {"server": endpoint}}],
            "contexts": [{"name": "toy", "context": {"cluster": "toy", "user": "toy"}}],
            "current-context": "toy",
            "users": [{"name": "toy", "user": {}}],
        }
    )


class ToyCluster(pulumi.ComponentResource):
    """The toy cloud's cluster: a provider for a cluster reached through its kubeconfig."""

    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions):
        super().__init__("trainplane:toy:ToyCluster", name, None, opts)
        version = pulumi.runtime.invoke(TOY_VERSION, {}).value["version"]
        cluster = pulumi.CustomResource(
            TOY_CLUSTER,
            f"{name}-cluster",
            {"name": spec.cluster.name, "version": version, "endpoint": None},
            opts=pulumi.ResourceOptions(parent=self),
        )
        provider = k8s.Provider(
            f"{name}-k8s",
            # A kubeconfig document pulumi-kubernetes can load (verify's provider-kubeconfig rule).
            kubeconfig=cluster.endpoint.apply(toy_kubeconfig),  # type: ignore[attr-defined]
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.bundle = ClusterBundle(
            name=spec.cluster.name,
            region=spec.region,
            provider=provider,
            kubeconfig=pulumi.Output.secret("(toy kubeconfig)"),
            profile=CloudProfile(
                name="toy",
                object_store="toy",
                # An S3-compatible store (loki chart 18.11.0 values.yaml: loki.storage.s3.endpoint,
                # s3ForcePathStyle).
                loki_storage={
                    "type": "s3",
                    "s3": {"endpoint": "https://objects.toy.example", "s3ForcePathStyle": True},
                },
                identity_annotation="toy.example.com/identity",
                gpu_operator_values={"driver": {"enabled": True, "version": "580.65.06"}},
                system_objects=(
                    SystemObject(
                        resource_name="toy-driver-settings",
                        api_version="v1",
                        kind="ConfigMap",
                        metadata={"name": "toy-driver-settings"},
                        spec={"mode": "open"},
                        gates_operator=True,
                    ),
                ),
                preemption_grace_seconds=45,
            ),
            node_pools=tuple(
                NodePoolInfo(
                    name=p.name,
                    gpu=p.gpu,
                    gpus_per_node=p.gpus_per_node or 0,
                    capacity=p.capacity,
                    min_nodes=p.min_nodes,
                    max_nodes=p.effective_max_nodes,
                    labels=dict(p.selector),
                    taints=(TaintInfo(key="nvidia.com/gpu", value="present", effect="NoSchedule"),)
                    if p.gpu
                    else (),
                    machine_types=(TOY_MACHINE.name,),
                    node_vcpus=TOY_MACHINE.vcpus,
                    node_memory_gib=TOY_MACHINE.memory_gib,
                )
                for p in spec.node_pools
            ),
            buckets={
                "checkpoints": f"{spec.cluster.name}-toy-checkpoints",
                "logs": f"{spec.cluster.name}-toy-logs",
            },
            team_identities={t.name: f"{t.name}@toy" for t in spec.teams},
            storage_class="toy-block",
        )
        self.register_outputs({})


class ToyBackend(BackendDefaults):
    name = "toy"
    # Pools select existing nodes by label, like on an existing cluster, and take spot capacity.
    keys: Mapping[type[Spec], frozenset[str]] = {NodePoolSpec: frozenset({"selector", "capacity", "rack"})}
    spec_keys = ToySpecKeys
    twins: Mapping[str, str] = {}
    preemption_grace_seconds = 45

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        if not spec.region:
            yield f"{root}.region: required for cloud toy"
        yield from region_problems("toy", spec.region, f"{root}.region")

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        yield from check_declared_pool(pool, path, "toy")
        yield from check_capacity(pool, path, "toy", TOY_CAPACITY)

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        yield f"{path}: the toy cloud has no shared file systems"

    def machine_of(self, pool: NodePoolSpec) -> MachineShape | None:
        return TOY_MACHINE

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        return ToyCluster(name, args.spec, opts).bundle

    def catalog_section(self) -> CatalogSection:
        return TOY_SECTION

    def display_name(self) -> str:
        return "Toy"

    def regions(self) -> list[str]:
        return ["toy-east", "toy-west"]

    def capacity_kinds(self) -> CapacityKinds:
        return TOY_CAPACITY

    def object_store_scheme(self) -> str:
        return "toy"

    def quickstart(self, get: Prompt, gpu_pool: dict[str, Any]) -> dict[str, Any]:
        pool = {**gpu_pool, "selector": {"pool": "gpu"}}
        return {"region": get("region") or "toy-east", "nodePools": [pool]}

    def create_seconds(self) -> Mapping[str, float]:
        return {TOY_CLUSTER: 900}

    def price_basis(self) -> PriceBasis | None:
        return catalog().pricing.get("toy")

    def control_plane_hourly(self, spec: PlatformSpec) -> float:
        return 0.25

    def cost_assumptions(self, spec: PlatformSpec) -> list[str]:
        return ["toy: nodes are billed by the started hour"]

    def mock_answers(self) -> MockAnswers:
        return MockAnswers(
            computed={TOY_CLUSTER: toy_cluster_answer},
            invokes={TOY_VERSION: lambda token, args: {"version": "1.33"}},
        )


TOY_PLATFORM = {
    "cloud": "toy",
    "region": "toy-east",
    "cluster": {"name": "toyland"},
    "nodePools": [
        {"name": "cpu", "selector": {"pool": "cpu"}, "minNodes": 1},
        {"name": "gpu", "selector": {"pool": "gpu"}, "gpu": "H100", "gpusPerNode": 8, "maxNodes": 2},
    ],
    "teams": [{"name": "research", "gpuQuota": 16}],
}


@pytest.fixture
def toy():
    register_backend("toy", ToyBackend())
    yield
    unregister_backend("toy")


def test_the_toy_cloud_is_registered_only_while_the_test_runs(toy):
    assert "toy" in backend_names()
    assert PlatformSpec.load(TOY_PLATFORM).max_gpus() == 16


def test_the_toy_clouds_rules_and_keys(toy):
    bad = {**TOY_PLATFORM, "region": None, "storage": [{"name": "data", "kind": "nfs"}]}
    bad["nodePools"] = [{**TOY_PLATFORM["nodePools"][1], "instanceType": "p5.48xlarge", "gpusPerNode": 3}]
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(bad)
    assert e.value.problems == [
        "platform.region: required for cloud toy",
        "platform.nodePools[0].instanceType: only for cloud aws, this stack is cloud toy",
        "platform.nodePools[0].gpusPerNode: 3 GPUs per node is not a server shape; allowed: 1, 2, 4, 8, 16",
        "platform.storage[0]: the toy cloud has no shared file systems",
    ]


def test_the_toy_clouds_own_key_joins_the_spec_while_it_is_registered(toy):
    """A key the toy cloud brings in its own section (no edit of components/spec): a toy stack takes it,
    another cloud's stack is told whose it is, as for the built-in clouds' keys."""
    from components.spec.platform import loaded_model

    pools = loaded_model().model_fields["node_pools"].annotation.__args__[0]
    assert "rack" in pools.model_fields and issubclass(pools, NodePoolSpec)
    racked = {**TOY_PLATFORM["nodePools"][1], "rack": "r7"}
    spec = PlatformSpec.load({**TOY_PLATFORM, "nodePools": [racked]})
    assert spec.node_pools[0].rack == "r7" and isinstance(spec.node_pools[0], NodePoolSpec)
    aws = {
        "cloud": "aws",
        "region": "us-east-1",
        "cluster": {"name": "ml"},
        "nodePools": [{"name": "h100", "gpu": "H100", "gpusPerNode": 8, "rack": "r7"}],
    }
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(aws)
    assert e.value.problems == ["platform.nodePools[0].rack: only for cloud toy, this stack is cloud aws"]


def test_the_toy_clouds_key_leaves_with_it():
    aws = {
        "cloud": "aws",
        "region": "us-east-1",
        "cluster": {"name": "ml"},
        "nodePools": [{"name": "h100", "gpu": "H100", "gpusPerNode": 8, "rack": "r7"}],
    }
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(aws)
    ((line,),) = [e.value.problems]
    assert line.startswith("platform.nodePools[0].rack: unknown key; known: blockEnd, ")
    assert "rack" not in line.split("known: ")[1]
    assert "rack" not in NodePoolSpec.model_fields


def test_a_platform_plans_on_the_toy_cloud(toy):
    result = plan_object(TOY_PLATFORM, "toy-dev")
    (cluster,) = result.of_type("trainplane:toy:ToyCluster")
    assert cluster.parent == one(result, "trainplane:index:GpuPlatform").urn
    # The in-cluster layer took the profile: operator values, the system object it waits for.
    release = next(
        r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "gpu-operator"
    )
    assert release.inputs["values"]["driver"] == {"enabled": True, "version": "580.65.06"}
    settings = one(result, "kubernetes:core/v1:ConfigMap", "toyland-gpu-operator-toy-driver-settings")
    assert settings.inputs["data"] == {"mode": "open"}
    assert settings.urn in release.deps
    sa = next(
        r
        for r in result.of_type("kubernetes:core/v1:ServiceAccount")
        if r.inputs["metadata"]["name"] == "trainer"
    )
    assert sa.inputs["metadata"]["annotations"] == {"toy.example.com/identity": "research@toy"}
    quota = one(result, "kubernetes:core/v1:ResourceQuota", "toyland-team-research-quota")
    assert quota.inputs["spec"]["hard"]["requests.cpu"] == "128"  # 64 vCPUs per 8 GPUs, 16 GPUs
    # What a job stack reads back.
    assert result.outputs["cloud"] == "toy"
    assert result.outputs["preemptionGraceSeconds"] == 45
    assert result.outputs["nodePools"][1]["nodeVcpus"] == 64


# ---- the open catalog and spec: the toy cloud's machines, kinds, regions and object store -----------


def test_the_catalog_takes_the_toy_clouds_section(toy):
    assert catalog().machine("toy", "toy-8gpu") == TOY_MACHINE
    assert [m.name for m in catalog().shapes("toy", "H100", 8)] == ["toy-8gpu"]
    assert catalog().machine_names("toy") == ["toy-1gpu", "toy-8gpu", "toy-cpu"]
    assert catalog().gpu("H100").counts("toy") == [8]
    assert catalog().pricing["toy"].spot_fraction == 0.5
    # A GCP stack asking for a GPU GCP lacks hears where it is, the toy cloud included.
    gcp = {
        "cloud": "gcp",
        "project": "my-project",
        "region": "us-central1",
        "cluster": {"name": "ml"},
        "nodePools": [{"name": "a10g", "gpu": "A10G", "gpusPerNode": 1}],
    }
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(gcp)
    assert e.value.problems == ["platform.nodePools[0].gpu: A10G is not offered on gcp; it is on aws, toy"]


def test_the_toy_section_leaves_with_the_toy_cloud():
    register_backend("toy", ToyBackend())
    assert catalog().gpu("A10G").offered_on() == ["aws", "toy"]
    unregister_backend("toy")
    assert catalog().gpu("A10G").offered_on() == ["aws"]
    assert catalog().machine("toy", "toy-8gpu") is None


def test_capacity_hints_are_the_backends_answers(toy):
    aws = {
        "cloud": "aws",
        "region": "us-east-1",
        "cluster": {"name": "ml"},
        "nodePools": [{"name": "h100", "gpu": "H100", "gpusPerNode": 8, "capacity": "flex-start"}],
    }
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(aws)
    assert e.value.problems == [
        "platform.nodePools[0].capacity: flex-start is not offered on aws; allowed: on-demand, spot, "
        "reservation, capacity-block (GKE Dynamic Workload Scheduler; on aws use capacity-block or "
        "reservation; on toy use spot)"
    ]
    block = {**TOY_PLATFORM, "nodePools": [{**TOY_PLATFORM["nodePools"][1], "capacity": "capacity-block"}]}
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(block)
    assert e.value.problems == [
        "platform.nodePools[0].capacity: capacity-block is not offered on toy; allowed: on-demand, spot "
        "(AWS Capacity Blocks for ML; on gcp use reservation (a future reservation) or flex-start; "
        "on toy use spot)"
    ]
    spot = {**TOY_PLATFORM, "nodePools": [{**TOY_PLATFORM["nodePools"][1], "capacity": "spot"}]}
    assert PlatformSpec.load(spot).node_pools[0].capacity == "spot"


def test_regions_are_the_backends(toy):
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load({**TOY_PLATFORM, "region": "toy-eats"})
    assert e.value.problems == ["platform.region: 'toy-eats' is not a Toy region; did you mean 'toy-east'?"]
    aws = {
        "cloud": "aws",
        "region": "toy-west",
        "cluster": {"name": "ml"},
        "nodePools": [{"name": "cpu", "instanceType": "m6i.xlarge"}],
    }
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(aws)
    (line,) = e.value.problems
    assert line.startswith("platform.region: 'toy-west' is not an AWS region (it is a Toy region); ")


JOB = {
    "platformStack": "org/toy/dev",
    "name": "train",
    "team": "research",
    "image": "ghcr.io/example/train:1",
    "nodePool": "gpu",
    "nodes": {"min": 1, "max": 2},
    "gpusPerNode": 8,
}


def test_a_job_checkpoints_to_the_toy_object_store(toy):
    job = JobSpec.load({**JOB, "checkpoint": {"uri": "toy://toyland-toy-checkpoints/train"}})
    assert job.checkpoint.uri.startswith("toy://")
    outputs = PlatformOutputs.model_validate(
        {
            "cloud": "toy",
            "clusterName": "toyland",
            "objectStore": "toy",
            "nodePools": [
                {
                    "name": "gpu",
                    "gpu": "H100",
                    "gpusPerNode": 8,
                    "capacity": "on-demand",
                    "maxNodes": 2,
                    "machineTypes": ["toy-8gpu"],
                }
            ],
            "teams": [
                {
                    "name": "research",
                    "namespace": "research",
                    "serviceAccount": "trainer",
                    "localQueue": "research-gpus",
                    "gpuQuota": 16,
                }
            ],
        }
    )
    # A platform deployed before nodeVcpus: the toy catalog's machine.
    assert outputs.pool("gpu").node_vcpus == 64
    assert check_job(JobSpec.load({**JOB, "checkpoint": {"uri": "toy://auto"}}), outputs) == []
    assert check_job(JobSpec.load({**JOB, "checkpoint": {"uri": "s3://auto"}}), outputs) == [
        "job.checkpoint.uri: platform org/toy/dev keeps checkpoints in toy://; use toy://auto"
    ]
    with pytest.raises(ConfigError) as e:
        JobSpec.load({**JOB, "checkpoint": {"uri": "az://bucket/x"}})
    assert e.value.problems == [
        "job.checkpoint.uri: 'az://bucket/x' is not an s3://, gs:// or toy:// URI "
        "(or s3://auto, gs://auto, toy://auto, or a path)"
    ]


def test_a_toy_uri_is_refused_without_the_toy_cloud():
    with pytest.raises(ConfigError) as e:
        JobSpec.load({**JOB, "checkpoint": {"uri": "toy://toyland-toy-checkpoints/train"}})
    assert e.value.problems == [
        "job.checkpoint.uri: 'toy://toyland-toy-checkpoints/train' is not an s3:// or gs:// URI "
        "(or s3://auto, gs://auto, or a path)"
    ]


def test_the_quickstart_asks_the_toy_cloud(toy):
    answers = {"cloud": "toy", "gpu": "H100", "gpusPerNode": "8", "maxGpuNodes": "2"}
    spec = PlatformSpec.load(platform_from_prompts(answers.get))
    assert spec.region == "toy-east"
    assert [(p.name, p.selector, p.max_nodes) for p in spec.node_pools] == [("gpu", {"pool": "gpu"}, 2)]
    assert spec.observability.loki and spec.teams[0].gpu_quota == 16


def test_the_offline_engine_answers_with_the_toy_clouds_mock_answers(toy):
    result = plan_object(TOY_PLATFORM, "toy-dev")
    cluster = one(result, TOY_CLUSTER)
    assert cluster.inputs["version"] == "1.33"  # the toy invoke's answer
    assert TOY_VERSION in result.invokes
    provider = one(result, "pulumi:providers:kubernetes", "toyland-k8s")
    # The endpoint only the toy cloud's computed outputs give (an unmocked output stays unknown).
    assert json.loads(provider.inputs["kubeconfig"])["clusters"][0]["cluster"] == {
        "server": "https://toyland.toy.example"
    }


def test_plan_prices_and_times_the_toy_platform(toy, tmp_path, capsys):
    from infra.cli import main

    stack = tmp_path / "Pulumi.toy-dev.yaml"
    stack.write_text(yaml.safe_dump({"config": {"trainplane:platform": TOY_PLATFORM}}))
    assert main(["plan", str(stack), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    cost = summary["cost"]
    gpu = next(p for p in cost["pools"] if p["pool"] == "gpu")
    assert (gpu["machine"], gpu["onDemandHourly"], gpu["spotHourly"]) == ("toy-8gpu", 1.0, 0.5)
    assert gpu["priceSource"] == "catalog list price, toy-east, 2026-11"
    assert cost["controlPlaneHourly"] == 0.25
    # One cpu node at minimum; two GPU nodes more at maximum; plus the control plane.
    assert (cost["minHourly"], cost["maxHourly"]) == (1.25, 3.25)
    assert (
        "control plane: $0.25/h; storage, data transfer and load balancers are not included"
        in (cost["assumptions"])
    )
    assert cost["assumptions"][-1] == "toy: nodes are billed by the started hour"
    # The toy cluster's creation time puts it at the head of the critical path.
    steps = summary["criticalPath"]["steps"]
    assert steps[0] == {"name": "toyland-cluster", "type": TOY_CLUSTER, "seconds": 900}

    assert main(["plan", str(stack)]) == 0
    text = capsys.readouterr().out
    assert "$1.00/h" in text and "$0.50/h" in text
    assert "control plane: $0.25/h" in text


def test_loki_stores_logs_where_the_toy_profile_says(toy):
    """The in-cluster layer takes Loki's object storage from the profile: no edit of logs.py per cloud."""
    result = plan_object({**TOY_PLATFORM, "observability": {"loki": True}}, "toy-dev")
    loki = next(r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "loki")
    assert loki.inputs["values"]["loki"]["storage"] == {
        "type": "s3",
        "bucketNames": {"chunks": "toyland-toy-logs", "ruler": "toyland-toy-logs"},
        "s3": {"endpoint": "https://objects.toy.example", "s3ForcePathStyle": True},
    }
    assert loki.inputs["values"]["loki"]["schemaConfig"]["configs"][0]["object_store"] == "s3"


NO_VERIFIER_NOTE = (
    "cloud toy: no verifier registered (entry points trainplane.verifiers): verified as a plain "
    "Kubernetes cluster (no add-ons, cloud identity, create rules or cloud API checked)"
)


def test_verify_checks_a_whole_toy_platform_and_finds_what_breaks_it(toy):
    """verify runs every check on the toy cloud's plan; the toy cloud registers no verifier, so verify asks
    the defaults (VerifierDefaults: a plain cluster) and says so in one note: the clean platform passes,
    and a defect planted in its in-cluster layer is found."""
    from infra.verify import verify
    from infra.verify.model import from_run
    from tests.helpers.verify_plans import edit, lines, release

    clean = from_run(plan_object(TOY_PLATFORM, "toy-dev"), TOY_PLATFORM)
    assert clean.cloud == "toy"
    report = verify(clean)
    assert report.ok, report.failed()
    assert {c.name: c.status for c in report.checks}["scheduling"] == "pass"
    assert report.notes == [NO_VERIFIER_NOTE] and report.as_json()["notes"] == [NO_VERIFIER_NOTE]

    def no_tolerations(inputs: dict) -> None:
        inputs["values"]["daemonsets"]["tolerations"] = []

    broken = verify(edit(clean, release("gpu-operator"), no_tolerations), ["scheduling"])
    found = [line for line in lines(broken) if "nvidia-device-plugin-daemonset" in line]
    assert found and "nvidia.com/gpu=present:NoSchedule" in found[0] and "pool gpu" in found[0], lines(broken)


class ToyVerifier(VerifierDefaults):
    """The toy cloud's verifier: it knows its cluster resource and version, and that its nodes carry a
    taint of their own (its facts)."""

    name = "toy"

    def verify_facts(self) -> Mapping[str, Any]:
        taint = {"key": "toy.example.com/reclaim", "effect": "NoSchedule"}
        return {**UNKNOWN_FACTS, "taints": [taint]}

    def plan_cluster(self, resources: Sequence[Resource]) -> Resource | None:
        return next((r for r in resources if r.type == TOY_CLUSTER), None)

    def plan_kubernetes_version(self, cluster: Resource) -> str | None:
        return str(cluster.inputs.get("version") or "") or None


def test_verify_asks_the_toy_clouds_own_verifier_once_registered(toy):
    """With a verifier registered, verify asks it (the plan's cluster and version, the cloud's facts) and
    the report carries no note; without one, `trainplane verify` prints the note."""
    from infra.verify import facts as F
    from infra.verify import verify
    from infra.verify.model import from_run

    result = plan_object(TOY_PLATFORM, "toy-dev")
    assert from_run(result, TOY_PLATFORM).kubernetes_version is None  # the defaults read no version
    register_verifier("toy", ToyVerifier())
    try:
        plan = from_run(result, TOY_PLATFORM)
        assert plan.kubernetes_version == "1.33"  # the toy invoke's answer, read by the toy verifier
        assert plan.cluster_resource() is not None
        assert F.cloud("toy")["taints"] == [{"key": "toy.example.com/reclaim", "effect": "NoSchedule"}]
        report = verify(plan, ["scheduling"])
        assert report.notes == [] and "notes" not in report.as_json()
        # The toy taint is on every node: the GPU DaemonSets do not tolerate it.
        found = [f.message for f in report.check("scheduling").findings]
        assert found and all("toy.example.com/reclaim" in m for m in found), found
    finally:
        unregister_verifier("toy")
    assert F.cloud("toy")["taints"] == []


def test_the_cli_prints_the_note_of_a_cloud_without_a_verifier(toy, tmp_path, capsys):
    from infra.cli import main

    stack = tmp_path / "Pulumi.toy-dev.yaml"
    stack.write_text(yaml.safe_dump({"config": {"trainplane:platform": TOY_PLATFORM}}))
    assert main(["verify", str(stack), "--check", "scheduling"]) == 0
    assert f"note: {NO_VERIFIER_NOTE}" in " ".join(capsys.readouterr().out.split())
