"""What the fleet takes from its platforms beyond queues: the team namespaces' owner and cost-center labels
on the manager (as platform tenancy writes them), and the API server of a worker that exports no
kubeconfig document (an existing cluster's `cluster.apiServer`)."""

from __future__ import annotations

import copy

import pytest

from components.fleet import model
from components.fleet.stack import FleetPlatforms, check_fleet_platforms
from components.outputs import PlatformOutputs
from components.spec.fleet import FleetSpec
from tests.helpers.plans import ROOT, planned

FLEET = "fleet-research"


def _spec(**changes) -> FleetSpec:
    from infra import stackfile

    raw = copy.deepcopy(stackfile.load(FLEET, ROOT).object("trainplane:fleet"))
    assert isinstance(raw, dict)
    raw.update(changes)
    return FleetSpec.load(raw)


def _outputs(stack: str, team_cost_center: str | None = None) -> PlatformOutputs:
    out = copy.deepcopy(planned(stack).outputs)
    if team_cost_center is not None:
        for t in out["teams"]:
            t["costCenter"] = team_cost_center
    return PlatformOutputs.model_validate(out)


def _workers(spec: FleetSpec, cost_centers: dict[str, str] | None = None) -> list[model.Worker]:
    cost_centers = cost_centers or {}
    return [
        model.Worker(w.name, w.platform_stack, _outputs(w.platform_stack, cost_centers.get(w.name)), i)
        for i, w in enumerate(spec.workers)
    ]


# ---- owner and cost-center labels ----------------------------------------------------------------------


def test_the_managers_team_namespace_carries_the_owner_and_cost_center_labels():
    """The policy pack's trainplane-required-tags refuses a namespace without them (as on the workers)."""
    (ns,) = [
        dict(r.inputs)
        for r in planned(FLEET).resources
        if r.is_kubernetes_object and r.inputs.get("kind") == "Namespace"
    ]
    labels = ns["metadata"]["labels"]
    assert labels["trainplane.dev/owner"] == "research"
    # The cost center the workers' platforms give the team (their `costCenter`, exported per team).
    assert labels["trainplane.dev/cost-center"] == "ml-research"


def test_a_platform_exports_each_teams_cost_center_the_teams_own_first():
    out = _outputs("aws-h100-reserved")
    assert {t.name: t.cost_center for t in out.teams} == {"research": "ml-research", "eval": "ml-research"}


def test_workers_that_disagree_on_a_teams_cost_center_are_refused_in_one_line():
    spec = _spec()
    platforms = FleetPlatforms(_outputs("aws-fleet-manager"), _workers(spec, {"lab": "lab-ops"}))
    assert check_fleet_platforms(spec, platforms) == [
        "fleet.teams[0]: team 'research' has different cost centers on the workers (aws-h100: ml-research, "
        "gcp-h100: ml-research, lab: lab-ops); set the fleet team's costCenter for its namespace on the manager"
    ]


def test_the_fleet_teams_cost_center_settles_a_disagreement_and_labels_the_namespace():
    spec = _spec(teams=[{"name": "research", "costCenter": "fleet-ops"}])
    workers = _workers(spec, {"lab": "lab-ops"})
    assert check_fleet_platforms(spec, FleetPlatforms(_outputs("aws-fleet-manager"), workers)) == []
    labels = model.team_namespace_labels(spec.teams[0], workers)
    assert labels["trainplane.dev/cost-center"] == "fleet-ops"


def test_workers_deployed_before_the_cost_center_output_leave_the_label_off_not_empty():
    """Older platforms export no costCenter per team: the label is left off (the policy pack names it)."""
    spec = _spec()
    workers = []
    for i, w in enumerate(spec.workers):
        out = copy.deepcopy(planned(w.platform_stack).outputs)
        for t in out["teams"]:
            t.pop("costCenter", None)
        workers.append(model.Worker(w.name, w.platform_stack, PlatformOutputs.model_validate(out), i))
    labels = model.team_namespace_labels(spec.teams[0], workers)
    assert "trainplane.dev/cost-center" not in labels and labels["trainplane.dev/owner"] == "research"


@pytest.mark.parametrize("bad", ["ML Research", "-x", "a" * 64])
def test_a_fleet_teams_cost_center_must_be_a_label_value(bad):
    from components.spec import ConfigError

    with pytest.raises(ConfigError, match=r"teams\[0\]\.costCenter"):
        _spec(teams=[{"name": "research", "costCenter": bad}])
