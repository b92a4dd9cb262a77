"""A dump written by the independent mock runner (../shared/checks/mockplan.py) verifies like the offline plan
(tests/unit/infra/verify/test_verify_stacks.py has the rest)."""

from __future__ import annotations

import re

import pytest

from infra.verify import verify
from infra.verify.dump import load_dump
from tests.helpers.mockplan import MOCKPLAN
from tests.helpers.verify_plans import plan


def _shape(lines: list[str]) -> list[str]:
    # Mock engines name computed outputs differently (ids, ARNs); compare the findings without them.
    return sorted(re.sub(r"[\w.-]*-id\b|arn:aws:[^ ]*", "<id>", line) for line in lines)


@pytest.mark.skipif(not MOCKPLAN.exists(), reason="../shared/checks/mockplan.py not present")
def test_a_mockplan_dump_verifies_like_the_offline_plan(mockplan):
    from_dump = verify(load_dump(mockplan("aws-dev")))
    offline = verify(plan("aws-dev"))
    assert (from_dump.cloud, from_dump.kubernetes_version) == ("aws", "1.35")
    assert _shape([f.line() for f in from_dump.findings]) == _shape([f.line() for f in offline.findings])
