"""The fleet stack (`trainplane:fleet`, components/fleet): summed quotas, dispatch order, the worker token and
the kubeconfig the manager reads, the objects on the manager and the workers, and `trainplane plan FLEET`."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from components.fleet import model
from components.outputs import PlatformOutputs
from components.spec.fleet import FleetSpec
from tests.helpers import procs
from tests.helpers.plans import FLEET_STACKS, ROOT, planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

FLEET = "fleet-research"


def _spec(**changes) -> FleetSpec:
    from infra import stackfile

    raw = copy.deepcopy(stackfile.load(FLEET, ROOT).object("trainplane:fleet"))
    assert isinstance(raw, dict)
    raw.update(changes)
    return FleetSpec.load(raw)


def _outputs(stack: str) -> PlatformOutputs:
    return PlatformOutputs.model_validate(planned(stack).outputs)


def _workers(spec: FleetSpec) -> list[model.Worker]:
    return [
        model.Worker(w.name, w.platform_stack, _outputs(w.platform_stack), i)
        for i, w in enumerate(spec.workers)
    ]


def test_a_manager_with_teams_of_its_own_is_refused_by_the_fleet():
    from components.fleet.stack import FleetPlatforms, check_fleet_platforms

    spec = _spec()
    manager = _outputs("aws-h100-reserved")  # a platform with teams, named as the manager
    assert check_fleet_platforms(spec, FleetPlatforms(manager, _workers(spec))) == [
        "fleet.manager.platformStack: 'aws-fleet-manager' has teams (research, eval); a fleet manager sets "
        "queueing.fleetManager and has none"
    ]


def _objects(kind: str) -> list[dict]:
    return [
        dict(r.inputs)
        for r in planned(FLEET).resources
        if r.is_kubernetes_object and r.inputs.get("kind") == kind
    ]


# ---- summed quota ------------------------------------------------------------------------------------


def test_a_teams_fleet_quota_is_the_sum_of_what_it_can_hold_on_each_worker():
    spec = _spec()
    workers = _workers(spec)
    # research: 64 GPUs on aws-h100-reserved (its ResourceQuota caps the 91 its four flavors' shares sum
    # to), 128 on gcp-h100-dws, 16 on onprem-dev.
    per_worker = [model.worker_team_quota(w.platform, "research").gpus for w in workers]
    assert per_worker == [64, 128, 16]
    total = model.fleet_team_quota(workers, "research")
    assert total.gpus == 208
    assert total.cpu == sum(model.worker_team_quota(w.platform, "research").cpu for w in workers)
    (cq,) = _objects("ClusterQueue")
    # Per manager flavor (components/fleet/tas.py): the plain one holds what the workers' flavors without a
    # Topology hold (aws 64 + gcp 128), the lab's topology-aware one the lab's 16; summed, the total.
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    per_flavor = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in flavors}
    assert [(n, q["nvidia.com/gpu"]) for n, q in per_flavor.items()] == [
        ("research-fleet", "192"),
        ("research-fleet-topology-06c1f212", "16"),
    ]
    plain, lab = per_flavor.values()
    assert int(plain["cpu"]) + int(lab["cpu"]) == total.cpu
    assert int(plain["memory"][:-2]) + int(lab["memory"][:-2]) == total.memory_gib
    # The AWS worker's EFA devices are covered, or Kueue would not admit a job that requests them.
    assert plain["vpc.amazonaws.com/efa"] == str(dict(total.extended)["vpc.amazonaws.com/efa"])
    assert lab["vpc.amazonaws.com/efa"] == "0"


def test_a_worker_without_the_team_adds_nothing_and_a_larger_quota_adds_more():
    aws = _outputs("aws-h100-reserved")
    assert model.worker_team_quota(aws, "nobody") == model.TeamQuota()
    teams = [t.model_copy(update={"gpu_quota": 112}) if t.name == "research" else t for t in aws.teams]
    bigger = aws.model_copy(update={"teams": teams})
    assert model.worker_team_quota(bigger, "research").gpus > model.worker_team_quota(aws, "research").gpus


# ---- dispatch order ----------------------------------------------------------------------------------


def _worker(name: str, cloud: str, capacities: list[str], index: int) -> model.Worker:
    pools = [
        {"name": f"p{i}", "gpu": "H100", "gpusPerNode": 8, "capacity": c, "maxNodes": 1}
        for i, c in enumerate(capacities)
    ]
    out = PlatformOutputs.model_validate({"cloud": cloud, "clusterName": name, "nodePools": pools})
    return model.Worker(name, name, out, index)


def test_capacity_order_puts_reserved_first_then_on_demand_then_dws_then_spot():
    spec = _spec()
    workers = [
        _worker("spot", "gcp", ["spot"], 0),
        _worker("dws", "gcp", ["flex-start", "spot"], 1),
        _worker("od", "gcp", ["on-demand"], 2),
        _worker("block", "gcp", ["spot", "capacity-block"], 3),
    ]
    assert [w.name for w in model.dispatch_order(spec, workers, "gcp")] == ["block", "od", "dws", "spot"]


def test_capacity_ties_keep_the_managers_cloud_first_then_the_list_order():
    spec = _spec()
    workers = [
        _worker("gcp-a", "gcp", ["on-demand"], 0),
        _worker("aws-a", "aws", ["on-demand"], 1),
        _worker("gcp-b", "gcp", ["on-demand"], 2),
        _worker("aws-b", "aws", ["on-demand"], 3),
    ]
    assert [w.name for w in model.dispatch_order(spec, workers, "aws")] == [
        "aws-a",
        "aws-b",
        "gcp-a",
        "gcp-b",
    ]


def test_list_order_is_the_order_written():
    spec = _spec(dispatch={"order": "list"})
    workers = [_worker("spot", "aws", ["spot"], 0), _worker("block", "aws", ["capacity-block"], 1)]
    assert [w.name for w in model.dispatch_order(spec, workers, "aws")] == ["spot", "block"]


def test_the_multikueue_config_lists_the_reference_workers_in_dispatch_order():
    (config,) = _objects("MultiKueueConfig")
    # aws-h100 (Capacity Block, the manager's cloud), gcp-h100 (reservation, another cloud), lab (on-demand).
    assert config["spec"]["clusters"] == ["aws-h100", "gcp-h100", "lab"]
    workers = planned(FLEET).outputs["workers"]
    assert [(w["name"], w["order"]) for w in workers] == [("aws-h100", 0), ("gcp-h100", 1), ("lab", 2)]


# ---- worker token and its rotation -------------------------------------------------------------------


def test_the_token_secret_is_renamed_by_each_rotation_and_keeps_its_urn(plan_stack):
    from infra import stackfile

    assert model.token_secret(_spec()) == "multikueue-research-fleet-2026-11"
    assert model.token_secret(_spec(tokens={"rotation": "2026-12"})) == "multikueue-research-fleet-2026-12"
    sf = stackfile.load(FLEET, ROOT)
    raw = json.loads(sf.config["trainplane:fleet"])
    raw["tokens"]["rotation"] = "2026-12"
    from infra.mockcloud import run_program

    refs = {p: planned(p).outputs for p in FLEET_STACKS[FLEET]}
    rotated = run_program({"trainplane:fleet": json.dumps(raw)}, FLEET, refs)

    def tokens(result) -> dict[str, str]:
        return {
            r.urn: r.inputs["metadata"]["name"]
            for r in result.resources
            if r.is_kubernetes_object and r.inputs.get("type") == "kubernetes.io/service-account-token"
        }

    before, after = tokens(planned(FLEET)), tokens(rotated)
    # Same resources (URNs): the engine replaces each, new Secret (new token) first, then deletes the old.
    assert before.keys() == after.keys() and len(before) == 3
    assert set(before.values()) == {"multikueue-research-fleet-2026-11"}
    assert set(after.values()) == {"multikueue-research-fleet-2026-12"}


def test_the_token_secret_is_bound_to_the_service_account_the_cluster_role_grants():
    secrets = [s for s in _objects("Secret") if s.get("type") == "kubernetes.io/service-account-token"]
    assert {s["metadata"]["annotations"]["kubernetes.io/service-account.name"] for s in secrets} == {
        "multikueue-research-fleet"
    }
    bindings = _objects("ClusterRoleBinding")
    assert {b["subjects"][0]["name"] for b in bindings} == {"multikueue-research-fleet"}
    assert {b["subjects"][0]["namespace"] for b in bindings} == {"kueue-system"}


# ---- the kubeconfig the manager reads ----------------------------------------------------------------


def _forbidden_in_kubeconfig(doc: str) -> list[str]:
    """What Kueue v0.19.2 refuses (multikueuecluster.go validateKubeconfig / validateRestConfig)."""
    kc = yaml.safe_load(doc)
    found = []
    for u in kc.get("users") or []:
        user = u.get("user") or {}
        found += [k for k in ("exec", "tokenFile", "auth-provider") if k in user]
    for c in kc.get("clusters") or []:
        cluster = c.get("cluster") or {}
        found += [k for k in ("certificate-authority", "insecure-skip-tls-verify") if k in cluster]
        if not cluster.get("server"):
            found.append("no server")
    return found


def test_the_checker_finds_what_kueue_refuses():
    """The check below must be able to fail: the GKE kubeconfig the platform exports (exec plugin) fails it."""
    gke = planned("gcp-h100-dws").outputs["kubeconfig"]
    assert "exec" in _forbidden_in_kubeconfig(gke)
    assert _forbidden_in_kubeconfig(
        "clusters: [{name: a, cluster: {server: https://x, certificate-authority: /etc/ca.crt}}]\n"
        "users: [{name: u, user: {tokenFile: /var/run/token}}]\n"
    ) == ["tokenFile", "certificate-authority"]


def test_the_workers_kubeconfig_has_the_server_the_inline_ca_and_the_token_and_nothing_kueue_refuses():
    import base64

    data = {"token": base64.b64encode(b"tok-123").decode(), "ca.crt": "Q0EtREFUQQ=="}
    server = model.cluster_server(planned("aws-h100-reserved").outputs["kubeconfig"])
    assert server and server.startswith("https://")
    doc = model.kubeconfig_from_token_secret("aws-h100", server, data)
    assert _forbidden_in_kubeconfig(doc) == []
    kc = yaml.safe_load(doc)
    assert kc["clusters"][0]["cluster"] == {"server": server, "certificate-authority-data": "Q0EtREFUQQ=="}
    assert kc["users"][0]["user"] == {"token": "tok-123"}


def test_every_kubeconfig_secret_on_the_manager_is_one_kueue_accepts():
    from infra.mockcloud import OFFLINE_TOKEN

    secrets = [s for s in _objects("Secret") if "stringData" in s]
    assert len(secrets) == 3
    for s in secrets:
        assert s["metadata"]["namespace"] == "kueue-system"
        string_data = s["stringData"]
        doc = string_data.get("kubeconfig") or string_data["value"]["kubeconfig"]  # a secret Output's wrapper
        assert _forbidden_in_kubeconfig(doc) == [], s["metadata"]["name"]
        # The token the worker's token controller wrote into its Secret (the mock engine's, offline).
        assert yaml.safe_load(doc)["users"][0]["user"]["token"] == OFFLINE_TOKEN


# ---- manager objects ---------------------------------------------------------------------------------


def test_the_manager_queues_use_the_workers_names_and_the_multikueue_check():
    (lq,) = _objects("LocalQueue")
    assert (lq["metadata"]["name"], lq["metadata"]["namespace"]) == ("research-gpus", "research")
    (check,) = _objects("AdmissionCheck")
    assert check["spec"] == {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "research-fleet"},
    }
    (cq,) = _objects("ClusterQueue")
    assert cq["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "research-fleet-multikueue"}]
    }
    clusters = _objects("MultiKueueCluster")
    assert {c["spec"]["clusterSource"]["kubeConfig"]["location"] for c in clusters} == {
        f"research-fleet-{w}-kubeconfig" for w in ("aws-h100", "gcp-h100", "lab")
    }
    (ns,) = _objects("Namespace")
    assert ns["metadata"]["labels"]["trainplane.dev/team"] == "research"


def test_the_manager_has_the_workers_topology_and_a_topology_aware_flavor_for_their_tas_jobs():
    """A job on the lab worker's pools carries kueue.x-k8s.io/podset-preferred-topology; the manager admits
    it only on a flavor with topologyName whose Topology has the level (kueue v0.19.2
    pkg/scheduler/flavorassigner/tas_flavorassigner.go), as Kueue's MultiKueue + TAS example sets it up
    (site/static/examples/multikueue/tas/manager-setup.yaml)."""
    lab = {o.name: dict(o.spec) for o in _plan("onprem-dev").objects("Topology")}
    assert {t["metadata"]["name"]: t["spec"] for t in _objects("Topology")} == lab
    flavors = {f["metadata"]["name"]: f["spec"] for f in _objects("ResourceFlavor")}
    assert flavors == {
        "research-fleet": {},
        "research-fleet-topology-06c1f212": {
            "nodeLabels": {"trainplane.dev/fleet-topology": "topology-06c1f212"},
            "topologyName": "topology-06c1f212",
        },
    }
    # The plain flavor keeps its resource name (URN).
    names = {r.name for r in planned(FLEET).resources if r.inputs.get("kind") == "ResourceFlavor"}
    assert names == {"research-fleet-flavor", "research-fleet-flavor-topology-06c1f212"}


@pytest.mark.integration  # starts a process (tests/helpers/tiers.py)
def test_the_fleets_kueue_objects_are_valid_against_kueues_crds(tmp_path):
    import sys

    checker = ROOT.parent / "shared" / "checks" / "crd_validate.py"
    paths = []
    for r in planned(FLEET).resources:
        if r.is_kubernetes_object and str(r.inputs.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
            path = tmp_path / f"{len(paths)}.json"
            path.write_text(json.dumps(dict(r.inputs)))
            paths.append(str(path))
    assert len(paths) >= 9
    got = procs.run([sys.executable, str(checker), *paths], capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr


def _plan(stack: str):
    from infra.verify.model import from_run

    return from_run(planned(stack))


def test_a_fleet_team_missing_on_a_worker_is_refused_in_one_line():
    from components.fleet.stack import FleetPlatforms, check_fleet_platforms

    spec = _spec(teams=[{"name": "research"}, {"name": "eval"}])
    platforms = FleetPlatforms(_outputs("aws-fleet-manager"), _workers(spec))
    assert check_fleet_platforms(spec, platforms) == [
        "fleet.teams[1]: team 'eval' is not a team of worker 'lab' (onprem-dev; its teams: research); "
        "MultiKueue creates the job in that team's namespace and LocalQueue there"
    ]


# ---- trainplane plan FLEET ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet_plan():
    from infra.stacks import plan_stack

    return plan_stack(FLEET)[1]


def test_plan_shows_workers_with_cloud_and_capacity_in_dispatch_order(fleet_plan):
    doc = fleet_plan.as_json()["fleet"]
    assert [(w["name"], w["cloud"], w["capacity"]) for w in doc["workers"]] == [
        ("aws-h100", "aws", "capacity-block"),
        ("gcp-h100", "gcp", "reservation"),
        ("lab", "kubernetes", "on-demand"),
    ]
    assert doc["teams"][0]["gpus"] == 208 and doc["teams"][0]["perWorker"] == {
        "aws-h100": 64,
        "gcp-h100": 128,
        "lab": 16,
    }


def test_plan_costs_the_fleet_from_each_platforms_plan_cost(fleet_plan):
    from components.spec import PlatformSpec
    from infra.plan_cost import estimate_cost
    from tests.helpers.plans import platform_object

    doc = fleet_plan.as_json()["fleet"]
    lo = sum(
        estimate_cost(PlatformSpec.load(platform_object(s))).min_hourly or 0 for s in FLEET_STACKS[FLEET]
    )
    assert doc["monthly"]["min"] == round(round(lo, 2) * 730, 2)
    assert doc["unpriced"] == ["lab"]


def test_a_manager_that_is_not_a_fleet_manager_is_refused(tmp_path):
    from infra.stacks import UsageError, plan_stack

    text = (
        (ROOT / "stacks" / f"Pulumi.{FLEET}.yaml")
        .read_text()
        .replace("platformStack: aws-fleet-manager", "platformStack: aws-dev")
    )
    path = tmp_path / "Pulumi.bad-fleet.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        plan_stack(str(path))
    assert info.value.lines == [
        f"{path}: fleet.manager.platformStack: 'aws-dev' is not a fleet manager; set queueing.fleetManager: "
        "true in its platform (Kueue then runs MultiKueue)"
    ]


# ---- docs/fleet.md -----------------------------------------------------------------------------------


def _yaml_blocks() -> list[dict]:
    import re

    text = (ROOT / "docs" / "fleet.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return [yaml.safe_load("\n".join(line.removeprefix("   ") for line in b.splitlines())) for b in blocks]


def test_the_first_fleet_snippets_are_the_reference_stacks():
    from infra import stackfile

    manager, fleet = _yaml_blocks()
    assert manager["config"]["trainplane:platform"] == stackfile.load("aws-fleet-manager", ROOT).object(
        "trainplane:platform"
    )
    assert FleetSpec.load(fleet["config"]["trainplane:fleet"]) == _spec()


def test_every_fleet_key_is_in_the_docs_table():
    from components.spec import Spec

    text = (ROOT / "docs" / "fleet.md").read_text()

    def keys(model: type[Spec], prefix: str = "") -> list[str]:
        out = []
        for name, f in model.model_fields.items():
            key = prefix + (f.alias or name)
            t = f.annotation
            is_list = bool(getattr(t, "__args__", None))
            inner = t.__args__[0] if is_list else t  # type: ignore[union-attr]
            nested = isinstance(inner, type) and issubclass(inner, Spec)
            if is_list or not nested:  # a nested object's own keys are its rows
                out.append(key)
            if nested:
                out += keys(inner, key + ("[]." if is_list else "."))
        return out

    missing = [k for k in keys(FleetSpec) if f"| `{k}` |" not in text]
    assert missing == []


def test_an_existing_cluster_worker_on_the_ambient_kubeconfig_is_reached_with_its_context():
    """onprem-dev exports `(ambient kubeconfig, context lab-admin)`, not a kubeconfig: handed to the provider
    as one, every object on the lab worker would fail to apply."""
    (lab,) = [r for r in planned(FLEET).resources if r.name == "research-fleet-lab-cluster"]
    assert lab.inputs.get("context") == "lab-admin" and "kubeconfig" not in lab.inputs
    (aws,) = [r for r in planned(FLEET).resources if r.name == "research-fleet-aws-h100-cluster"]
    assert "clusters" in str(aws.inputs.get("kubeconfig"))


def test_plan_says_where_the_ambient_worker_is_reached(fleet_plan):
    assert fleet_plan.notes == [
        "worker lab: onprem-dev is on the ambient kubeconfig (context lab-admin): deploy the fleet where that "
        "context reaches it; the manager reaches it at https://lab-api.lab.example.internal:6443 (its "
        "cluster.apiServer)"
    ]


@pytest.mark.parametrize("stack", [FLEET, "aws-fleet-manager"])
def test_verify_of_the_new_stacks_answers_without_a_traceback(stack):
    from tests.helpers.cli import cli

    ran = cli("verify", stack, cached=True)
    assert ran.returncode in (0, 1, 2) and "Traceback" not in ran.stderr, ran.stderr
    if stack == FLEET:  # until verify FLEET (branch i21-fleetjob): one line, exit 2
        assert ran.returncode != 2 or len(ran.stderr.strip().splitlines()) == 1, ran.stderr


def test_plan_notes_a_dispatcher_other_than_the_managers(tmp_path):
    from infra.stacks import plan_stack

    text = (ROOT / "stacks" / f"Pulumi.{FLEET}.yaml").read_text()
    path = tmp_path / "Pulumi.all-at-once.yaml"
    path.write_text(text.replace("dispatcher: Incremental", "dispatcher: AllAtOnce"))
    notes = plan_stack(str(path))[1].notes
    assert (
        "dispatch.dispatcher AllAtOnce differs from the manager's queueing.fleetDispatcher Incremental: Kueue "
        "dispatches with the manager's (its Configuration multiKueue.dispatcherName); set both alike"
    ) in notes


def test_a_worker_that_would_admit_another_workers_jobs_is_refused_in_one_line_per_flavor():
    """Kueue compares a job's node selectors only on the flavor's own keys (kueue v0.19.2
    pkg/scheduler/flavorassigner/flavorassigner.go flavorSelector): the lab without topology levels has one
    flavor {node.kubernetes.io/instance-type: dgx-a100}, so it would admit every GKE and AWS job on quota
    (pods Pending), and the clouds' flavors would admit its jobs. With its topology it refuses them (TAS
    matches the selectors against its nodes) and they refuse its topology requests."""
    from components.fleet.refusal import unrefused
    from components.fleet.stack import FleetPlatforms, check_fleet_platforms
    from tests.helpers.plans import plan_object, platform_object

    spec = _spec()
    workers = _workers(spec)
    assert unrefused(workers) == []
    raw = platform_object("onprem-dev")
    for pool in raw["nodePools"]:
        pool.pop("topologyLevels", None)
    lab = PlatformOutputs.model_validate(plan_object(raw).outputs)
    flat = [w if w.name != "lab" else model.Worker("lab", w.stack, lab, w.index) for w in workers]
    problems = check_fleet_platforms(spec, FleetPlatforms(_outputs("aws-fleet-manager"), flat))
    assert (
        "fleet.workers[2]: worker 'lab' (onprem-dev) would admit the jobs of worker 'gcp-h100''s flavor "
        "h100-reservation on its flavor a100-80gb-on-demand, whose node labels [node.kubernetes.io/instance-type] "
        "those jobs do not select otherwise, and their pods would stay Pending there; give onprem-dev's pools "
        "topologyLevels (Kueue then matches jobs against its nodes) or a selector on a label the other workers' "
        "jobs select with another value"
    ) in problems
    assert any(
        p.startswith("fleet.workers[0]: worker 'aws-h100' (aws-h100-reserved) would admit") for p in problems
    )


def test_the_fleets_costs_are_its_platforms_own_plans_costs_on_the_plans_day(fleet_plan):
    # The fleet priced its manager and workers without the plan's day: no price age, and a control plane in
    # extended support priced at the standard rate. Now each is what that platform's own plan says that day.
    from datetime import date

    from infra.stacks import plan_stack

    day = date(2026, 11, 28)
    fleet = plan_stack(FLEET, today=day)[1]
    manager = plan_stack(fleet.manager, today=day)[1]
    assert fleet.manager_cost == manager.cost and fleet.manager_cost.price_age_months is not None
    aws = next(w for w in fleet.workers if w.cloud == "aws")
    own = plan_stack(aws.stack, today=day)[1].cost
    assert (aws.min_hourly, aws.max_hourly) == (own.min_hourly, own.max_hourly)
