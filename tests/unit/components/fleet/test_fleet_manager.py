"""A fleet's MultiKueue manager: a platform with `queueing.fleetManager` (components/spec/platform.py)."""

from __future__ import annotations

import pytest
import yaml

from components.spec import ConfigError, PlatformSpec
from tests.helpers.plans import plan_object, planned, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _problems(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        PlatformSpec.load(raw)
    return info.value.problems


def _manager_config(result) -> dict:
    (release,) = [
        r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"].endswith("/kueue")
    ]
    return yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_the_reference_manager_is_a_manager_without_teams():
    spec = PlatformSpec.load(platform_object("aws-fleet-manager"))
    assert spec.queueing.fleet_manager and not spec.teams and not spec.gpu_pools()


def test_a_manager_with_teams_is_refused_in_one_line():
    raw = platform_object("aws-fleet-manager")
    raw["teams"] = [{"name": "research", "gpuQuota": 0}]
    assert _problems(raw) == [
        "platform.teams: a fleet manager (queueing.fleetManager) has no teams of its own (research); "
        "the fleet stack mirrors the workers' teams on it"
    ]


def test_a_manager_without_kueue_is_refused():
    raw = platform_object("aws-fleet-manager")
    raw["queueing"]["enabled"] = False
    assert _problems(raw) == [
        "platform.queueing.fleetManager: needs queueing.enabled (MultiKueue runs inside Kueue)"
    ]


def test_a_dispatcher_on_a_platform_that_is_no_manager_is_refused():
    raw = platform_object("aws-dev")
    raw["queueing"] = {"fleetDispatcher": "AllAtOnce"}
    assert _problems(raw) == [
        "platform.queueing.fleetDispatcher: only for a fleet manager (set queueing.fleetManager: true)"
    ]


def test_the_manager_kueue_runs_multikueue_with_the_incremental_dispatcher():
    config = _manager_config(planned("aws-fleet-manager"))
    # kueue v0.19.2 apis/config/v1beta2/configuration_types.go MultiKueueDispatcherModeIncremental; Kueue's
    # own default would be all-at-once (defaults.go), so a missing name would change the dispatch.
    assert config["multiKueue"] == {
        "gcInterval": "1m",
        "origin": "multikueue",
        "workerLostTimeout": "15m",
        "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
        "incrementalDispatcherConfig": {"stepSize": 1},
    }


def test_all_at_once_is_written_as_kueue_names_it():
    raw = platform_object("aws-fleet-manager")
    raw["queueing"]["fleetDispatcher"] = "AllAtOnce"
    config = _manager_config(plan_object(raw))
    assert config["multiKueue"]["dispatcherName"] == "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"


def test_a_worker_platform_has_no_multikueue_block():
    assert "multiKueue" not in _manager_config(planned("aws-h100-reserved"))


def test_verify_passes_the_manager_that_runs_no_training_pod():
    """The trainer's scrape comes from a job's PodMonitor; a manager has no team, so no job pod: the trainer
    dashboards' metrics are a note there, not 'nothing in the plan scrapes trainer' failures."""
    from infra.verify import verify_stack

    report = verify_stack("aws-fleet-manager")
    assert report.ok, [f.message for f in report.findings][:3]
    assert any("no training pod on this platform" in n for n in report.check("observability").notes)


def test_the_incremental_dispatcher_asks_one_worker_at_a_time_in_the_fleets_order():
    """Kueue's default stepSize 3 (kueue v0.19.2 workloaddispatcher/incrementaldispatcher.go DefaultStepSize)
    nominates every worker of a fleet of 3 at once, so 'reserved first' would not happen; stepSize 1
    (apis/config/v1beta2/configuration_types.go IncrementalDispatcherConfig) asks them in order."""
    config = _manager_config(planned("aws-fleet-manager"))
    assert config["multiKueue"]["incrementalDispatcherConfig"] == {"stepSize": 1}
    raw = platform_object("aws-fleet-manager")
    raw["queueing"]["fleetDispatcher"] = "AllAtOnce"
    assert "incrementalDispatcherConfig" not in _manager_config(plan_object(raw))["multiKueue"]


def test_a_manager_does_not_block_admission_behind_one_job_unless_asked():
    """blockAdmission on a manager would hold every team's jobs behind one job no worker admits (kueue
    v0.19.2 apis/config/v1beta2/configuration_types.go WaitForPodsReady.BlockAdmission)."""
    assert _manager_config(planned("aws-fleet-manager"))["waitForPodsReady"]["blockAdmission"] is False
    assert _manager_config(planned("aws-h100-reserved"))["waitForPodsReady"]["blockAdmission"] is True
    raw = platform_object("aws-fleet-manager")
    raw["queueing"]["podsReady"] = {"blockAdmission": True}
    assert _manager_config(plan_object(raw))["waitForPodsReady"]["blockAdmission"] is True
    raw = platform_object("aws-h100-reserved")
    raw["queueing"] = {**raw.get("queueing", {}), "podsReady": {"blockAdmission": False}}
    assert _manager_config(plan_object(raw))["waitForPodsReady"]["blockAdmission"] is False
