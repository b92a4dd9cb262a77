"""A job on a fleet (`fleetStack`): checked against every worker; the pod MultiKueue copies must be right
on each worker it fits; the trainer config travels inside the JobSet (components/job_fleet.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.job_fleet import CONFIG_ANNOTATION, check_fleet_job, on_manager, pod_differences
from components.outputs import PlatformOutputs
from components.spec import ConfigError, JobSpec
from tests.helpers.plans import ROOT, one, planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

FLEET = "organization/trainplane/fleet-research"
WORKERS = {
    "aws-h100": "aws-h100-reserved",
    "gcp-h100": "gcp-h100-dws",
    "lab": "onprem-dev",
}


def outputs(stack: str, **changes: Any) -> PlatformOutputs:
    return PlatformOutputs.model_validate({**copy.deepcopy(dict(planned(stack).outputs)), **changes})


def workers(**override: PlatformOutputs) -> list[tuple[str, str, PlatformOutputs]]:
    return [(n, f"organization/trainplane/{s}", override.get(n) or outputs(s)) for n, s in WORKERS.items()]


def job(**changes: Any) -> JobSpec:
    raw: dict[str, Any] = {
        "fleetStack": FLEET,
        "name": "gpt-small",
        "team": "research",
        "image": "ghcr.io/example/trainplane-trainer:0.1.0",
        "nodePools": ["h100-block", "h100-od", "h100-spot"],
        "nodes": {"min": 4, "max": 4},
        "gpusPerNode": 8,
        "trainer": {"model": "gpt-small", "globalBatchSize": 512, "microBatchSize": 8, "steps": 100},
        "volumes": [{"storage": "datasets", "mountPath": "/data", "readOnly": True}],
        "checkpoint": {"uri": "s3://example-ml-checkpoints/research/gpt-small"},
    }
    raw.update(changes)
    return JobSpec.load({k: v for k, v in raw.items() if v is not None})


@pytest.mark.parametrize("stacks", [{}, {"platformStack": "organization/trainplane/aws-dev"}])
def test_a_job_names_exactly_one_of_platform_and_fleet(stacks):
    raw = job().model_dump(by_alias=True, exclude_defaults=True)
    raw.pop("fleetStack")
    raw.update(stacks)
    if stacks:
        raw["fleetStack"] = FLEET
    with pytest.raises(ConfigError) as e:
        JobSpec.load(raw)
    given = "both are given" if stacks else "neither is given"
    assert e.value.problems == [
        f"job.platformStack: give either platformStack (one platform) or fleetStack (a fleet); {given}"
    ]


def test_the_job_fits_the_workers_whose_pools_it_names_and_says_why_not_on_the_others():
    fits, problems = check_fleet_job(job(), workers())
    assert problems == []
    assert [(f.name, f.fits) for f in fits] == [("aws-h100", True), ("gcp-h100", False), ("lab", False)]
    gcp = fits[1].problems
    assert any(
        "'h100-block' is not a node pool of platform organization/trainplane/gcp-h100-dws" in p for p in gcp
    )
    # An explicit s3:// URI is reachable only from the worker whose identity trusts the s3 store.
    assert any(
        p.startswith(
            "job.checkpoint.uri: platform organization/trainplane/gcp-h100-dws keeps objects in gs://"
        )
        for p in gcp
    )
    assert any("has no object storage" in p for p in fits[2].problems)


def test_a_job_that_fits_no_worker_gets_one_line_per_worker():
    _, problems = check_fleet_job(job(nodePools=["h200"]), workers())
    assert len(problems) == 3
    assert problems[0].startswith(
        f"job: fits no worker of fleet {FLEET}; worker aws-h100 (organization/trainplane/aws-h100-reserved): "
    )
    assert [p.split(";")[1].split()[1] for p in problems] == ["aws-h100", "gcp-h100", "lab"]


def test_auto_checkpoints_are_refused_on_a_fleet():
    _, problems = check_fleet_job(job(checkpoint={"uri": "s3://auto"}), workers())
    assert problems == [
        "job.checkpoint.uri: s3://auto is one platform's checkpoint bucket, and the fleet's manager cannot know "
        "which worker will run the job; give an explicit URI or a path on a volume every worker it fits has"
    ]


def test_elastic_jobs_are_refused_on_a_fleet():
    _, problems = check_fleet_job(job(nodes={"min": 2, "max": 4}), workers())
    assert len(problems) == 1 and problems[0].startswith("job.nodes: an elastic job (min 2 < max 4)")


def test_alike_workers_both_fit_and_a_pod_that_would_differ_between_them_is_refused():
    aws = outputs("aws-h100-reserved")
    twin = [("a", "org/p/a", aws), ("b", "org/p/b", outputs("aws-h100-reserved"))]
    fits, problems = check_fleet_job(job(), twin)
    assert [f.fits for f in fits] == [True, True] and problems == []
    # The same pools on a worker whose pods get another grace period: one JobSet cannot be right on both.
    other = outputs("aws-h100-reserved", preemptionGraceSeconds=300)
    _, problems = check_fleet_job(job(), [twin[0], ("b", "org/p/b", other)])
    assert len(problems) == 1
    assert problems[0].startswith("job: fits workers a and b, but its pod differs between them (")
    assert "spec.terminationGracePeriodSeconds" in problems[0]


def test_pod_differences_name_the_container_keys():
    a = {
        "metadata": {},
        "spec": {"containers": [{"name": "trainer", "env": [1]}], "nodeSelector": {"x": "1"}},
    }
    b = {
        "metadata": {},
        "spec": {"containers": [{"name": "trainer", "env": [2]}], "nodeSelector": {"x": "1"}},
    }
    assert pod_differences(a, b) == ["spec.containers[trainer].env"]


def test_on_the_manager_the_trainer_config_rides_in_the_pod_template():
    from components.incluster.job_runtime import training_jobset

    manifest = on_manager(training_jobset(job(), outputs("aws-h100-reserved")), "trainer: {}\n")
    pod = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"][CONFIG_ANNOTATION] == "trainer: {}\n"
    (config,) = [v for v in pod["spec"]["volumes"] if v["name"] == "config"]
    assert config == {
        "name": "config",
        "downwardAPI": {
            "items": [
                {
                    "path": "trainer.yaml",
                    "fieldRef": {"fieldPath": f"metadata.annotations['{CONFIG_ANNOTATION}']"},
                }
            ]
        },
    }
    assert not any("configMap" in v for v in pod["spec"]["volumes"])


FLEET_JOB = (ROOT / "stacks" / "Pulumi.gpt-small-fleet-research.yaml").read_text()


def _plan_errors(tmp_path, capsys, text: str) -> list[str]:
    from infra import cli

    f = tmp_path / "Pulumi.x.yaml"
    f.write_text(text)
    assert cli.main(["plan", str(f)]) == 2
    return capsys.readouterr().err.strip().splitlines()


def test_plan_of_a_fleet_job_that_fits_no_worker_says_why_per_worker(tmp_path, capsys):
    lines = _plan_errors(tmp_path, capsys, FLEET_JOB.replace("gpusPerNode: 8", "gpusPerNode: 16"))
    assert lines[0].endswith("3 problem(s)")
    assert [line.split(";")[1].split()[1] for line in lines[1:]] == ["aws-h100", "gcp-h100", "lab"]


def test_a_fleet_stack_that_is_not_a_fleet_is_one_line(tmp_path, capsys):
    (line,) = _plan_errors(
        tmp_path, capsys, FLEET_JOB.replace("fleetStack: fleet-research", "fleetStack: aws-dev")
    )
    assert line.endswith(
        "job.fleetStack 'aws-dev': "
        f"{ROOT / 'stacks' / 'Pulumi.aws-dev.yaml'} is not a fleet stack (no trainplane:fleet); name the fleet the job runs on"
    )


def test_the_fleet_job_is_one_jobset_on_the_manager_and_a_pod_monitor_on_each_worker_it_fits():
    from tests.helpers.plans import planned

    result = planned("gpt-small-fleet-research")
    by_type = {(r.type, r.name): r for r in result.resources}
    providers = {r.name for r in result.resources if r.type == "pulumi:providers:kubernetes"}
    assert providers == {"fleet-manager", "worker-aws-h100"}
    jobset = by_type[("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "gpt-small-jobset")]
    assert "::fleet-manager::" in str(jobset.provider)
    # Nothing beside the JobSet on the manager: MultiKueue would not copy it.
    assert not [r for r in result.resources if r.type == "kubernetes:core/v1:ConfigMap"]
    monitor = by_type[("kubernetes:monitoring.coreos.com/v1:PodMonitor", "gpt-small-metrics-aws-h100")]
    assert "::worker-aws-h100::" in str(monitor.provider)
    assert monitor.inputs["metadata"]["namespace"] == "research"
    pod = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research-gpus"
    assert CONFIG_ANNOTATION in pod["metadata"]["annotations"]
    assert result.outputs["workers"] == ["aws-h100"]


def test_a_team_the_fleet_does_not_mirror_is_refused():
    from components.job_fleet_stack import FleetOutputs, fleet_problems

    fleet = FleetOutputs.model_validate(
        {
            "fleetName": "research-fleet",
            "managerStack": "aws-fleet-manager",
            "workers": [{"name": n, "stack": s} for n, s in WORKERS.items()],
            "teams": [{"name": "eval"}],
        }
    )
    _, problems = fleet_problems(job(), fleet, workers())
    assert problems == [
        f"job.team: 'research' is not a team of fleet {FLEET} (the manager has no queue for it); fleet teams: eval"
    ]


def test_commands_of_one_platform_refuse_a_fleet_job_in_one_line(capsys):
    from infra import cli

    assert cli.main(["nccl-test", "gpt-small-fleet-research"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(
        "job.fleetStack 'fleet-research': a job on a fleet runs on whichever worker admits it; run this on a job "
        "stack that names the worker's platform (platformStack)"
    )


def test_plan_dump_of_a_fleet_is_refused_in_one_line(tmp_path, capsys):
    from infra import cli

    assert cli.main(["plan", "fleet-research", "--dump", str(tmp_path / "f.json")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "plan --dump: fleet-research is a fleet stack, which has no dump format; run `verify fleet-research`"
    ]
    assert not (tmp_path / "f.json").exists()


def test_plan_json_of_a_fleet_job_says_per_worker_whether_it_fits_and_docs_name_the_keys(capsys):
    import json

    from infra import cli

    assert cli.main(["plan", "gpt-small-fleet-research", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fleetStack"] == "fleet-research"
    assert [(w["name"], w["fits"]) for w in data["fleetWorkers"]] == [
        ("aws-h100", True),
        ("gcp-h100", False),
        ("lab", False),
    ]
    doc = (ROOT / "docs" / "cli.md").read_text()
    for key in ["fleetStack", "fleetWorkers", *data["fleetWorkers"][0]]:
        assert f"`{key}`" in doc, key


def test_a_job_on_an_existing_cluster_worker_reaches_it_through_the_ambient_kubeconfig_and_its_context():
    """The lab worker (onprem-dev, an existing cluster on the ambient kubeconfig) exports a placeholder,
    `(ambient kubeconfig, context lab-admin)`, not a kubeconfig: the job's PodMonitor provider there is the
    one the fleet stack builds (the ambient file, context lab-admin). It was built from the placeholder,
    which pulumi-kubernetes cannot load (the cluster unreachable at create; preview passed)."""
    import json

    from infra import stackfile
    from tests.helpers.plans import cached_run_program, stack_refs

    sf = stackfile.load("gpt-small-fleet-research", ROOT)
    raw = json.loads(sf.config["trainplane:job"])
    raw.update(nodePools=["a100"], nodes={"min": 2, "max": 2})
    raw["volumes"] = [{"storage": "datasets", "mountPath": "/data"}]
    raw["checkpoint"]["uri"] = "/data/checkpoints/gpt-small"  # the lab has no object storage
    config = {**sf.config, "trainplane:job": json.dumps(raw)}
    result = cached_run_program(config, sf.name, stack_refs("gpt-small-fleet-research"), sf.secret_keys)

    assert result.outputs["workers"] == ["lab"]
    (provider,) = [
        r for r in result.resources if r.type == "pulumi:providers:kubernetes" and r.name == "worker-lab"
    ]
    assert provider.inputs.get("context") == "lab-admin"
    assert "ambient kubeconfig" not in json.dumps(provider.inputs.get("kubeconfig") or "")
    monitor = one(result, "kubernetes:monitoring.coreos.com/v1:PodMonitor", "gpt-small-metrics-lab")
    assert "::worker-lab::" in str(monitor.provider)


def test_a_job_on_an_existing_cluster_platform_reaches_it_through_the_ambient_kubeconfig_and_its_context():
    """The single-platform job stack had the fleet job's defect: its provider was built from the
    placeholder output of a platform on the ambient kubeconfig (onprem-dev)."""
    import json

    from infra import stackfile
    from tests.helpers.plans import cached_run_program, stack_refs

    sf = stackfile.load("gpt-small-fleet-research", ROOT)
    raw = json.loads(sf.config["trainplane:job"])
    raw.pop("fleetStack")
    raw.update(platformStack="onprem-dev", nodePools=["a100"], nodes={"min": 2, "max": 2})
    raw["volumes"] = [{"storage": "datasets", "mountPath": "/data"}]
    raw["checkpoint"]["uri"] = "/data/checkpoints/gpt-small"
    config = {**sf.config, "trainplane:job": json.dumps(raw)}
    result = cached_run_program(
        config, "gpt-small-onprem-dev", stack_refs("gpt-small-fleet-research"), sf.secret_keys
    )

    (provider,) = [r for r in result.resources if r.type == "pulumi:providers:kubernetes"]
    assert provider.name == "platform-cluster"
    assert provider.inputs.get("context") == "lab-admin"
    assert "ambient kubeconfig" not in json.dumps(provider.inputs.get("kubeconfig") or "")


def test_a_job_on_rack_pools_is_refused_on_a_fleet():
    # MultiKueue copies the JobSet alone to the worker; the ComputeDomain its pods claim a channel of stays
    # behind, so on the worker they would wait for a claim template that never comes.
    rack = outputs("aws-gb200")
    racked = [("gb200", "organization/trainplane/aws-gb200", rack), *workers()]
    spec = job(nodePools=None, nodePool="gb200-block", nodes={"min": 18, "max": 18}, gpusPerNode=4, volumes=None,
               trainer={"model": "gpt-small", "globalBatchSize": 576, "microBatchSize": 8, "steps": 10})  # fmt: skip
    fits, problems = check_fleet_job(spec, racked)
    assert [f.name for f in fits if f.fits] == ["gb200"]
    assert problems == [
        "job.nodePools: on worker gb200 they are NVL72 rack pools, whose pods claim a channel of the job's "
        "ComputeDomain, and MultiKueue copies only the JobSet to a worker, not the ComputeDomain: the pods "
        "would never start; run a rack job on its platform (platformStack)"
    ]
