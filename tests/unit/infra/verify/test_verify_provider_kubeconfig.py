"""verify's provider-kubeconfig rule (infra/verify/checks/provider_kubeconfig.py): a Kubernetes provider
whose `kubeconfig` pulumi-kubernetes cannot load - the `(ambient kubeconfig, context NAME)` an existing
cluster exports, handed on as a kubeconfig - fails by name; the reference stacks pass."""

from __future__ import annotations

from functools import cache

import pytest

from infra import stackfile
from infra.verify import verify
from infra.verify.checks.provider_kubeconfig import RULE, kubeconfig_problem
from infra.verify.fleet_model import fleet_plan
from infra.verify.model import Plan, from_run
from tests.helpers.fleet_verify import fleet
from tests.helpers.plans import ROOT, planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

PLACEHOLDER = "(ambient kubeconfig, context lab-admin)"


@cache
def fleet_job() -> Plan:
    """gpt-small-fleet-research as `verify` plans it (infra.verify.fleet_model.fleet_job_plan): the job's
    plan, on the platform of the first worker it fits."""
    raw = stackfile.load("gpt-small-fleet-research", ROOT).object("trainplane:job")
    assert isinstance(raw, dict)
    return from_run(planned("gpt-small-fleet-research"), raw, from_run(planned("aws-h100-reserved")))


def with_kubeconfig(plan: Plan, provider: str, kubeconfig: str) -> Plan:
    def edit(r):
        if r.type == "pulumi:providers:kubernetes" and r.name == provider:
            return {**r.inputs, "kubeconfig": kubeconfig}
        return None

    return plan.replaced(edit)


def rule_findings(plan: Plan, check: str) -> list[str]:
    return [f.message for f in verify(plan, [check]).check(check).findings if f.message.startswith(RULE)]


def test_the_reference_fleet_job_and_fleet_pass():
    assert rule_findings(fleet_job(), "cloud") == []
    assert rule_findings(fleet(), "fleet-access") == []


def test_a_fleet_job_whose_worker_provider_is_the_ambient_placeholder_fails_by_name():
    broken = with_kubeconfig(fleet_job(), "worker-aws-h100", PLACEHOLDER)
    assert rule_findings(broken, "cloud") == [
        f"{RULE}: provider worker-aws-h100: its kubeconfig is '{PLACEHOLDER}', what a platform on the ambient "
        "kubeconfig exports, not a kubeconfig: give the provider no kubeconfig and context 'lab-admin' "
        "(components/fleet/providers.py platform_provider); the cluster is unreachable at create "
        "(pulumi-kubernetes v4.32.0 provider.go Configure: clusterUnreachable)"
    ]
    assert not verify(broken, ["cloud"]).ok


def test_a_fleet_whose_lab_provider_is_the_ambient_placeholder_fails_by_name():
    ref = fleet().fleet
    assert ref is not None
    plan = with_kubeconfig(ref.plan, "research-fleet-lab-cluster", PLACEHOLDER)
    workers = {w.name: (w.stack, w.plan) for w in ref.workers}
    broken = fleet_plan(ref.spec, plan, ref.manager, workers)
    (line,) = rule_findings(broken, "fleet-access")
    assert line.startswith(f"{RULE}: provider research-fleet-lab-cluster: its kubeconfig is '{PLACEHOLDER}'")


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (None, True),  # the ambient file, with the provider's context
        ("", True),
        ("/home/me/.kube/config", True),  # a path: only the deployer's machine knows
        ("04da6b54-80e4-46f7-96ec-b56ff0331ba9", True),  # not known until deploy
        ('{"apiVersion": "v1", "clusters": [{"name": "c", "cluster": {"server": "https://x"}}]}', True),
        (PLACEHOLDER, False),
        ("apiVersion: v1\nkind: Config\n", False),  # no clusters
        ("not a kubeconfig at all", False),
    ],
)
def test_what_pulumi_kubernetes_can_load(value, ok):
    assert (kubeconfig_problem(value) is None) == ok
