"""`trainplane plan` lists each team's idle policy, one line per team (issue 20, point 3), and `--json` the
same as `idlePolicies`."""

from __future__ import annotations

import json

import pytest
import yaml

from infra.cli import main
from tests.helpers import idle_data as D
from tests.helpers.plans import platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    platform = platform_object("aws-h100-reserved")
    platform["teams"] = D.TEAMS
    path = tmp_path_factory.mktemp("plan-idle") / "Pulumi.idle-test.yaml"
    path.write_text(yaml.safe_dump({"config": {"aws:region": "us-east-1", "trainplane:platform": platform}}))
    return path


def test_plan_prints_one_idle_line_per_team(stack, capsys):
    assert main(["plan", str(stack)]) == 0
    out = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("idle ")]
    assert out == [
        "idle research: a job whose GPUs average under 5% for 30m raises TrainplaneJobGpuIdle and a GpuIdle "
        "Event, and is requeued (it checkpoints on SIGTERM and waits in its queue again); exempt: "
        "trainplane.dev/idle-exempt=true",
        "idle eval: a job whose GPUs average under 10% for 1h raises TrainplaneJobGpuIdle and a GpuIdle Event "
        "(action alert: nothing else); exempt: trainplane.dev/idle-exempt=true, tier=interactive",
        "idle ops: no idle policy (only the per-pod GpuIdleButAllocated alert)",
    ]


def test_plan_json_lists_the_policies(stack, capsys):
    assert main(["plan", str(stack), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["idlePolicies"] == [
        {"team": "research", "gpuUtilBelow": 5.0, "for": "30m", "action": "requeue", "exemptLabels": []},
        {
            "team": "eval",
            "gpuUtilBelow": 10.0,
            "for": "1h",
            "action": "alert",
            "exemptLabels": ["tier=interactive"],
        },
        {"team": "ops", "gpuUtilBelow": None, "for": None, "action": None, "exemptLabels": []},
    ]
