"""A job image on a placeholder registry (the examples' `ghcr.io/example/...`, reserved domains, an
unfilled `<your-registry>`) is a note naming `job.image` in `trainplane plan` and in `trainplane verify`
(the scheduling check), never a failure; a real registry gets none."""

from __future__ import annotations

import dataclasses
import json

import pytest

from components.placeholder_images import placeholder_note, placeholder_registry
from infra.verify.live import ClusterState, verify_state
from tests.helpers.cli import cli
from tests.helpers.plans import ROOT
from tests.helpers.verify_plans import run, stack_plan

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

EXAMPLE_IMAGE = "ghcr.io/example/trainplane-trainer:0.1.0"
REAL_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainplane-trainer:0.1.0"


@pytest.mark.parametrize(
    ("image", "found"),
    [
        (EXAMPLE_IMAGE, "ghcr.io/example/"),
        ("GHCR.io/Example/trainer@sha256:" + "0" * 64, "ghcr.io/example/"),
        ("registry.example/trainer:1", ".example"),
        ("registry.example.com:5000/ml/trainer:1", "example.com"),
        ("example.org/trainer:1", "example.org"),
        ("registry.invalid/trainer:1", ".invalid"),
        ("<your-registry>/trainer:1", "<your-registry>"),
        ("ghcr.io/your-org/trainer:1", "your-org"),
    ],
)
def test_placeholder_registries_are_recognised(image, found):
    assert placeholder_registry(image) == found


@pytest.mark.parametrize(
    "image",
    [
        REAL_IMAGE,
        "us-docker.pkg.dev/ml-prod/trainers/trainplane-trainer:0.1.0",
        "ghcr.io/examples-org/trainer:1",  # another organisation, not the stand-in
        "myexample.com/trainer:1",  # not a subdomain of example.com
        "localhost:5000/trainer:1",
        "pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime",  # Docker Hub
        "example/trainer:1",  # Docker Hub's `example` namespace: no host part
    ],
)
def test_real_registries_are_not_placeholders(image):
    assert placeholder_registry(image) is None
    assert placeholder_note(image, "job.image") is None


def test_the_plan_of_a_job_on_the_example_image_notes_it():
    text = cli("plan", "gpt-small-aws-dev", cached=True)
    data = cli("plan", "gpt-small-aws-dev", "--json", cached=True)
    assert text.returncode == data.returncode == 0, text.stderr
    note = (
        f"job.image: {EXAMPLE_IMAGE} is on a placeholder registry (ghcr.io/example/), which no cluster can "
        "pull from: its pods would be scheduled and never start (ImagePullBackOff); build trainer/Dockerfile, "
        "push it to your registry and set job.image"
    )
    assert f"  note: {note}" in text.stdout.splitlines()
    assert json.loads(data.stdout)["notes"] == [note]


def test_the_plan_of_a_job_on_a_real_registry_has_no_note(tmp_path):
    stack = (ROOT / "stacks" / "Pulumi.gpt-small-aws-dev.yaml").read_text()
    assert EXAMPLE_IMAGE in stack
    path = tmp_path / "Pulumi.gpt-small-real.yaml"
    path.write_text(stack.replace(EXAMPLE_IMAGE, REAL_IMAGE))
    data = cli("plan", str(path), "--json", cwd=ROOT, cached=True)
    assert data.returncode == 0, data.stderr
    assert json.loads(data.stdout)["notes"] == []


def test_a_platform_plan_notes_its_controllers_without_an_image_and_nothing_else():
    # trainplane publishes no controller image: unset, the controllers' pods name an .invalid image and the
    # plan says so (it said nothing: the pods would have failed to pull after `pulumi up`).
    data = cli("plan", "aws-h100-reserved", "--json", cached=True)
    assert data.returncode == 0, data.stderr
    (note,) = json.loads(data.stdout)["notes"]
    assert note.startswith(
        "platform.images.controller: not set, so Deployment gpu-operator/trainplane-gpu-health, "
        "Deployment kueue-system/trainplane-block-window would not start"
    )


def test_a_platform_with_its_controller_image_set_has_no_note(tmp_path):
    from infra.plan import unset_controller_note
    from tests.helpers.plans import plan_object, platform_object

    obj = platform_object("aws-dev")
    obj["images"] = {
        "controller": "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainplane-controller@sha256:" + "a" * 64
    }
    assert unset_controller_note(plan_object(obj)) is None


def _image_notes(plan) -> list[str]:
    report = run(plan, "scheduling")
    assert report.check("scheduling").status == "pass", report.findings  # a note, never a failure
    return [n for n in report.check("scheduling").notes if n.startswith("job.image:")]


def test_verify_scheduling_notes_a_job_image_on_a_placeholder_registry():
    """Broken plan for the scheduling check's placeholder-image note: the example stack's image."""
    plan = stack_plan("gpt-small-aws-dev")
    assert _image_notes(plan) == [placeholder_note(EXAMPLE_IMAGE, "job.image")]
    unfilled = dataclasses.replace(plan, config={**(plan.config or {}), "image": "<your-registry>/trainer:1"})
    assert [n.split(" is ")[0] for n in _image_notes(unfilled)] == ["job.image: <your-registry>/trainer:1"]


def test_verify_scheduling_has_no_image_note_for_a_real_registry_or_a_platform():
    plan = stack_plan("gpt-small-aws-dev")
    assert _image_notes(dataclasses.replace(plan, config={**(plan.config or {}), "image": REAL_IMAGE})) == []
    # A platform's own plan: its synthesized training pods use verify's stand-in image, which is no job's.
    assert _image_notes(stack_plan("aws-dev")) == []


def test_verify_prints_the_note_and_still_passes():
    proc = cli("verify", "gpt-small-aws-dev", cached=True)
    assert proc.returncode == 0, proc.stderr
    assert f"scheduling: note: job.image: {EXAMPLE_IMAGE} is on a placeholder registry" in proc.stdout


def test_verify_live_notes_it_too():
    """Against a running cluster (`verify JOB --kubeconfig`) the pods' ImagePullBackOff is what follows."""
    report = verify_state(stack_plan("gpt-small-aws-dev"), ClusterState(), ["scheduling"])
    assert report.mode == "live"
    notes = report.check("scheduling").notes
    assert placeholder_note(EXAMPLE_IMAGE, "job.image") in notes
