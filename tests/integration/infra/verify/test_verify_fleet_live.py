"""verify FLEET --kubeconfig: a fake API server per cluster (the manager and each worker); the real
kubernetes client reads the manager, then each worker with the kubeconfig in the manager's MultiKueue
Secret, as MultiKueue does. Each broken case plants one defect and finds it by name."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from infra.verify.fleet_live import read_fleet, verify_fleet_state
from infra.verify.fleet_model import MANAGER
from tests.helpers.fake_k8s import FakeApiServer, Request
from tests.helpers.fleet_verify import fleet

KUEUE = "/apis/kueue.x-k8s.io/v1beta2/"


class Cluster:
    """One cluster's routes: Kueue lists and kueue-system Secrets; a token it demands, if any."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]], token: str | None = None) -> None:
        self.objects, self.token = objects, token

    def get(self, req: Request) -> tuple[int, Any]:
        if self.token is not None and req.headers.get("Authorization") != f"Bearer {self.token}":
            return 401, {"kind": "Status", "code": 401, "reason": "Unauthorized"}
        if req.path == "/api/v1/resourcequotas":
            items = self.objects.get("resourcequotas", [])
            return 200, {"apiVersion": "v1", "kind": "ResourceQuotaList", "metadata": {}, "items": items}
        if req.path == "/api/v1/namespaces/kueue-system/secrets":
            return 200, {
                "apiVersion": "v1",
                "kind": "SecretList",
                "metadata": {},
                "items": self.objects.get("secrets", []),
            }
        if req.path.startswith(KUEUE):
            plural = req.path[len(KUEUE) :]
            return 200, {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "List",
                "metadata": {},
                "items": self.objects.get(plural, []),
            }
        return 404, {}


def bodies(objs) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(dict(o.body))) for o in objs]


@pytest.fixture(scope="module")
def plan():
    return fleet()


def serve(plan, tmp_path, *, break_worker: str | None = None, edit=None):
    """The fleet as deployed: workers serve their plans' queues (token `t-<name>`), the manager its
    objects and a Secret per worker pointing at that worker's server."""
    f = plan.fleet
    servers, manager_objects = [], {}
    secrets = []
    for w in f.workers:
        worker_objs = {
            "localqueues": bodies(w.plan.objects("LocalQueue")),
            "clusterqueues": bodies(w.plan.objects("ClusterQueue")),
            "resourcequotas": bodies(w.plan.objects("ResourceQuota")),
        }
        server = FakeApiServer(Cluster(worker_objs, token=f"t-{w.name}"))
        servers.append(server)
        token = "wrong" if w.name == break_worker else f"t-{w.name}"
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": w.name, "cluster": {"server": server.url}}],
            "users": [{"name": "mk", "user": {"token": token}}],
            "contexts": [{"name": w.name, "context": {"cluster": w.name, "user": "mk"}}],
            "current-context": w.name,
        }
        data = base64.b64encode(json.dumps(kubeconfig).encode()).decode()
        secrets.append(
            {
                # The reference fleet's Secret names (its MultiKueueClusters read them).
                "metadata": {"name": f"research-fleet-{w.name}-kubeconfig", "namespace": "kueue-system"},
                "data": {"kubeconfig": data},
            }
        )
    manager_objects = {
        "secrets": secrets,
        "localqueues": bodies(f.on(MANAGER, "LocalQueue")),
        "clusterqueues": bodies(f.on(MANAGER, "ClusterQueue")),
        "multikueueclusters": bodies(f.on(MANAGER, "MultiKueueCluster")),
    }
    if edit is not None:
        edit(manager_objects, {w.name: s.routes.objects for w, s in zip(f.workers, servers, strict=True)})
    manager = FakeApiServer(Cluster(manager_objects))
    path = manager.kubeconfig(tmp_path / "manager")
    try:
        return verify_fleet_state(plan, read_fleet(path), source="test")
    finally:
        for s in [*servers, manager]:
            s.close()


def lines(report, check: str) -> list[str]:
    return [f.message for f in report.check(check).findings]


def test_a_sound_fleet_passes_live(plan, tmp_path):
    report = serve(plan, tmp_path)
    assert [c.name for c in report.checks] == ["fleet-queues", "fleet-dispatch", "fleet-access"]
    assert report.check("fleet-dispatch").status == "skip"
    assert report.findings == [] and report.ok


def test_a_worker_that_refuses_the_token(plan, tmp_path):
    report = serve(plan, tmp_path, break_worker="gcp-h100")
    assert lines(report, "fleet-access") == [
        "worker gcp-h100 is unreachable with the kubeconfig of Secret kueue-system/research-fleet-gcp-h100-kubeconfig: "
        "401 Unauthorized"
    ]


def test_a_missing_secret_on_the_manager(plan, tmp_path):
    def edit(manager, workers):
        manager["secrets"] = [
            s for s in manager["secrets"] if s["metadata"]["name"] != "research-fleet-lab-kubeconfig"
        ]

    assert lines(serve(plan, tmp_path, edit=edit), "fleet-access") == [
        "MultiKueueCluster lab reads Secret kueue-system/research-fleet-lab-kubeconfig, which the manager lacks"
    ]


def test_a_queue_not_mirrored_on_a_worker(plan, tmp_path):
    def edit(manager, workers):
        workers["lab"]["localqueues"] = []

    assert lines(serve(plan, tmp_path, edit=edit), "fleet-queues") == [
        "team research: worker lab has no LocalQueue research/research-gpus, which MultiKueue creates the job's Workload in"
    ]


def test_manager_quota_that_is_not_the_workers_live_sum(plan, tmp_path):
    def edit(manager, workers):
        # The lab's team quota raised by hand on the worker, the manager not told.
        rq = next(q for q in workers["lab"]["resourcequotas"] if q["metadata"]["namespace"] == "research")
        rq["spec"]["hard"]["requests.nvidia.com/gpu"] = "8"

    assert lines(serve(plan, tmp_path, edit=edit), "fleet-queues") == [
        "ClusterQueue research on the manager: nvidia.com/gpu quota 208 is not 200, the sum of what the team holds "
        "on the workers' live ClusterQueues and ResourceQuotas (aws-h100 64, gcp-h100 128, lab 8)"
    ]


def test_verify_cli_reads_a_fleet_through_its_manager_and_says_in_one_line_when_it_cannot(tmp_path, capsys):
    from infra import cli

    server = FakeApiServer(Cluster({}, token="not-yours"))
    path = server.kubeconfig(tmp_path / "manager")
    try:
        assert cli.main(["verify", "fleet-research", "--kubeconfig", path]) == 2
    finally:
        server.close()
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"cannot read the fleet's manager ({path}): 401 Unauthorized"
