"""The program as the Pulumi engine runs it: only the SDKs a stack needs, the independent checkers agree."""

from __future__ import annotations

import pytest

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def test_invalid_config_fails_the_program_before_registering_anything():
    import pulumi

    from infra.mockcloud import run_program
    from tests.helpers.plans import config_for, platform_object

    raw = platform_object("onprem-dev")
    raw["nodePools"][0]["gpu"] = "H1000"
    with pytest.raises(pulumi.RunError) as info:
        run_program(config_for(raw), "bad")
    assert "platform.nodePools[0].gpu: 'H1000' is not a known GPU" in str(info.value)


def test_a_stack_with_neither_platform_nor_job_is_refused():
    import pulumi

    from infra.mockcloud import run_program

    with pytest.raises(
        pulumi.RunError, match="exactly one of trainplane:platform, trainplane:job or trainplane:fleet"
    ):
        run_program({"aws:region": "us-east-1"}, "empty")
