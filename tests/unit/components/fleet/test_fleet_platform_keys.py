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

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

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


# ---- the API server of an existing-cluster worker ------------------------------------------------------


def _manager_kubeconfig(worker: str) -> dict:
    import yaml

    (secret,) = [
        dict(r.inputs)
        for r in planned(FLEET).resources
        if r.is_kubernetes_object
        and r.inputs.get("kind") == "Secret"
        and r.inputs["metadata"]["name"] == f"research-fleet-{worker}-kubeconfig"
    ]
    data = secret["stringData"]
    return yaml.safe_load(data.get("kubeconfig") or data["value"]["kubeconfig"])


def test_the_manager_reaches_the_lab_worker_at_its_cluster_api_server():
    """onprem-dev is on the ambient kubeconfig (no document exported): the manager's kubeconfig for it names
    the platform's cluster.apiServer, not a placeholder the manager could never connect to."""
    assert planned("onprem-dev").outputs["apiServer"] == "https://lab-api.lab.example.internal:6443"
    kc = _manager_kubeconfig("lab")
    assert kc["clusters"][0]["cluster"]["server"] == "https://lab-api.lab.example.internal:6443"


def test_a_worker_with_a_kubeconfig_document_keeps_its_server():
    kc = _manager_kubeconfig("aws-h100")
    assert kc["clusters"][0]["cluster"]["server"] == model.cluster_server(
        planned("aws-h100-reserved").outputs["kubeconfig"]
    )


def test_a_worker_with_neither_kubeconfig_nor_api_server_is_refused_in_one_line(tmp_path):
    import shutil

    from tests.helpers.cli import cli

    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    lab = tmp_path / "stacks" / "Pulumi.onprem-dev.yaml"
    lab.write_text("".join(line for line in lab.read_text().splitlines(True) if "apiServer:" not in line))
    ran = cli("plan", FLEET, cwd=tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert (
        "fleet.workers[2]: worker 'lab' (onprem-dev) exports no kubeconfig document (it uses the ambient "
        "kubeconfig) and no API server; set cluster.apiServer (its API server's https URL) on onprem-dev, or "
        "its trainplane:kubeconfig secret"
    ) in ran.stderr.splitlines()


def test_api_server_is_a_key_of_existing_clusters_only_and_an_https_url():
    from components.spec import ConfigError, PlatformSpec

    pools = [{"name": "a100", "selector": {"gpu": "a100"}, "gpu": "A100-80GB", "gpusPerNode": 8}]
    lab = {
        "cloud": "kubernetes",
        "cluster": {"name": "lab", "apiServer": "https://10.0.0.1:6443"},
        "nodePools": pools,
    }
    assert PlatformSpec.load(lab).cluster.api_server == "https://10.0.0.1:6443"
    for url in [
        "http://lab:6443",
        "lab:6443",
        "https://user:pw@lab",
        "https://lab?x=1",
        "https://a..b:6443",
        "https://-lab:6443",
    ]:
        with pytest.raises(ConfigError, match=r"cluster\.apiServer"):
            PlatformSpec.load({**lab, "cluster": {"name": "lab", "apiServer": url}})
    from infra import stackfile

    raw = copy.deepcopy(stackfile.load("aws-fleet-manager", ROOT).object("trainplane:platform"))
    raw["cluster"]["apiServer"] = "https://x.example.com"
    with pytest.raises(ConfigError, match=r"cluster\.apiServer"):
        PlatformSpec.load(raw)
