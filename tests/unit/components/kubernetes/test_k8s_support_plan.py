"""The support calendar in `plan` and at load (issue 31): extended-support pricing with its reason, and
one line per minor the cloud cannot run."""

from __future__ import annotations

import json
from datetime import date

import pytest

from components.spec import ConfigError, PlatformSpec
from infra.plan_cost import estimate_cost
from tests.helpers.plans import platform_object


def _spec(stack: str, version: str) -> PlatformSpec:
    raw = json.loads(json.dumps(platform_object(stack)))
    raw["cluster"] = {**raw.get("cluster", {}), "kubernetesVersion": version}
    return PlatformSpec.load(raw)


def _problems(stack: str, version: str) -> list[str]:
    with pytest.raises(ConfigError) as e:
        _spec(stack, version)
    return [p for p in e.value.problems if "support calendar" in p or "support on" in p or "released" in p]


def test_an_eks_133_stack_pays_the_extended_rate_and_says_why() -> None:
    """Before, every EKS control plane was priced at $0.10/h, whatever its minor."""
    cost = estimate_cost(_spec("aws-dev", "1.33"), date(2026, 11, 28))
    assert cost.control_plane_hourly == 0.60
    assert cost.warnings[0] == (
        "EKS 1.33 left standard support on 2026-07-29: control plane billed at $0.60/h extended support "
        "until 2027-07-29"
    )
    assert "control plane: $0.60/h (extended support)" in " ".join(cost.assumptions)


def test_the_default_minor_pays_the_standard_rate_with_no_warning() -> None:
    cost = estimate_cost(_spec("aws-dev", "1.35"), date(2026, 11, 28))
    assert cost.control_plane_hourly == 0.10
    assert not [w for w in cost.warnings if "support" in w]


def test_eks_134_turns_extended_the_day_after_its_standard_end() -> None:
    assert estimate_cost(_spec("aws-dev", "1.34"), date(2026, 12, 2)).control_plane_hourly == 0.10
    assert estimate_cost(_spec("aws-dev", "1.34"), date(2026, 12, 3)).control_plane_hourly == 0.60


def test_a_gke_minor_past_standard_support_warns_that_its_fee_is_not_priced() -> None:
    """gcp-dev stays on 1.34 (a3-highgpu-8g boots COS 121 or older): GKE names no extended fee figure."""
    cost = estimate_cost(_spec("gcp-dev", "1.34"), date(2026, 11, 28))
    assert cost.control_plane_hourly == 0.10
    assert cost.warnings[0].startswith(
        "GKE 1.34 left standard support on 2026-10-01: the cloud's extended-support fee is not in the calendar"
    )


def test_a_minor_past_its_end_is_one_line_at_load() -> None:
    assert _problems("aws-dev", "1.31") == [
        "platform.cluster.kubernetesVersion: EKS 1.31 reached the end of extended support on 2026-11-26 "
        "(today 2026-11-28): upgrade the cluster"
    ]


def test_a_minor_not_in_the_calendar_lists_the_known_ones() -> None:
    assert _problems("gcp-byo-network", "1.36") == [
        "platform.cluster.kubernetesVersion: GKE 1.36 is not in the support calendar (known: 1.32, 1.33, 1.34, "
        "1.35; components/gcp/data/k8s_support.yaml)"
    ]


def test_an_unreleased_minor_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPLANE_TODAY", "2026-05-01")
    assert _problems("aws-dev", "1.36") == [
        "platform.cluster.kubernetesVersion: EKS 1.36 is not released until 2026-06-02 (today 2026-05-01)"
    ]


def test_an_existing_cluster_has_no_calendar() -> None:
    assert _spec("onprem-dev", "1.31").cluster.kubernetes_version == "1.31"
