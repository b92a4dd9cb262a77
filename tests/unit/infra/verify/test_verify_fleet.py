"""verify FLEET offline: the reference fleet (stacks/Pulumi.fleet-research.yaml) passes; each rule of the
fleet checks finds its planted defect by name (tests/helpers/fleet_verify.py plants it)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.verify import verify
from tests.helpers.fleet_verify import fleet, kubeconfig, spec_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def findings(plan, check: str) -> list[str]:
    return [f.message for f in verify(plan).check(check).findings]


def obj(
    objects: dict[str, list[dict[str, Any]]], cluster: str, kind: str, name: str | None = None
) -> dict[str, Any]:
    return next(
        o for o in objects[cluster] if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    )


def drop(cluster: str, kind: str, name: str | None = None):
    def edit(objects):
        objects[cluster].remove(obj(objects, cluster, kind, name))

    return edit


def test_the_reference_fleet_passes_and_runs_only_the_fleet_checks():
    report = verify(fleet())
    assert [c.name for c in report.checks] == ["fleet-queues", "fleet-dispatch", "fleet-access"]
    assert report.findings == [] and report.ok
    # The plan is split by provider: each worker gets its MultiKueue account, the manager the rest.
    f = fleet().fleet
    assert sorted(f.by_cluster) == ["aws-h100", "gcp-h100", "lab", "manager"]


def test_a_team_queue_missing_on_the_manager():
    assert findings(fleet(drop("manager", "LocalQueue")), "fleet-queues") == [
        "team research: the manager has no LocalQueue research/research-gpus, the name the workers queue it under"
    ]


def test_a_team_missing_on_a_worker():
    spec = spec_object()
    spec["teams"].append({"name": "eval"})
    assert "team eval is not a team of worker lab (onprem-dev); add it there" in findings(
        fleet(spec=spec), "fleet-queues"
    )


def test_manager_quota_that_is_not_the_workers_sum():
    def edit(objects):
        cq = obj(objects, "manager", "ClusterQueue")
        res = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        next(r for r in res if r["name"] == "nvidia.com/gpu")["nominalQuota"] = "8"

    assert findings(fleet(edit), "fleet-queues") == [
        "ClusterQueue research on the manager: nvidia.com/gpu quota 24 is not 208, the sum of team research's "
        "quota on the workers (aws-h100 64, gcp-h100 128, lab 16)"
    ]


def test_a_queue_without_the_multikueue_check():
    def edit(objects):
        obj(objects, "manager", "AdmissionCheck")["spec"]["controllerName"] = (
            "kueue.x-k8s.io/provisioning-request"
        )

    assert findings(fleet(edit), "fleet-dispatch") == [
        "ClusterQueue research on the manager has no AdmissionCheck with controllerName kueue.x-k8s.io/multikueue: "
        "its jobs would run on the manager, not on a worker"
    ]


@pytest.mark.parametrize(
    "clusters",
    [["gcp-h100", "aws-h100", "lab"], ["aws-h100", "gcp-h100"], ["aws-h100", "gcp-h100", "lab", "lab"]],
)
def test_a_multikueue_config_out_of_order_missing_or_repeating_a_worker(clusters):
    def edit(objects):
        obj(objects, "manager", "MultiKueueConfig")["spec"]["clusters"] = clusters

    assert (
        f"MultiKueueConfig research-fleet lists clusters [{', '.join(clusters)}], not every worker once in dispatch "
        "order [aws-h100, gcp-h100, lab]"
    ) in findings(fleet(edit), "fleet-dispatch")


def test_the_manager_platform_must_be_a_fleet_manager_with_the_fleets_dispatcher():
    got = findings(fleet(manager_config={"queueing": {"fleetDispatcher": "AllAtOnce"}}), "fleet-dispatch")
    assert got == [
        "manager platform aws-fleet-manager does not set queueing.fleetManager: its Kueue has no MultiKueue configuration",
        "manager platform aws-fleet-manager runs the AllAtOnce dispatcher (queueing.fleetDispatcher), the fleet asks "
        "for Incremental (dispatch.dispatcher)",
    ]


def test_a_missing_kubeconfig_secret():
    assert findings(fleet(drop("manager", "Secret", "research-fleet-lab-kubeconfig")), "fleet-access") == [
        "MultiKueueCluster lab reads Secret kueue-system/research-fleet-lab-kubeconfig, which the manager lacks"
    ]


@pytest.mark.parametrize(
    ("user", "why"),
    [
        ({"exec": {"command": "aws"}}, "user mk uses an exec plugin"),
        ({"tokenFile": "/var/run/token"}, "user mk uses a tokenFile"),
    ],
)
def test_a_kubeconfig_kueue_refuses(user, why):
    def edit(objects):
        obj(objects, "manager", "Secret", "research-fleet-gcp-h100-kubeconfig")["stringData"] = {
            "kubeconfig": kubeconfig(**user)
        }

    assert findings(fleet(edit), "fleet-access") == [
        f"Secret kueue-system/research-fleet-gcp-h100-kubeconfig: Kueue refuses its kubeconfig (InsecureKubeConfig): {why}"
    ]


def test_a_kubeconfig_with_a_ca_file_path():
    from infra.verify.checks.fleet_access import kubeconfig_problems

    text = kubeconfig().replace("certificate-authority-data: Q0E=", "certificate-authority: /etc/ca.crt")
    assert kubeconfig_problems(text) == [
        "cluster w names a certificate-authority file (use certificate-authority-data)"
    ]


def test_a_secret_without_the_kubeconfig_key():
    def edit(objects):
        obj(objects, "manager", "Secret", "research-fleet-lab-kubeconfig")["stringData"] = {"config": "x"}

    assert findings(fleet(edit), "fleet-access") == [
        "Secret kueue-system/research-fleet-lab-kubeconfig on the manager has no key 'kubeconfig', which MultiKueue reads"
    ]


def test_worker_rbac_that_does_not_cover_workloads_status():
    def edit(objects):
        role = obj(objects, "gcp-h100", "ClusterRole", "multikueue-research-fleet-write")
        role["rules"] = [r for r in role["rules"] if "workloads/status" not in r["resources"]]

    assert findings(fleet(edit), "fleet-access") == [
        "worker gcp-h100: ServiceAccount kueue-system/multikueue-research-fleet may not kueue.x-k8s.io/workloads/status "
        "patch,update in team namespace research (roles multikueue-research-fleet, multikueue-research-fleet-write), "
        "which MultiKueue does there"
    ]


def test_the_managers_token_writes_only_in_the_fleet_teams_namespaces_and_reads_everywhere():
    """Worker tokens are bound per team namespace: the cluster-wide role reads (MultiKueue watches every
    namespace, kueue v0.19.2 multikueuecluster.go), the writes are a RoleBinding in each team namespace."""
    seen: dict[str, list[dict[str, Any]]] = {}
    fleet(seen.update)  # the edit hook sees every cluster's objects; it changes nothing
    assert set(seen) > {"manager"}
    for worker, objects in seen.items():
        if worker == "manager":
            continue
        bound = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
        (role,) = [
            o
            for o in objects
            if o["kind"] == "ClusterRole" and o["metadata"]["name"] == bound[0]["roleRef"]["name"]
        ]
        assert {v for r in role["rules"] for v in r["verbs"]} == {"get", "list", "watch"}, worker
        local = [o for o in objects if o["kind"] == "RoleBinding"]
        assert [o["metadata"]["namespace"] for o in local] == ["research"], worker


def test_a_worker_without_the_team_namespace_write_binding():
    """The broken plan: the RoleBinding in the team's namespace is gone, so the manager cannot create the job."""
    (finding,) = findings(fleet(drop("lab", "RoleBinding")), "fleet-access")
    assert finding.startswith("worker lab: ServiceAccount kueue-system/multikueue-research-fleet may not ")
    assert "jobset.x-k8s.io/jobsets create,delete" in finding and "in team namespace research" in finding


def test_a_worker_without_a_token_secret():
    assert findings(fleet(drop("lab", "Secret")), "fleet-access") == [
        "worker lab: no kubernetes.io/service-account-token Secret for ServiceAccount "
        "kueue-system/multikueue-research-fleet: the manager's kubeconfig has no token to carry"
    ]


def test_fleet_checks_skip_a_platform_stack_that_names_them():
    from infra.verify.model import from_run
    from tests.helpers.plans import planned

    report = verify(from_run(planned("onprem-dev")), ["fleet-queues"])
    assert report.check("fleet-queues").skipped == "verifies a fleet stack, not this platform stack"


@pytest.mark.parametrize("step", [None, 3, 2])
def test_dispatch_order_matches_the_plans(step):
    """Rule 'dispatch order matches the plan's': with stepSize > 1 (Kueue's default 3: kueue v0.19.2
    workloaddispatcher/incrementaldispatcher.go DefaultStepSize) the Incremental dispatcher sends a job to
    several workers at once and the first to admit it wins, whatever the MultiKueueConfig's order."""

    def edit(config):
        if step is None:
            config["multiKueue"].pop("incrementalDispatcherConfig", None)
        else:
            config["multiKueue"]["incrementalDispatcherConfig"] = {"stepSize": step}

    asked = ["aws-h100", "gcp-h100", "lab"][: step or 3]
    assert findings(fleet(manager_kueue=edit), "fleet-dispatch") == [
        f"dispatch order: the manager's Incremental dispatcher asks {step or 3} workers per round "
        f"(multiKueue.incrementalDispatcherConfig.stepSize), so {', '.join(asked)} get each job at once and the "
        "first to admit it wins; the plan's order [aws-h100, gcp-h100, lab] is not the order that happens "
        "(stepSize 1 asks them one at a time)"
    ]


def test_a_manager_that_blocks_admission_behind_one_job():
    def edit(config):
        config["waitForPodsReady"]["blockAdmission"] = True

    assert findings(fleet(manager_kueue=edit), "fleet-dispatch") == [
        "manager platform aws-fleet-manager blocks admission (waitForPodsReady.blockAdmission): the manager's "
        "pods run on the workers, so one job no worker admits holds every team's jobs until its timeout"
    ]


def test_a_manager_flavor_that_cannot_admit_a_workers_tas_jobs_fails():
    """Rule 'a manager flavor that cannot admit a worker's TAS jobs fails': the lab worker's flavor has a
    Topology, so its jobs carry kueue.x-k8s.io/podset-preferred-topology; a manager whose flavors have no
    topologyName (or a Topology without the lab's levels) refuses them (kueue v0.19.2
    pkg/scheduler/flavorassigner/tas_flavorassigner.go)."""

    def plain_only(objects):
        cq = obj(objects, "manager", "ClusterQueue")
        group = cq["spec"]["resourceGroups"][0]
        group["flavors"] = group["flavors"][:1]

    def other_levels(objects):
        topo = obj(objects, "manager", "Topology")
        topo["spec"]["levels"] = [{"nodeLabel": "kubernetes.io/hostname"}]

    want = (
        "ClusterQueue research on the manager has no topology-aware flavor with the levels "
        "[lab.example.com/rack, kubernetes.io/hostname] of worker lab's flavor a100-80gb-on-demand: the manager's "
        "Kueue refuses the jobs that carry a topology request for it (tas_flavorassigner.go), and they stay Pending"
    )
    assert want in findings(fleet(plain_only), "fleet-queues")
    assert findings(fleet(other_levels), "fleet-queues") == [want]


def _lab_without_topology():
    from infra.verify.model import from_run
    from tests.helpers.plans import plan_object, platform_object

    raw = platform_object("onprem-dev")
    for pool in raw["nodePools"]:
        pool.pop("topologyLevels", None)
    return from_run(plan_object(raw), raw)


def test_each_worker_that_must_refuse_a_job_refuses_it():
    """Rule 'each worker that must refuse a job refuses it': Kueue compares a job's node selectors only on
    the keys a flavor carries (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go flavorSelector).
    The lab worker without topology levels has one flavor, {node.kubernetes.io/instance-type: dgx-a100}:
    a GKE-shaped H100 job selects none of that, so the lab admits it on quota and its pods stay Pending;
    and the lab's own jobs select only that key, which the AWS and GKE flavors do not carry."""
    got = findings(fleet(worker_plans={"lab": _lab_without_topology()}), "fleet-dispatch")
    assert (
        "team research: worker lab admits the jobs of worker gcp-h100's flavor h100-reservation on its flavor "
        "a100-80gb-on-demand, which compares only [node.kubernetes.io/instance-type] of the jobs' node selectors "
        "[cloud.google.com/gke-accelerator=nvidia-h100-80gb, trainplane.dev/capacity=reservation, "
        "trainplane.dev/gpu=H100, trainplane.dev/pool=h100-res]: their pods would stay Pending on lab; give the "
        "flavors a label the other workers' jobs select with another value"
    ) in got
    assert any(
        m.startswith("team research: worker aws-h100 admits the jobs of worker lab's flavor") for m in got
    )
    # With its topology (the reference), the lab refuses them: TAS matches the selectors against its nodes,
    # and the clouds' flavors refuse the lab's topology requests.
    assert not [m for m in findings(fleet(), "fleet-dispatch") if "admits the jobs" in m]
