"""The observability check's rules through a real `promtool check rules` (tests/unit/infra/verify/test_verify_observability.py
has the rest)."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers.verify_plans import probe


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)"
)
def test_rules_go_through_promtool():
    bad = probe("up == 0", annotations={"summary": "{{ $labels.instance "})
    assert any("promtool check rules failed" in line for line in bad), bad
