"""A GB200 Capacity-Block pool on EKS as planned: its nodes' launch template masks the host IMEX service,
its NodePoolInfo carries the rack and the clique level."""

from __future__ import annotations

import pytest

from tests.helpers.plans import planned

pytestmark = pytest.mark.plans


def test_only_the_rack_pool_template_carries_user_data() -> None:
    templates = {
        r.name: r.inputs.get("userData")
        for r in planned("aws-gb200").resources
        if r.type == "aws:ec2/launchTemplate:LaunchTemplate"
    }
    assert templates["gb200-system-lt"] is None
    assert templates["gb200-gb200-block-lt"]
