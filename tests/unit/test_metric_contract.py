"""The dashboards and alerts query exactly metrics the trainer exports (names and types)."""

from __future__ import annotations

from components.kubernetes.dashboards.metrics import TRAINER_METRICS


def exported_names() -> set[str]:
    from trainer.metrics import Metrics

    registry = Metrics("contract").registry
    names: set[str] = set()
    for family in registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def test_every_trainer_metric_the_dashboards_use_is_exported():
    exported = exported_names()
    assert sorted(TRAINER_METRICS - exported) == []


def test_the_contract_is_not_vacuous():
    # The dashboards need at least the step, loss, throughput and checkpoint figures.
    for name in (
        "trainplane_step",
        "trainplane_loss",
        "trainplane_tokens_per_second",
        "trainplane_checkpoint_save_seconds",
    ):
        assert name in TRAINER_METRICS and name in exported_names()
