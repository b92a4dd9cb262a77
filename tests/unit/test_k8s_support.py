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


def test_today_is_injectable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPLANE_TODAY", "2026-11-28")
    assert ks.today() == DAY


def test_every_section_has_source_and_as_of() -> None:
    for cloud, section in ks.calendar().items():
        assert section["source"] and section["asOf"], cloud


def test_autoscaler_image_is_pinned_per_minor_and_a_missing_minor_is_an_error() -> None:
    from components.aws.autoscaler import image_tag

    assert image_tag("1.35") == "v1.35.2"
    with pytest.raises(ValueError, match=r"kubernetesVersion 1\.29: no cluster-autoscaler image"):
        image_tag("1.29")
