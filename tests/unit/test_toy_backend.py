"""A fourth cloud, written and registered here and nowhere else: the registry, the spec rules, the
in-cluster layer and the platform outputs take it without an edit outside this module."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.backends import (
    BackendDefaults,
    BuildArgs,
    backend_names,
    register_backend,
    unregister_backend,
)
from components.bundle import CloudProfile, ClusterBundle, NodePoolInfo, SystemObject, TaintInfo
from components.catalog import MachineShape
from components.spec import ConfigError, NodePoolSpec, PlatformSpec, Spec, StorageSpec
from components.spec.rules import check_declared_pool
from tests.conftest import one, plan_object

TOY_MACHINE = MachineShape(cloud="aws", name="toy-8gpu", vcpus=64, memory_gib=512, on_demand_hourly=1.0)


class ToyCluster(pulumi.ComponentResource):
    """The toy cloud's cluster: a provider for a cluster reached through its kubeconfig."""

    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions):
        super().__init__("trainplane:toy:ToyCluster", name, None, opts)
        provider = k8s.Provider(f"{name}-k8s", kubeconfig="(toy)", opts=pulumi.ResourceOptions(parent=self))
        self.bundle = ClusterBundle(
            name=spec.cluster.name,
            region=spec.region,
            provider=provider,
            kubeconfig=pulumi.Output.secret("(toy kubeconfig)"),
            profile=CloudProfile(
                name="toy",
                object_store="toy",
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
                    taints=(TaintInfo("nvidia.com/gpu", "present", "NoSchedule"),) if p.gpu else (),
                    machine_types=(TOY_MACHINE.name,),
                    node_vcpus=TOY_MACHINE.vcpus,
                    node_memory_gib=TOY_MACHINE.memory_gib,
                )
                for p in spec.node_pools
            ),
            buckets={"checkpoints": f"{spec.cluster.name}-toy-checkpoints"},
            team_identities={t.name: f"{t.name}@toy" for t in spec.teams},
            storage_class="toy-block",
        )
        self.register_outputs({})


class ToyBackend(BackendDefaults):
    name = "toy"
    # Pools select existing nodes by label, like on an existing cluster.
    keys: Mapping[type[Spec], frozenset[str]] = {NodePoolSpec: frozenset({"selector"})}
    twins: Mapping[str, str] = {}
    preemption_grace_seconds = 45

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        if not spec.region:
            yield f"{root}.region: required for cloud toy"

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        yield from check_declared_pool(pool, path, "toy")

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        yield f"{path}: the toy cloud has no shared file systems"

    def machine_of(self, pool: NodePoolSpec) -> MachineShape | None:
        return TOY_MACHINE

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        return ToyCluster(name, args.spec, opts).bundle

    def verify_facts(self) -> Mapping[str, Any]:
        return {"storageClasses": "unknown", "taints": [], "addonDaemonSets": {}}


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
