"""PlatformOutputs: what a platform stack exports is what a job stack parses, and a platform deployed
before a key existed still parses (defaults), so its job stacks plan as before."""

from __future__ import annotations

import copy

import pytest

from components.outputs import READ_KEYS, PlatformOutputs
from tests.helpers.plans import planned

NEWER_POOL_KEYS = ("nodeVcpus", "nodeMemoryGiB")


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_every_exported_key_is_read_back(stack):
    outputs = planned(stack).outputs
    assert set(READ_KEYS) | {"kubeconfig"} == set(outputs)
    parsed = PlatformOutputs.model_validate(outputs)
    assert parsed.exports().keys() == outputs.keys()
    assert [p.name for p in parsed.node_pools] == [p["name"] for p in outputs["nodePools"]]


def _older(outputs: dict) -> dict:
    """Outputs as a platform deployed before preemptionGraceSeconds and the pools' machine facts."""
    old = copy.deepcopy(outputs)
    old.pop("preemptionGraceSeconds")
    for pool in old["nodePools"]:
        for key in NEWER_POOL_KEYS:
            pool.pop(key)
    return old


@pytest.mark.parametrize(("stack", "grace"), [("aws-dev", 120), ("gcp-dev", 30), ("onprem-dev", 300)])
def test_an_older_platform_parses_with_the_defaults_of_its_cloud(stack, grace):
    new = PlatformOutputs.model_validate(planned(stack).outputs)
    old = PlatformOutputs.model_validate(_older(planned(stack).outputs))
    assert old.preemption_grace_seconds == new.preemption_grace_seconds == grace
    # Machine facts come back from the catalog for the machine types the older platform recorded.
    assert [(p.node_vcpus, p.node_memory_gib) for p in old.node_pools] == [
        (p.node_vcpus, p.node_memory_gib) for p in new.node_pools
    ]


def test_a_job_plans_the_same_on_an_older_platform(plan_stack):
    platform = planned("aws-dev").outputs
    now = plan_stack("gpt-small-aws-dev", {"aws-dev": platform})
    before = plan_stack("gpt-small-aws-dev", {"aws-dev": _older(platform)})
    assert {r.urn: r.inputs for r in before.resources} == {r.urn: r.inputs for r in now.resources}


def test_keys_a_newer_platform_adds_are_ignored():
    outputs = {**planned("onprem-dev").outputs, "someFutureKey": {"x": 1}}
    assert PlatformOutputs.model_validate(outputs).cluster_name == "lab"
