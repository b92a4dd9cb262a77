"""`trainplane status` against the live-cluster test server: the fake API server (tests/helpers/fake_k8s.py)
serves the day of tests/helpers/status_cluster.py and a Prometheus query_range; the real `kubernetes`
client reads it through a kubeconfig, as `--kubeconfig` does. Bad input: one line, exit 2, no traceback."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import cli, trainplane
from tests.helpers.status_cluster import StatusCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = StatusCluster()
    c.kubeconfig = c.server.kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    yield c
    c.close()


def one_line_error(ran, said: str) -> None:
    assert ran.returncode == 2, ran
    assert ran.stdout == ""
    assert ran.stderr.count("\n") == 1 and said in ran.stderr and "Traceback" not in ran.stderr, ran.stderr


def test_the_timeline_of_a_job_stack_from_the_cluster_and_prometheus(cluster):
    ran = cli("status", "gpt-small-aws-dev", "--kubeconfig", cluster.kubeconfig, "--prometheus", cluster.url)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == "JobSet research/gpt-small: Running; 16 GPUs; 3 restart(s), 1 counted of 20"
    cells = [[c.strip() for c in line.split("│")] for line in lines if "│" in line]
    restarts = [row[:5] for row in cells if len(row) == 9]  # the Restarts table's rows (9 columns)
    assert restarts == [
        ["-", "2026-11-20T10:30:00Z", "Kueue", "preemption", "no"],
        ["1", "2026-11-20T11:00:00Z", "JobSet", "node fault", "no"],
        ["2", "2026-11-20T12:00:00Z", "JobSet", "hang", "yes"],
        ["3", "2026-11-20T13:00:00Z", "JobSet", "preemption", "no"],
    ]
    assert "lost in total: 120 steps, 11.20 GPU-hours" in lines
    # The job's series, by its namespace and job labels (the PodMonitor's).
    assert 'max(trainplane_step{namespace="research",job="gpt-small"})' in cluster.queries


def test_json_through_the_client_equals_the_builders_on_the_same_objects(cluster):
    from infra.status import Series, build
    from infra.status.render import as_json
    from tests.helpers.status_cluster import job_state, step_series

    ran = cli(
        "status",
        "research/gpt-small",
        "--kubeconfig",
        cluster.kubeconfig,
        "--prometheus",
        cluster.url,
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    # Typed models of the client (times as +00:00, defaults) change nothing the timeline shows.
    assert json.loads(ran.stdout) == as_json(build(job_state(), Series(steps=step_series())))


def test_without_prometheus_the_cluster_part_prints(cluster):
    ran = cli("status", "gpt-small", "--namespace", "research", "--kubeconfig", cluster.kubeconfig)
    assert ran.returncode == 0, ran.stderr
    assert "restart 2: hang (counted)" in ran.stdout
    assert ran.stdout.splitlines()[-1] == "Prometheus columns empty: no --prometheus URL given"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["research/gpt-large"],
            "job research/gpt-large: no JobSet or Job of that name in namespace research",
        ),
        (["nowhere/gpt-small"], "namespace 'nowhere': no such namespace on the cluster"),
        (
            ["research/gpt-small", "--prometheus", "http://127.0.0.1:9"],
            "cannot reach Prometheus at http://127.0.0.1:9",
        ),
        (
            ["gpt-small-aws-dev", "--prometheus", "localhost:9090"],
            "cannot reach Prometheus at localhost:9090",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cluster, args, said):
    one_line_error(cli("status", *args, "--kubeconfig", cluster.kubeconfig), said)


def test_a_cluster_that_cannot_be_reached_is_one_line(tmp_path):
    gone = StatusCluster()
    kubeconfig = gone.server.kubeconfig(tmp_path / "config")
    gone.close()
    one_line_error(cli("status", "research/gpt-small", "--kubeconfig", kubeconfig), "cannot read the cluster")
    one_line_error(cli("status", "research/gpt-small", "--kubeconfig", str(tmp_path / "no")), "no such file")


def test_a_prometheus_without_the_jobs_series_leaves_the_columns_empty_and_says_why(tmp_path):
    empty = StatusCluster(steps=[])
    try:
        kubeconfig = empty.server.kubeconfig(tmp_path / "config")
        ran = cli("status", "research/gpt-small", "--kubeconfig", kubeconfig, "--prometheus", empty.url)
    finally:
        empty.close()
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == (
        f"Prometheus columns empty: Prometheus at {empty.url} has no trainplane_step samples of research/gpt-small"
    )


def test_a_user_who_may_not_read_nodes_or_cluster_events_still_gets_the_timeline(tmp_path):
    """A team's Role covers its namespace: nodes, node Events, the namespace itself answer 403. The
    quarantine evidence on nodes is then left out, the rest stays."""
    team = StatusCluster()
    team.forbidden = {"/api/v1/nodes/*", "/api/v1/events", "/api/v1/namespaces/research"}
    try:
        ran = cli("status", "research/gpt-small", "--kubeconfig", team.server.kubeconfig(tmp_path / "config"))
    finally:
        team.close()
    assert ran.returncode == 0, ran.stderr
    assert "restart 1: node fault (not counted)" in ran.stdout  # the pod's GpuPodEvicted Event says so
    assert "restart 2: hang (counted)" in ran.stdout


def test_a_forbidden_job_is_one_line(tmp_path):
    team = StatusCluster()
    team.forbidden = {"/apis/jobset.x-k8s.io/*"}
    try:
        ran = cli("status", "gpt-small-aws-dev", "--kubeconfig", team.server.kubeconfig(tmp_path / "config"))
    finally:
        team.close()
    one_line_error(ran, "cannot read the cluster")
    assert "403" in ran.stderr


def test_the_real_command_line(cluster):
    """One real process: `python -m infra.cli status ...`, its output piped."""
    ran = trainplane(
        "status", "gpt-small-aws-dev", "--kubeconfig", cluster.kubeconfig, "--prometheus", cluster.url
    )
    assert ran.returncode == 0, ran.stderr
    assert (
        "restart 2: hang (counted)" in ran.stdout
        and "pod gpt-small-workers-0-0-a1x0 exited 124" in ran.stdout
    )
    assert "lost in total: 120 steps, 11.20 GPU-hours" in ran.stdout
    bad = trainplane("status", "research/gpt-large", "--kubeconfig", cluster.kubeconfig)
    one_line_error(bad, "no JobSet or Job of that name")
