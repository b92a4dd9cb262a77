"""verify scheduling, the controllers' side (issue 18): each rule planted in a recorded plan and named in the
finding; the clean reference stacks pass (test_verify_stacks.py)."""

from __future__ import annotations

import copy
import functools

import pytest
import yaml

from infra.verify.jobs import job_config, run_job
from infra.verify.model import Plan
from tests.helpers.verify_plans import edit, kind, lines, plan, release, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

RESERVED = "aws-h100-reserved"


def scheduling(plan_: Plan) -> list[str]:
    return [line for line in lines(run(plan_, "scheduling")) if line.startswith("scheduling")]


def _kueue_config(change):
    def apply(inputs: dict) -> None:
        config = yaml.safe_load(inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
        change(config)
        inputs["values"]["managerConfig"]["controllerManagerConfigYaml"] = yaml.safe_dump(config)

    return apply


def test_the_clean_plans_have_no_controller_findings():
    for stack in ("aws-dev", RESERVED):
        assert scheduling(plan(stack)) == [], stack


# ---- quota per flavor, missing flavors ---------------------------------------------------------------


def test_nominal_quotas_past_a_flavors_gpus_fail():
    """The quotas the old split gave aws-h100-reserved's Capacity Block: 32 + 16 = 48 on 32 GPUs."""

    def old_split(team_quota: int):
        def apply(inputs: dict) -> None:
            for fl in inputs["spec"]["resourceGroups"][0]["flavors"]:
                if fl["name"] == "h100-capacity-block":
                    gpu = next(r for r in fl["resources"] if r["name"] == "nvidia.com/gpu")
                    gpu["nominalQuota"] = str(team_quota)

        return apply

    broken = edit(plan(RESERVED), kind("ClusterQueue", "research"), old_split(32))
    broken = edit(broken, kind("ClusterQueue", "eval"), old_split(16))
    found = [line for line in scheduling(broken) if "ResourceFlavor h100-capacity-block" in line]
    assert found and "add up to 48 (eval 16, research 32)" in found[0], scheduling(broken)
    assert "its pools have 32 GPUs (h100-block 4 x 8)" in found[0]


def test_a_queue_naming_a_flavor_the_plan_lacks_fails():
    broken = plan("aws-dev").replaced(lambda r: {"__drop__": True} if kind("ResourceFlavor")(r) else None)
    found = [line for line in scheduling(broken) if "FlavorNotFound" in line]
    assert found and "ClusterQueue research names ResourceFlavor h100-spot" in found[0], scheduling(broken)


# ---- the JobSet runtime and Kueue's configuration ----------------------------------------------------


def test_no_jobset_controller_fails():
    broken = plan("aws-dev").replaced(lambda r: {"__drop__": True} if release("/jobset")(r) else None)
    assert any("no JobSet controller release" in line for line in scheduling(broken)), scheduling(broken)


def test_kueue_without_its_jobset_integration_fails():
    def batch_only(config: dict) -> None:
        config["integrations"]["frameworks"] = ["batch/job"]

    broken = edit(plan("aws-dev"), release("/kueue"), _kueue_config(batch_only))
    assert any("jobset.x-k8s.io/jobset integration" in line for line in scheduling(broken)), scheduling(
        broken
    )


def test_a_managed_jobs_selector_that_misses_a_team_namespace_fails():
    def other_label(config: dict) -> None:
        config["managedJobsNamespaceSelector"] = {"matchLabels": {"example.com/kueue": "on"}}

    broken = edit(plan("aws-dev"), release("/kueue"), _kueue_config(other_label))
    found = [line for line in scheduling(broken) if "managedJobsNamespaceSelector" in line]
    assert found and "team namespace research" in found[0], scheduling(broken)


def test_pods_ready_timeouts_under_the_floor_fail():
    def old_timing(config: dict) -> None:
        config["waitForPodsReady"]["timeout"] = "10m"
        config["waitForPodsReady"]["recoveryTimeout"] = "3m"

    broken = edit(plan("aws-dev"), release("/kueue"), _kueue_config(old_timing))
    assert any("waitForPodsReady.timeout 10m is under 30m" in line for line in scheduling(broken))

    def short_recovery(config: dict) -> None:
        config["waitForPodsReady"]["recoveryTimeout"] = "3m"

    broken = edit(plan("aws-dev"), release("/kueue"), _kueue_config(short_recovery))
    assert any("recoveryTimeout 3m is shorter than the timeout 30m" in line for line in scheduling(broken))

    def none(config: dict) -> None:
        del config["waitForPodsReady"]

    broken = edit(plan("aws-dev"), release("/kueue"), _kueue_config(none))
    assert any("has no waitForPodsReady" in line for line in scheduling(broken))


@functools.cache
def _job(elastic: bool) -> Plan:
    platform = plan("aws-dev")
    team = platform.teams[0]
    pool = next(p for p in platform.node_pools if p.gpu)
    cfg = job_config(platform, team, pool)
    assert cfg is not None
    if elastic:
        cfg = copy.deepcopy(cfg)
        cfg["nodes"] = {"min": 1, "max": cfg["nodes"]["max"]}
    return run_job(platform, cfg)


def test_clean_jobs_have_no_runtime_findings():
    assert scheduling(_job(False)) == []
    assert scheduling(_job(True)) == []


def test_a_jobset_without_its_queue_label_fails():
    def unlabel(inputs: dict) -> None:
        del inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]

    found = scheduling(edit(_job(False), kind("JobSet"), unlabel))
    assert any("has no kueue.x-k8s.io/queue-name label" in line for line in found), found


def test_a_jobset_without_its_failure_policies_fails():
    def no_policy(inputs: dict) -> None:
        del inputs["spec"]["failurePolicy"]

    found = scheduling(edit(_job(False), kind("JobSet"), no_policy))
    assert any("has no failurePolicy: JobSet fails the whole job" in line for line in found), found

    def no_rules(inputs: dict) -> None:
        del inputs["spec"]["failurePolicy"]["rules"]

    found = scheduling(edit(_job(False), kind("JobSet"), no_rules))
    assert any("has no failurePolicy rules" in line for line in found), found

    def no_pod_policy(inputs: dict) -> None:
        del inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]

    found = scheduling(edit(_job(False), kind("JobSet"), no_pod_policy))
    assert any("has no podFailurePolicy" in line for line in found), found


def test_an_elastic_job_whose_completions_stay_at_the_maximum_fails():
    def old_annotations(inputs: dict) -> None:
        del inputs["metadata"]["annotations"]["kueue.x-k8s.io/job-completions-equal-parallelism"]

    found = scheduling(edit(_job(True), kind("Job"), old_annotations))
    assert any("leaves completions at 2" in line for line in found), found


# ---- Capacity Block window, queued provisioning ------------------------------------------------------


def test_a_capacity_block_flavor_without_its_window_controller_fails():
    def drop(r):
        name = (r.inputs.get("metadata") or {}).get("name")
        return {"__drop__": True} if kind("Deployment")(r) and name == "trainplane-block-window" else None

    found = scheduling(plan(RESERVED).replaced(drop))
    assert any(
        "GPU pool h100-block is a Capacity Block but nothing limits flavor h100-capacity-block" in line
        for line in found
    ), found


def test_queued_provisioning_without_the_per_request_node_selector_fails():
    def isolation_off(inputs: dict) -> None:
        del inputs["spec"]["podSetUpdates"]

    clean = plan("gcp-h100-dws")
    assert not [line for line in scheduling(clean) if "podSetUpdates" in line]
    found = scheduling(edit(clean, kind("ProvisioningRequestConfig"), isolation_off))
    assert any(
        "no podSetUpdates nodeSelector autoscaling.gke.io/provisioning-request from ResizeRequestName" in line
        for line in found
    ), found


def test_a_job_past_its_share_is_admitted_only_through_what_it_may_borrow():
    """eval's largest job on the 32-GPU block needs 16 GPUs: its share is 6, the other 10 it borrows from
    research's idle share (borrowingLimit 10). Without borrowing it never fits there."""

    def no_borrowing(inputs: dict) -> None:
        for fl in inputs["spec"]["resourceGroups"][0]["flavors"]:
            for r in fl["resources"]:
                r["borrowingLimit"] = "0"

    found = scheduling(edit(plan(RESERVED), kind("ClusterQueue", "eval"), no_borrowing))
    assert any(
        "flavor h100-capacity-block of ClusterQueue eval has a nominal quota of 6 and can borrow up to 6 in all"
        in line
        for line in found
    ), found
