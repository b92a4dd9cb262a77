"""The support calendar against the rules its sources state (each cloud's section:
components/<cloud>/data/k8s_support.yaml)."""

from __future__ import annotations

from datetime import date

from components import k8s_support as ks


def _plus_months(day: date, months: int) -> date:
    month = day.month - 1 + months
    return date(day.year + month // 12, month % 12 + 1, day.day)


def test_eks_rows_follow_the_release_calendar_14_plus_12_months() -> None:
    """The EKS user guide: standard support for the first 14 months after the EKS release, then 12 months of
    extended support; its release calendar's dates follow it to the day. Before, `released` was EKS Distro's
    release (endoflife.date's column: 1.33 2025-05-28, 1.34 2025-10-06), days off the EKS release."""
    for minor, row in ks.calendar()["eks"]["minors"].items():
        released = date.fromisoformat(row["released"])
        standard_end = date.fromisoformat(row["standardEnd"])
        assert _plus_months(released, 14) == standard_end, minor
        assert _plus_months(standard_end, 12) == date.fromisoformat(row["end"]), minor


def test_eks_135_is_in_standard_support_from_its_eks_release_day() -> None:
    """EKS released 1.35 on 2026-01-27 (its release calendar); before, a stack on 1.35 that day was refused
    as not released until 2026-01-28."""
    assert ks.problem("eks", "1.35", date(2026, 1, 27)) is None
    assert (
        ks.problem("eks", "1.35", date(2026, 1, 26))
        == "EKS 1.35 is not released until 2026-01-27 (today 2026-01-26)"
    )


def test_no_calendar_row_is_left_unverified() -> None:
    """Every row was read in (a transcript of) the cloud's own calendar; before, EKS 1.36 came from a blog."""
    for cloud, section in ks.calendar().items():
        assert section["verified"] is True, cloud
        for minor, row in section["minors"].items():
            assert row.get("verified", True) is True, (cloud, minor)


def test_the_gke_extended_warning_says_which_channel_keeps_the_minor() -> None:
    """GKE's extended support (and fee) is for the EXTENDED channel only; on another channel GKE upgrades the
    cluster. Before, the warning said only that the fee was higher, as if every channel paid it."""
    fee, warning = ks.control_plane_fee("gke", "1.34", date(2026, 11, 28), 0.10)
    assert fee == 0.10 and warning is not None
    assert (
        "it applies on the EXTENDED release channel, the only one that keeps 1.34 (on another, GKE upgrades "
        "the cluster)" in warning
    )
