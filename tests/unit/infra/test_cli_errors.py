"""Each mistake a newcomer makes is answered with one line naming what and where, and exit 2 (issue 22,
"Smaller:"); and `plan` of a job does not say "about 0 min"."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra import cli
from tests.helpers.plans import ROOT

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

JOB = (ROOT / "stacks" / "Pulumi.gpt-small-aws-dev.yaml").read_text()


def _stack(tmp_path: Path, text: str, name: str = "x") -> Path:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(text)
    return f


def _err(argv: list[str], capsys) -> list[str]:
    assert cli.main(argv) == 2
    return capsys.readouterr().err.strip().splitlines()


def test_job_errors_have_the_platform_errors_format(tmp_path, capsys):
    # They used to come under "invalid stack config:", the file path repeated on every line.
    bad = _stack(tmp_path, JOB.replace("team: research", "team: nope"))
    lines = _err(["plan", str(bad)], capsys)
    assert lines[0] == f"{bad}: 1 problem(s)"
    assert len(lines) == 2 and lines[1].startswith("job.team: 'nope' is not a team")


def test_a_mistyped_platform_stack_names_the_key_and_the_stacks_that_exist(tmp_path, capsys):
    bad = _stack(tmp_path, JOB.replace("trainplane/aws-dev", "trainplane/aws-dve"))
    (line,) = _err(["plan", str(bad)], capsys)
    assert line.startswith(
        f"{bad}: job.platformStack 'organization/trainplane/aws-dve': "
        f"{ROOT / 'stacks' / 'Pulumi.aws-dve.yaml'}: no such stack file; did you mean 'aws-dev'?; stacks: "
    )
    assert "gcp-h100-mega" in line


def test_a_platform_stack_that_is_a_job_stack_says_so(tmp_path, capsys):
    # It used to say "platform: must be a mapping, got NoneType".
    bad = _stack(tmp_path, JOB.replace("trainplane/aws-dev", "trainplane/gpt-small-aws-dev"))
    assert _err(["plan", str(bad)], capsys) == [
        f"{bad}: job.platformStack 'organization/trainplane/gpt-small-aws-dev': "
        f"{ROOT / 'stacks' / 'Pulumi.gpt-small-aws-dev.yaml'} is a job stack (trainplane:job), not a platform "
        "stack; name the platform stack the job runs on"
    ]


def test_an_unquoted_kubernetes_version_is_explained(tmp_path, capsys):
    text = (ROOT / "stacks" / "Pulumi.aws-dev.yaml").read_text()
    assert 'kubernetesVersion: "1.35"' in text
    bad = _stack(tmp_path, text.replace('kubernetesVersion: "1.35"', "kubernetesVersion: 1.30"))
    assert _err(["plan", str(bad)], capsys) == [
        f"{bad}: 1 problem(s)",
        "platform.cluster.kubernetesVersion: 1.3 is a number, not a version: YAML reads 1.30 as 1.3; "
        'write it in quotes: kubernetesVersion: "1.30"',
    ]


def test_a_mistyped_object_key_gets_a_did_you_mean(tmp_path, capsys):
    text = (
        (ROOT / "stacks" / "Pulumi.aws-dev.yaml")
        .read_text()
        .replace("trainplane:platform:", "trainplane:platfrom:")
    )
    bad = _stack(tmp_path, text)
    assert _err(["plan", str(bad)], capsys) == [
        f"{bad}: no trainplane:platform (or trainplane:job, trainplane:fleet) object in config; 'trainplane:platfrom' is not "
        "one: did you mean 'trainplane:platform'?"
    ]


@pytest.mark.parametrize("command", ["plan", "verify"])
def test_an_unknown_stack_lists_the_stacks_that_exist(command, capsys):
    (line,) = _err([command, "ew4-mgea"], capsys)
    assert line.startswith(f"{ROOT / 'stacks' / 'Pulumi.ew4-mgea.yaml'}: no such stack file")
    names = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert line.endswith(f"; stacks: {', '.join(names)}")


def test_plan_of_a_job_gives_its_creation_time_in_seconds():
    from infra.plan_output import duration

    assert duration(7) == "about 7 s"  # a job's three objects used to be "about 0 min"
    assert duration(1620) == "about 27 min"


def test_plan_of_a_job_prints_seconds(capsys):
    assert cli.main(["plan", "gpt-small-aws-dev"]) == 0
    out = capsys.readouterr().out
    assert "Critical path: about 7 s to create" in out and "about 0 min" not in out


def test_verify_against_a_cluster_it_cannot_use_is_one_line_exit_2(tmp_path, capsys):
    import json
    import socket

    assert _err(["verify", "onprem-dev", "--kubeconfig", "/nonexistent"], capsys) == [
        "--kubeconfig /nonexistent: no such file"
    ]
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "config"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    (line,) = _err(["verify", "onprem-dev", "--kubeconfig", str(config)], capsys)
    assert line.startswith(f"cannot read the cluster ({config}): MaxRetryError")


def test_pulumi_up_also_suggests_the_object_key():
    import json

    import pulumi

    from infra.mockcloud import run_program
    from tests.helpers.plans import platform_object

    with pytest.raises(pulumi.RunError) as err:
        run_program({"trainplane:platfrom": json.dumps(platform_object("onprem-dev"))}, "typo")
    assert str(err.value) == (
        "stack config must hold exactly one of trainplane:platform, trainplane:job or trainplane:fleet; "
        "'trainplane:platfrom' is not one: did you mean 'trainplane:platform'?"
    )
