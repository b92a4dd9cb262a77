"""verify egress (issue 30, major 7): a private network whose agents still need the internet fails, each
finding asserted by its rule's name (`image`, `install`); a private network with every agent mirrored by
digest passes; what counts as private is read from the spec."""

from __future__ import annotations

import copy
import functools

import pytest

from infra.verify.model import Plan
from tests.helpers.agent_images import IMAGES, RESERVED, private
from tests.helpers.plans import platform_object
from tests.helpers.verify_plans import edit, kind, lines, plan, plan_of, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def found(plan_: Plan, rule: str) -> list[str]:
    return [line for line in lines(run(plan_, "egress")) if line.startswith(f"egress: {rule}: ")]


@functools.cache
def _private_plan(images: tuple = (), stack: str = RESERVED) -> Plan:
    return plan_of(private(dict(images) if images else None, stack))


def test_a_private_network_with_the_stock_agents_fails_by_rule():
    from components.spec.images import CONTROLLER_IMAGE_UNSET

    broken = _private_plan()
    image, install = found(broken, "image"), found(broken, "install")
    assert any(
        "trainplane-gpu-health" in line and f"{CONTROLLER_IMAGE_UNSET}, not pinned by digest" in line
        for line in image
    ), image
    assert any("trainplane-block-window" in line for line in image), image
    assert any("nvcr.io/nvidia/cloud-native/dcgm" in line for line in image), image
    assert any("registry.k8s.io/pause:3.10" in line for line in image), image
    # The controllers install nothing at start any more (their image has everything).
    assert install == [], install


def test_a_private_network_with_every_agent_mirrored_by_digest_passes():
    report = run(_private_plan(tuple(IMAGES.items())), "egress")
    assert lines(report) == [], lines(report)
    assert any("Helm releases' images" in n and "gpu-operator" in n for n in report.check("egress").notes)


def test_a_digest_from_a_public_registry_still_fails():
    images = {**IMAGES, "blockWindow": "docker.io/library/python@sha256:" + "5" * 64}
    got = found(_private_plan(tuple(images.items())), "image")
    assert (
        len(got) == 1 and "trainplane-block-window" in got[0] and "pulls from docker.io, a public" in got[0]
    )


def test_an_install_at_start_fails_even_from_a_private_image():
    def pip_at_start(inputs: dict) -> None:
        c = inputs["spec"]["template"]["spec"]["containers"][0]
        c["command"] = ["sh", "-c", "pip install kopf==1.45.2 && exec python3 -m kopf run x.py"]

    broken = edit(
        _private_plan(tuple(IMAGES.items())), kind("Deployment", "trainplane-block-window"), pip_at_start
    )
    assert found(broken, "image") == []
    (got,) = found(broken, "install")
    assert "Deployment kueue-system/trainplane-block-window" in got and "pip install kopf" in got


def test_private_network_is_read_from_the_spec():
    """Unset, a brought VPC with a private endpoint (no NAT of the platform's) counts as private; the
    reference stack says it has egress. A made VPC has NAT gateways: nothing to check."""
    obj = platform_object("aws-byo-vpc")
    assert obj["network"]["internetEgress"] is True
    assert lines(run(plan("aws-byo-vpc"), "egress")) == []
    del obj["network"]["internetEgress"]
    unset = found(plan_of(obj), "image")
    assert unset and all("a brought VPC with a private endpoint and no NAT" in line for line in unset)
    gke = copy.deepcopy(platform_object("gcp-byo-network"))
    del gke["network"]["internetEgress"]
    assert any("private nodes in a brought network" in line for line in found(plan_of(gke), "image"))
    assert run(plan("aws-dev"), "egress").check("egress").notes[-1:] == [
        "the nodes reach the internet (a NAT, or addresses of their own): nothing to check"
    ]


def test_a_platform_without_a_controller_image_is_told_so_on_any_network():
    def notes(images: dict | None) -> list[str]:
        obj = platform_object("aws-dev")
        if images:
            obj["images"] = images
        return [n for n in run(plan_of(obj), "egress").check("egress").notes if "no controller image" in n]

    (note,) = notes(None)
    assert "Deployment gpu-operator/trainplane-gpu-health" in note and "make image" in note, note
    assert notes({"controller": "registry.example/trainplane-controller@sha256:" + "7" * 64}) == []
