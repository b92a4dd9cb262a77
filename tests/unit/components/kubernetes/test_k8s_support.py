from datetime import date

import pytest

from components import k8s_support as ks

DAY = date(2026, 11, 28)


def test_eks_133_is_in_extended_support_on_the_day() -> None:
    assert ks.support_status("eks", "1.33", DAY).phase == "extended"
    assert ks.support_status("eks", "1.34", DAY).phase == "standard"
    assert ks.support_status("eks", "1.31", DAY).phase == "ended"


def test_gke_133_and_134_are_past_standard_support() -> None:
    assert ks.support_status("gke", "1.33", DAY).phase == "extended"
    assert ks.support_status("gke", "1.34", DAY).phase == "extended"


def test_newest_standard_on_both_clouds_is_135() -> None:
    assert ks.newest_standard(("eks", "gke"), DAY) == "1.35"


def test_unknown_minor_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"1\.29 is not in the eks support calendar"):
        ks.support_status("eks", "1.29", DAY)


def test_the_calendar_reads_the_day_commands_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """One TRAINPLANE_TODAY for prices and the support calendar (components.clock)."""
    from components.clock import today

    monkeypatch.setenv("TRAINPLANE_TODAY", "2026-12-03")
    assert ks.support_status("eks", "1.34", today()).phase == "extended"
    monkeypatch.setenv("TRAINPLANE_TODAY", "2026-12-01")
    assert ks.support_status("eks", "1.34", today()).phase == "standard"


def test_every_section_has_source_and_as_of() -> None:
    for cloud, section in ks.calendar().items():
        assert section["source"] and section["asOf"], cloud


def test_autoscaler_image_is_pinned_per_minor_and_a_missing_minor_is_an_error() -> None:
    from components.aws.autoscaler_images import image_tag

    assert image_tag("1.35") == "v1.35.2"
    with pytest.raises(ValueError, match=r"kubernetesVersion: '1\.29' has no cluster-autoscaler image"):
        image_tag("1.29")


def test_an_aws_stack_on_a_minor_without_an_autoscaler_image_is_one_line() -> None:
    """Before, the chart's own (older) image ran silently; then a traceback from inside the program."""
    import json

    from components.spec import ConfigError, PlatformSpec
    from tests.helpers.plans import platform_object

    raw = platform_object("aws-dev")
    raw["cluster"] = {**raw.get("cluster", {}), "kubernetesVersion": "1.29"}
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(json.loads(json.dumps(raw)))
    assert [p for p in e.value.problems if "autoscaler" in p] == [
        "platform.cluster.kubernetesVersion: '1.29' has no cluster-autoscaler image pinned (the autoscaler's minor "
        "must match the cluster's; pinned: 1.30, 1.31, 1.32, 1.33, 1.34, 1.35, 1.36)"
    ]


ONPREM = {
    "cloud": "kubernetes",
    "cluster": {"name": "lab", "context": "lab"},
    "nodePools": [{"name": "a100", "selector": {"gpu": "a100"}, "gpu": "A100-80GB", "gpusPerNode": 8}],
}


def test_the_default_version_is_the_newest_in_standard_support_and_follows_the_day(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, the default was the literal "1.33", in extended support on EKS ($0.60/h) since 2026-07-29."""
    from components.quickstart import platform_from_prompts
    from components.spec import PlatformSpec

    monkeypatch.setenv("TRAINPLANE_TODAY", "2026-11-28")
    assert PlatformSpec.load(ONPREM).cluster.kubernetes_version == "1.35"
    assert platform_from_prompts(lambda key: None)["cluster"]["kubernetesVersion"] == "1.35"
    # A year earlier 1.35 was not out on EKS (2026-01-27): the default was 1.34.
    monkeypatch.setenv("TRAINPLANE_TODAY", "2025-12-01")
    assert PlatformSpec.load(ONPREM).cluster.kubernetes_version == "1.34"
    assert platform_from_prompts(lambda key: None)["cluster"]["kubernetesVersion"] == "1.34"


def test_a_default_past_the_calendar_is_one_line_naming_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # After EKS 1.35 leaves standard support (2027-03-27) the calendar as of 2026-11-28 knows no minor in
    # standard support on both clouds: a stack that names none gets one line, not a ValueError traceback.
    from components.spec import ConfigError, PlatformSpec
    from tests.helpers.plans import platform_object

    monkeypatch.setenv("TRAINPLANE_TODAY", "2027-06-01")
    obj = platform_object("aws-dev")
    del obj["cluster"]["kubernetesVersion"]
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    (line,) = e.value.problems
    assert line.startswith("platform.cluster.kubernetesVersion: not set, and no minor is in standard support")
    assert "set it, or update trainplane" in line
