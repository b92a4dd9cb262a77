"""Where a job's pods may go: several pools in order of preference (`nodePools`, Kueue flavor fallback),
topology-aware placement (`topology`, Kueue TAS podset annotations), and what queued-provisioning pools
ask of the workload. Pure: the job builder's manifests on recorded platform outputs, no engine run."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.incluster.job_runtime import training_jobset
from components.incluster.kueue_objects import flavors
from components.incluster.placement import PREFERRED_TOPOLOGY, REQUIRED_TOPOLOGY
from components.outputs import PlatformOutputs
from components.spec import ConfigError, JobSpec
from tests.helpers.jobs import build, job_object, platform_outputs, pod_of

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

GKE_LEVELS = [
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "kubernetes.io/hostname",
]


def h100_pool(name: str, capacity: str, **extra: Any) -> dict[str, Any]:
    spot = next(p for p in platform_outputs("aws-dev")["nodePools"] if p["name"] == "h100")
    pool = copy.deepcopy(spot)
    pool.update(name=name, capacity=capacity, **extra)
    pool["labels"].update({"trainplane.dev/pool": name, "trainplane.dev/capacity": capacity})
    return pool


def platform(*pools: dict[str, Any]) -> PlatformOutputs:
    outputs = copy.deepcopy(platform_outputs("aws-dev"))
    outputs["nodePools"] += list(pools)
    return PlatformOutputs.model_validate(outputs)


def three() -> tuple[dict[str, Any], ...]:
    """aws-dev's spot h100 pool's twins on a reservation and on demand (the spot one is aws-dev's own): made
    when a test asks, not at import, where each xdist worker's collection would plan aws-dev."""
    return (
        h100_pool("h100-res", "reservation", reservation="cr-0123456789abcdef0"),
        h100_pool("h100-od", "on-demand"),
    )


def job(**changes: Any) -> dict[str, Any]:
    raw = job_object()
    raw.pop("spot")
    raw.pop("nodePool")
    raw.update(changes)
    return raw


def problems_of(raw: dict[str, Any], outputs: PlatformOutputs) -> list[str]:
    with pytest.raises(ConfigError) as e:
        build(raw, outputs)
    return e.value.problems


def kueue_fits(pod: dict[str, Any], node_labels: dict[str, str]) -> bool:
    """Kueue's flavor match (v0.19.2 flavorassigner): the pod's nodeSelector and required node-affinity
    terms, restricted to the flavor's own label keys, against the flavor's labels."""
    spec = pod["spec"]
    if any(node_labels.get(k, v) != v for k, v in spec["nodeSelector"].items() if k in node_labels):
        return False
    terms = (
        spec["affinity"]
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms")
    )
    if not terms:
        return True
    return any(
        all(
            node_labels[e["key"]] in e["values"]
            for e in t["matchExpressions"]
            if e["key"] in node_labels and e["operator"] == "In"
        )
        for t in terms
    )


def test_a_job_on_several_pools_fits_their_flavors_only_and_in_the_platforms_order():
    outputs = platform(*three())
    js = build(job(nodePools=["h100-res", "h100-od", "h100"]), outputs)
    pod = pod_of(js)
    # The GPU kind only in the nodeSelector; one affinity term per pool; every pool's taints tolerated.
    assert pod["spec"]["nodeSelector"] == {"trainplane.dev/gpu": "H100"}
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [
        [e["values"] for e in t["matchExpressions"] if e["key"] == "trainplane.dev/pool"]
        for t in terms["nodeSelectorTerms"]
    ] == [[["h100-res"]], [["h100-od"]], [["h100"]]]
    assert pod["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule", "operator": "Equal"}
    ]
    # Kueue tries the ClusterQueue's flavors in order: reserved first, spot last.
    # The pools a job stack reads back are the platform's own pool model: the same flavors come of them.
    fl = flavors(outputs.node_pools)
    assert [f.name for f in fl] == ["h100-reservation", "h100-on-demand", "h100-spot"]
    assert all(kueue_fits(pod, f.node_labels) for f in fl)
    # A job on two of the three pools does not fit the third pool's flavor.
    two = pod_of(build(job(nodePools=["h100-res", "h100-od"]), outputs))
    assert [kueue_fits(two, f.node_labels) for f in fl] == [True, True, False]


def test_the_jobset_does_not_depend_on_the_order_of_the_pools_labels():
    # A job stack reads the pools through a StackReference: their labels arrive as a map in no stable order
    # (one plan had capacity before pool in one process and the reverse in another). The JobSet must be the
    # same either way, or every `pulumi up` of the job would change it.
    outputs = platform(*three())
    flipped = copy.deepcopy(outputs.model_dump(by_alias=True))
    for pool in flipped["nodePools"]:
        pool["labels"] = dict(reversed(list(pool["labels"].items())))
    raw = job(nodePools=["h100-res", "h100-od", "h100"])
    assert build(raw, PlatformOutputs.model_validate(flipped)) == build(raw, outputs)


def test_a_single_pool_job_keeps_its_pools_labels():
    pod = pod_of(build(job(nodePool="h100", spot=True), platform(*three())))
    assert pod["spec"]["nodeSelector"]["trainplane.dev/pool"] == "h100"
    assert "nodeAffinity" not in pod["spec"]["affinity"]


BAD_POOLS = [
    (
        {"nodePools": ["h100", "h100-od"]},
        "job.nodePools: [h100, h100-od] is not in the platform's fallback order (reservation, "
        "capacity-block, on-demand, flex-start, queued, spot), the order Kueue tries a team's flavors in; "
        "list them as [h100-od, h100]",
    ),
    ({"nodePools": ["h100-od", "h100"], "spot": True}, "job.spot: derived from nodePools"),
    ({"nodePools": ["h100-od", "h100-od"]}, "job.nodePools: 'h100-od' is listed more than once"),
    ({}, "job.nodePool: give either nodePool (one pool) or nodePools"),
    ({"nodePool": "h100", "nodePools": ["h100"]}, "job.nodePool: give either nodePool"),
    ({"nodePools": ["h100-od", "a100"]}, "job.nodePools: pools h100-od (H100 x8) and a100 (A100 x8) differ"),
    ({"nodePools": ["h100-od", "nope"]}, "job.nodePools: 'nope' is not a node pool of platform"),
]


@pytest.mark.parametrize(("change", "expected"), BAD_POOLS, ids=[b[1][:40] for b in BAD_POOLS])
def test_bad_pool_lists_are_one_line_errors(change, expected):
    a100 = h100_pool("a100", "on-demand", gpu="A100")
    problems = problems_of(job(**change), platform(*three(), a100))
    assert any(p.startswith(expected) for p in problems), problems


# ---- topology ------------------------------------------------------------------------------------


def tas_platform(**extra: Any) -> PlatformOutputs:
    # A fixed-size reserved pool: its nodes exist, so Kueue TAS can place on them (placement.tas_blocker).
    pool = h100_pool("h100-res", "reservation", minNodes=4, topologyLevels=GKE_LEVELS, **extra)
    return platform(pool)


def test_default_topology_is_preferred_at_the_tightest_level_above_the_node():
    pod = pod_of(build(job(nodePool="h100-res"), tas_platform()))
    assert pod["metadata"]["annotations"] == {PREFERRED_TOPOLOGY: "cloud.google.com/gce-topology-host"}


def test_the_topology_key_picks_level_and_mode():
    pod = pod_of(
        build(job(nodePool="h100-res", topology={"level": "block", "mode": "required"}), tas_platform())
    )
    assert pod["metadata"]["annotations"] == {REQUIRED_TOPOLOGY: "cloud.google.com/gce-topology-block"}


def test_no_topology_annotation_where_kueue_cannot_place_by_topology():
    # The spot pool autoscales from 0 without a ProvisioningRequest class: Kueue TAS sees no nodes there.
    spot = h100_pool("h100-spot2", "spot", topologyLevels=GKE_LEVELS)
    pod = pod_of(build(job(nodePool="h100-spot2", spot=True), platform(spot)))
    assert "annotations" not in pod["metadata"]


BAD_TOPOLOGY = [
    (
        {"nodePool": "h100", "spot": True, "topology": {"mode": "required"}},
        # aws-dev's p5 pool has EC2 topology labels but autoscales from 0 without a ProvisioningRequest
        "job.topology: pool h100 has no topology Kueue can place by (it scales from 0 to 4 nodes without a "
        "ProvisioningRequest class, and Kueue TAS places jobs only on nodes that exist); remove the key",
    ),
    (
        {"nodePool": "h100-res", "topology": {"level": "rack"}},
        "job.topology.level: 'rack' is not allowed; allowed: 'block', 'subblock', 'host' or 'clique'",
    ),
]


@pytest.mark.parametrize(("change", "expected"), BAD_TOPOLOGY, ids=["no-levels", "unknown-level"])
def test_bad_topology_is_a_one_line_error(change, expected):
    problems = problems_of(job(**change), tas_platform())
    assert any(p.startswith(expected) for p in problems), problems


def test_a_level_the_pool_lacks_is_refused():
    two_levels = [GKE_LEVELS[0], GKE_LEVELS[1], GKE_LEVELS[3]]
    outputs = platform(h100_pool("h100-res", "reservation", minNodes=4, topologyLevels=two_levels))
    problems = problems_of(job(nodePool="h100-res", topology={"level": "host"}), outputs)
    assert problems == [
        "job.topology.level: 'host' is not a level of pool h100-res (it has: block, subblock)"
    ]


# ---- queued provisioning ---------------------------------------------------------------------------


def test_a_queued_pool_s_workload_annotations_go_on_the_jobset():
    annotations = {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "86400"}
    queued = h100_pool(
        "h100-q", "queued", provisioningClass="queued-provisioning.gke.io", workloadAnnotations=annotations
    )
    js = build(job(nodePool="h100-q"), platform(queued))
    assert js["metadata"]["annotations"] == {**annotations, "pulumi.com/skipAwait": "true"}
    # The pool's taints are tolerated as for any pool (the backend puts GKE's queued taint there).
    assert pod_of(js)["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_a_command_replaces_the_launcher_and_keeps_pool_fabric_and_placement():
    """What `trainplane nccl-test` builds on: the job's own JobSet with another command."""
    outputs = platform(*three())
    raw = job(nodePools=["h100-res", "h100-od"])
    js = build(raw, outputs)
    spec = JobSpec.load(raw)
    nccl = training_jobset(spec, outputs, command=["all_gather_perf", "-b", "8", "-e", "8G"])
    (ours,) = pod_of(js)["spec"]["containers"]
    (theirs,) = pod_of(nccl)["spec"]["containers"]
    assert theirs["command"] == ["all_gather_perf", "-b", "8", "-e", "8G"] and "args" not in theirs
    assert {k: v for k, v in theirs.items() if k != "command"} == {
        k: v for k, v in ours.items() if k != "args"
    }
    strip = lambda p: {k: v for k, v in p["spec"].items() if k != "containers"}  # noqa: E731
    assert strip(pod_of(nccl)) == strip(pod_of(js))
