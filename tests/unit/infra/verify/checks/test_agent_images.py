"""No egress, no platform (issue 30, major 7 and the controllers minor): every in-cluster agent takes an
image override pinned by digest (`platform.images`), an overridden pod installs nothing at start, and
every controller Deployment has a liveness probe, one replica and `Recreate` (verify's side:
test_verify_egress.py)."""

from __future__ import annotations

import functools
import os
import sys
import time

import pytest

from components.spec import ConfigError, PlatformSpec
from infra.verify.checks.admission import pod_templates
from infra.verify.checks.pod_security import violations
from tests.helpers import procs
from tests.helpers.agent_images import IMAGES, RESERVED, private
from tests.helpers.plans import plan_object, platform_object
from tests.helpers.verify_plans import plan

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _templates(result) -> dict[str, dict]:
    """Deployment/DaemonSet name -> pod spec, of the platform's own (non-Helm) objects."""
    out = {}
    for r in result.resources:
        if r.type in ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet"):
            out[r.inputs["metadata"]["name"]] = r.inputs["spec"]["template"]["spec"]
    return out


# ---- the spec -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(IMAGES))
def test_a_tag_only_override_is_one_clear_line(key):
    obj = platform_object("aws-dev")
    obj["images"] = {key: "python:3.12-slim"}
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    (line,) = e.value.problems
    assert line.startswith(
        f"platform.images.{key}: 'python:3.12-slim' is not valid here; expected an image pinned by digest"
    )
    assert "@sha256:<64 hex digits>" in line


def test_a_short_digest_is_refused_and_a_full_one_taken():
    obj = platform_object("aws-dev")
    obj["images"] = {"blockWindow": "r.example/python:3.12@sha256:" + "a" * 63}
    with pytest.raises(ConfigError):
        PlatformSpec.load(obj)
    obj["images"] = dict(IMAGES)
    assert PlatformSpec.load(obj).images.block_window == IMAGES["blockWindow"]


def test_the_old_controller_image_key_says_where_it_moved():
    obj = platform_object("aws-dev")
    obj["gpuHealth"] = {"controllerImage": "registry.example/gpu-health:1"}
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert e.value.problems == [
        "platform.gpuHealth.controllerImage: moved to images.gpuHealthController (pinned by digest, "
        "<repository>@sha256:<64 hex digits>)"
    ]


# ---- the pods -----------------------------------------------------------------------------------------


@functools.cache
def _overridden():
    return plan_object(private(IMAGES))


def test_every_agent_runs_its_override_and_nothing_installs_at_start():
    pods = _templates(_overridden())
    images = {
        name: sorted(c["image"] for c in [*p.get("initContainers", []), *p["containers"]])
        for name, p in pods.items()
    }
    assert images == {
        "trainplane-gpu-health": [IMAGES["gpuHealthController"]],
        "trainplane-block-window": [IMAGES["blockWindow"]],
        "trainplane-gpu-diag": sorted([IMAGES["gpuDiagnostic"], IMAGES["pause"]]),
    }
    for name, p in pods.items():
        for c in [*p.get("initContainers", []), *p["containers"]]:
            assert "pip" not in " ".join(c.get("command", []) + c.get("args", [])), (name, c["name"])


def test_without_overrides_the_controllers_name_the_unset_marker_and_install_nothing():
    from components.spec.images import CONTROLLER_IMAGE_UNSET

    pods = _templates(plan_object(platform_object(RESERVED)))
    for name in ("trainplane-block-window", "trainplane-gpu-health"):
        assert pods[name]["containers"][0]["image"] == CONTROLLER_IMAGE_UNSET, name
        assert "initContainers" not in pods[name], name


def test_one_controller_image_serves_both_controllers_unless_one_has_its_own():
    obj = platform_object(RESERVED)
    shared = "registry.example/trainplane-controller@sha256:" + "9" * 64
    obj["images"] = {"controller": shared, "blockWindow": IMAGES["blockWindow"]}
    pods = _templates(plan_object(obj))
    assert pods["trainplane-gpu-health"]["containers"][0]["image"] == shared
    assert pods["trainplane-block-window"]["containers"][0]["image"] == IMAGES["blockWindow"]
    assert pods["trainplane-block-window"]["containers"][0]["command"] == [
        "trainplane-controller",
        "block-window",
    ]


def test_controller_pods_still_pass_restricted_pod_security():
    """The controllers run where the namespace is privileged today; their pods meet `restricted` anyway
    (the heartbeat's emptyDir included), so a stricter namespace label cannot stop them."""
    for result in (_overridden(), plan_object(platform_object(RESERVED))):
        for r in result.resources:
            if r.type != "kubernetes:apps/v1:Deployment":
                continue
            for _where, meta, spec in pod_templates({"kind": "Deployment", **r.inputs}):
                assert violations(meta, spec, "restricted", (1, 33)) == [], r.inputs["metadata"]["name"]


# ---- liveness, one replica, Recreate ------------------------------------------------------------------


@pytest.mark.parametrize("stack", [RESERVED, "gcp-dev", "onprem-dev"])
def test_every_controller_deployment_has_a_liveness_probe_one_replica_and_recreate(stack):
    """kopf runs `--standalone` (no peering CRDs): two pods of one operator would act twice, so one
    replica, and Recreate so a rollout never runs the old and the new side by side (kopf docs,
    "Health-checks": exactly one pod of an operator at a time, also during restarts)."""
    p = plan(stack)
    deployments = p.objects("Deployment")
    assert deployments, stack
    for d in deployments:
        assert d.spec["replicas"] == 1 and d.spec["strategy"] == {"type": "Recreate"}, d.ref
        for c in d.spec["template"]["spec"]["containers"]:
            assert c.get("livenessProbe"), f"{d.ref} container {c['name']}"


@pytest.mark.integration  # starts a process (tests/helpers/tiers.py)
def test_the_block_window_heartbeat_is_what_its_probe_reads(tmp_path):
    from components.incluster.block_window import heartbeat_probe
    from controllers import agent_runtime

    beat, config = tmp_path / "alive", tmp_path / "config.json"
    config.write_text('{"intervalSeconds": 60}')
    rounds = []
    code = agent_runtime.run(
        "t",
        "t",
        ["--config", str(config), "--once", "--heartbeat", str(beat), "--api-url", "https://x"],
        lambda api, cfg: rounds.append(cfg),
        lambda url, kubeconfig: None,
    )
    assert code == 0 and rounds and beat.exists()
    probe = heartbeat_probe(str(beat), 300)["exec"]["command"]
    assert probe[0] == "python3"
    py = [sys.executable, *probe[1:]]
    assert procs.run(py, check=False).returncode == 0
    old = time.time() - 301
    os.utime(beat, (old, old))
    assert procs.run(py, check=False).returncode == 1
    beat.unlink()
    assert procs.run(py, check=False, capture_output=True).returncode == 1
    pod = _templates(plan_object(platform_object(RESERVED)))["trainplane-block-window"]
    (c,) = pod["containers"]
    assert c["args"][-2:] == ["--heartbeat", "/tmp/alive"]
    assert c["livenessProbe"]["exec"]["command"] == heartbeat_probe("/tmp/alive", 300)["exec"]["command"]
