"""verify k8s-support: broken plans name the rule (the day moved with TRAINPLANE_TODAY)."""

from __future__ import annotations

from functools import cache

import pytest

from infra.verify import plan_from_stack, verify

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


@cache
def _plan(stack: str):
    """Planned on 2026-11-28 (tests/conftest.py); the check then runs on the day each test sets."""
    return plan_from_stack(stack)


def _result(stack: str):
    report = verify(_plan(stack), ("k8s-support",))
    (res,) = [c for c in report.checks if c.name == "k8s-support"]
    return res


def test_k8s_support_passes_aws_dev_on_135_today() -> None:
    res = _result("aws-dev")
    assert res.status == "pass" and res.notes == []


def test_k8s_support_warns_60_days_before_standard_support_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPLANE_TODAY", "2027-02-01")
    res = _result("aws-dev")
    assert res.status == "pass"
    assert res.notes == [
        "warning: EKS 1.35 leaves standard support on 2027-03-27 (54 days): plan the upgrade"
    ]


def test_k8s_support_warns_in_extended_support(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPLANE_TODAY", "2027-04-01")
    res = _result("aws-dev")
    assert res.status == "pass"
    assert res.notes == [
        "warning: EKS 1.35 left standard support on 2027-03-27: control plane billed at $0.60/h extended "
        "support until 2028-03-27"
    ]


def test_k8s_support_fails_past_the_end_of_extended_support(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPLANE_TODAY", "2028-03-28")
    res = _result("aws-dev")
    assert res.status == "fail"
    assert [f.line() for f in res.findings] == [
        "k8s-support: kubernetesVersion: EKS 1.35 reached the end of extended support on 2028-03-27 "
        "(today 2028-03-28): upgrade the cluster"
    ]


def test_k8s_support_skips_an_existing_cluster() -> None:
    assert _result("onprem-dev").status == "skip"
