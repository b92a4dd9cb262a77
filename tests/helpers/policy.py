"""The policy pack over the reference stacks' planned resources, for the tests: the conversion is the
pack's own offline runner (policy/trainplane_policies/offline.py); the plans are the tests' cached ones."""

from __future__ import annotations

from infra import stackfile
from policy.trainplane_policies.offline import (
    Record,
    find,
    records_of,
    resource_args,
    stack_args,
    stack_named,
    violations,
)
from tests.helpers.plans import ROOT, planned

__all__ = [
    "Record",
    "find",
    "records",
    "records_of",
    "resource_args",
    "stack_args",
    "stack_named",
    "violations",
]


def records(stack: str) -> list[Record]:
    """A fresh, editable copy of a reference stack's planned resources, with its stack config."""
    config = stackfile.load(stack, ROOT).config
    return records_of(planned(stack), config)
