"""verify scheduling: DaemonSets reach GPU nodes; a team's largest job lands on its pool, fits its
machine and scale-from-zero template, and Kueue, the ResourceQuota and the LimitRange admit it."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.helpers.verify_plans import edit, kind, lines, plan, release, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def _h100_group(r) -> bool:
    return r.type == NODE_GROUP and (r.inputs.get("labels") or {}).get("trainplane.dev/pool") == "h100"


def test_a_gpu_operator_daemonset_that_does_not_tolerate_the_gpu_taint_never_runs():
    def no_tolerations(inputs: dict) -> None:
        inputs["values"]["daemonsets"]["tolerations"] = []

    report = run(edit(plan("aws-dev"), release("gpu-operator"), no_tolerations), "scheduling")
    bad = [line for line in lines(report) if "nvidia-device-plugin-daemonset" in line]
    assert bad and "nvidia.com/gpu=present:NoSchedule" in bad[0] and "pool h100" in bad[0], lines(report)


def test_a_pod_whose_selector_the_pool_nodes_do_not_carry_never_schedules():
    def relabel(inputs: dict) -> None:
        inputs["labels"]["trainplane.dev/pool"] = "renamed"

    report = run(edit(plan("aws-dev"), _h100_group, relabel), "scheduling")
    assert any("verify-research-h100" in line and "never schedules" in line for line in lines(report)), lines(
        report
    )


def test_kueue_must_cover_every_resource_the_pod_requests():
    def drop_gpu(inputs: dict) -> None:
        for g in inputs["spec"]["resourceGroups"]:
            g["coveredResources"] = [r for r in g["coveredResources"] if r != "nvidia.com/gpu"]

    report = run(edit(plan("aws-dev"), kind("ClusterQueue", "research"), drop_gpu), "scheduling")
    assert any("nvidia.com/gpu" in line and "does not cover" in line for line in lines(report)), lines(report)


def test_the_team_quota_must_admit_the_teams_largest_job():
    assert not any("ResourceQuota" in line for line in lines(run(plan("aws-dev"), "scheduling")))

    def one_gpu(inputs: dict) -> None:
        inputs["spec"]["hard"]["requests.nvidia.com/gpu"] = "1"

    report = run(edit(plan("aws-dev"), kind("ResourceQuota", "team-quota"), one_gpu), "scheduling")
    assert any("requests.nvidia.com/gpu 16" in line and "allows 1" in line for line in lines(report)), lines(
        report
    )


def test_the_limit_range_must_admit_the_pod():
    def max_two(inputs: dict) -> None:
        inputs["spec"]["limits"][0]["max"] = {"nvidia.com/gpu": "2"}

    report = run(edit(plan("aws-dev"), kind("LimitRange", "team-limits"), max_two), "scheduling")
    assert any("LimitRange research/team-limits" in line for line in lines(report)), lines(report)


def test_an_efa_pool_must_get_every_efa_device_requested():
    def forty_interfaces(inputs: dict) -> None:
        nic = dict(inputs["networkInterfaces"][-1])
        inputs["networkInterfaces"] = [nic] * 40

    def efa_template(r) -> bool:
        return r.type == "aws:ec2/launchTemplate:LaunchTemplate" and bool(r.inputs.get("networkInterfaces"))

    report = run(edit(plan("aws-h200-efa"), efa_template, forty_interfaces), "scheduling")
    efa = [line for line in lines(report) if "vpc.amazonaws.com/efa" in line and "have 40" in line]
    assert efa and any("pool h200-spot" in line for line in efa), lines(report)


def test_kueue_pod_integration_gates_every_pod():
    def frameworks(names: list[str]):
        def change(inputs: dict) -> None:
            cfg = yaml.safe_load(inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
            cfg["integrations"]["frameworks"] = names
            inputs["values"]["managerConfig"]["controllerManagerConfigYaml"] = yaml.safe_dump(cfg)

        return change

    with_pod = run(edit(plan("aws-dev"), release("kueue"), frameworks(["batch/job", "pod"])), "scheduling")
    assert any("`pod` integration" in line for line in lines(with_pod))
    without = run(edit(plan("aws-dev"), release("kueue"), frameworks(["batch/job"])), "scheduling")
    assert not any("`pod` integration" in line for line in lines(without))


def test_node_repair_needs_the_node_monitoring_agent():
    p = plan("aws-dev").replaced(
        lambda r: (
            {"__drop__": True}
            if r.type == "aws:eks/addon:Addon" and r.inputs.get("addonName") == "eks-node-monitoring-agent"
            else None
        )
    )
    assert any("eks-node-monitoring-agent" in line and "h100" in line for line in lines(run(p, "scheduling")))


def test_autoscaler_needs_the_gpu_label_on_gpu_pools_and_their_template():
    def drop_label(inputs: dict) -> None:
        inputs["labels"].pop("k8s.amazonaws.com/accelerator", None)

    report = run(edit(plan("aws-dev"), _h100_group, drop_label), "scheduling")
    assert any(
        "k8s.amazonaws.com/accelerator" in line and "pool h100 nodes" in line for line in lines(report)
    )


def test_the_node_monitoring_agents_dcgm_host_engine_must_tolerate_gpu_taints():
    from tests.helpers.verify_plans import plus

    addon = {"addonName": "eks-node-monitoring-agent", "clusterName": "ml-dev"}
    base = plan("aws-dev").replaced(
        lambda r: {"__drop__": True} if r.inputs.get("addonName") == "eks-node-monitoring-agent" else None
    )

    def dcgm_lines(config: dict | None) -> list[str]:
        inputs = {**addon, **({"configurationValues": json.dumps(config)} if config is not None else {})}
        report = run(plus(base, inputs, type_="aws:eks/addon:Addon"), "scheduling")
        return [line for line in lines(report) if "dcgm-server" in line]

    assert dcgm_lines(None) and "nvidia.com/gpu" in dcgm_lines(None)[0]
    assert dcgm_lines({"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}) == []
    assert dcgm_lines({"dcgmAgent": {"enabled": False}}) == []


# ---- Kueue: flavors in fallback order, ProvisioningRequest checks, topology, JobSet pods ----------


def _with_outputs(plan_, change):
    import copy

    from infra.verify.model import build

    outputs = copy.deepcopy(dict(plan_.outputs))
    change(outputs)
    return build(plan_.stack, plan_.resources, outputs, plan_.config, plan_.platform, plan_.source)


def _two_capacities():
    from tests.helpers.plans import platform_object
    from tests.helpers.verify_plans import plan_of

    obj = platform_object("aws-dev")
    obj["nodePools"].append({"name": "h100od", "gpu": "H100", "gpusPerNode": 8, "maxNodes": 2})
    return plan_of(obj, "aws-two")


def test_a_queue_must_list_its_flavors_in_the_fallback_order_and_cover_every_pool():
    two = _two_capacities()
    assert not [line for line in lines(run(two, "scheduling")) if "ClusterQueue" in line], lines(
        run(two, "scheduling")
    )

    def reverse(inputs: dict) -> None:
        for g in inputs["spec"]["resourceGroups"]:
            g["flavors"].reverse()

    report = run(edit(two, kind("ClusterQueue", "research"), reverse), "scheduling")
    assert any("out of the fallback order" in line and "h100-spot" in line for line in lines(report)), lines(
        report
    )

    def only_spot(inputs: dict) -> None:
        for g in inputs["spec"]["resourceGroups"]:
            g["flavors"] = [f for f in g["flavors"] if f["name"] == "h100-spot"]

    report = run(edit(two, kind("ClusterQueue", "research"), only_spot), "scheduling")
    assert any("GPU pool h100od has no flavor" in line for line in lines(report)), lines(report)


def test_the_checks_read_an_older_platforms_outputs_through_their_typed_contract():
    # A platform deployed before its pools exported `capacity`: PlatformOutputs gives the key's default
    # (on-demand), as a job stack reading the platform does, so the queue's fallback order (on-demand before
    # spot) is right; a check reading the dict would see no capacity and rank the pool last.
    def older(outputs: dict) -> None:
        for pool in outputs["nodePools"]:
            if pool["name"] == "h100od":
                del pool["capacity"]

    two = _with_outputs(_two_capacities(), older)
    assert two.platform_outputs is not None and "capacity" not in two.outputs["nodePools"][-1]
    pool = two.platform_outputs.pool("h100od")
    assert pool is not None and (pool.capacity, pool.gpus_per_node) == ("on-demand", 8)
    assert [p.capacity for p in two.node_pools if p.gpu] == ["spot", "on-demand"]
    assert not [line for line in lines(run(two, "scheduling")) if "fallback order" in line], lines(
        run(two, "scheduling")
    )


def test_a_platform_plan_whose_outputs_are_not_platform_outputs_is_refused_by_key():
    from infra.verify.model import PlanError

    def no_cluster_name(outputs: dict) -> None:
        del outputs["clusterName"]

    with pytest.raises(PlanError, match=r"^stack aws-dev: outputs.clusterName: .*platform stack's outputs"):
        _with_outputs(plan("aws-dev"), no_cluster_name)


def test_a_queued_pool_needs_its_provisioning_request_check():
    def queued(outputs: dict) -> None:
        pool = next(p for p in outputs["nodePools"] if p["name"] == "h100")
        pool["provisioningClass"] = "queued-provisioning.gke.io"

    report = run(_with_outputs(plan("aws-dev"), queued), "scheduling")
    assert any(
        "ProvisioningRequest class queued-provisioning.gke.io" in line and "never requested" in line
        for line in lines(report)
    ), lines(report)


def test_a_provisioning_check_on_a_pool_without_a_class_is_refused():
    from tests.helpers.verify_plans import plus

    api = "kueue.x-k8s.io/v1beta2"
    config = {
        "apiVersion": api,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "provreq"},
        "spec": {
            "provisioningClassName": "queued-provisioning.gke.io",
            "managedResources": ["nvidia.com/gpu"],
        },
    }
    check = {
        "apiVersion": api,
        "kind": "AdmissionCheck",
        "metadata": {"name": "provreq"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": "provreq",
            },
        },
    }

    def strategy(inputs: dict) -> None:
        inputs["spec"]["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": "provreq", "onFlavors": ["h100-spot"]}]
        }

    broken = edit(plus(plan("aws-dev"), config, check), kind("ClusterQueue", "research"), strategy)
    report = run(broken, "scheduling")
    assert any("which has no ProvisioningRequest class" in line for line in lines(report)), lines(report)


def test_a_pods_topology_level_must_exist_on_its_pools_nodes_and_flavor():
    # onprem-dev's a100 pool has topologyLevels (rack, hostname): its jobs ask for the rack level.
    assert not [line for line in lines(run(plan("onprem-dev"), "scheduling")) if "topology" in line]

    def no_rack(inputs: dict) -> None:
        inputs["spec"]["levels"] = [{"nodeLabel": "kubernetes.io/hostname"}]

    report = run(edit(plan("onprem-dev"), kind("Topology"), no_rack), "scheduling")
    assert any(
        "lab.example.com/rack" in line and "Kueue never admits it there" in line for line in lines(report)
    ), lines(report)

    def other_labels(outputs: dict) -> None:
        outputs["nodePools"][0]["topologyLevels"] = ["example.com/zone", "kubernetes.io/hostname"]

    # The job is made from the platform's outputs, so its level follows them; the Topology does not.
    report = run(_with_outputs(plan("onprem-dev"), other_labels), "scheduling")
    assert any("example.com/zone" in line for line in lines(report)), lines(report)
