"""The dashboards and alerts query exactly metrics the trainer exports (names and types)."""

from __future__ import annotations

import pytest

from components.incluster.dashboards.metrics import AWAITING_TRAINER, TRAINER_METRICS


def exported() -> dict[str, str]:
    """Every name a scrape of a fresh trainer shows (families and samples) -> the family's type."""
    from trainer.metrics import Metrics

    registry = Metrics("contract").registry
    names: dict[str, str] = {}
    for family in registry.collect():
        names[family.name] = family.type
        names.update({sample.name: family.type for sample in family.samples})
        if family.type == "counter":
            # A counter's samples carry _total; a labelled one has no sample until first used.
            names[family.name + "_total"] = family.type
    return names


def test_every_trainer_metric_the_dashboards_use_is_exported():
    assert sorted(TRAINER_METRICS - AWAITING_TRAINER - set(exported())) == []


def test_issue_14_metrics_are_exported_with_their_types():
    names = exported()
    missing = sorted(AWAITING_TRAINER - set(names))
    if missing:
        pytest.skip(f"awaiting the trainer branch of issue 14 for {', '.join(missing)}")
    assert names["trainplane_rank_step_seconds"] == "gauge"
    assert names["trainplane_hangs_total"] == "counter"
    assert names["trainplane_checkpoint_save_failures_total"] == "counter"
    assert names["trainplane_checkpoint_load_failures_total"] == "counter"


def test_the_contract_is_not_vacuous():
    # The dashboards need at least the step, loss, throughput and checkpoint figures.
    for name in (
        "trainplane_step",
        "trainplane_loss",
        "trainplane_tokens_per_second",
        "trainplane_checkpoint_save_seconds",
        "trainplane_checkpoint_save_failures_total",
    ):
        assert name in TRAINER_METRICS and name in exported()
