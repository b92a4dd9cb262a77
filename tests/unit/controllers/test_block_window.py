"""The Capacity Block window (issue 18, defect 8): Kueue admits to a block's flavor only inside the block's
dates. The controller is run for real, from the files the platform ships, against the fake API server of
test_gpu_health.py holding the plan's own ClusterQueues."""

from __future__ import annotations

import json

import pytest

from controllers.block_window_agent import desired, open_gpus, patch_ops
from tests.helpers.plans import planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

STACK = "aws-h100-reserved"
FLAVOR = "h100-capacity-block"
HOUR = 3600.0
TEAMS = [
    {"team": "research", "gpuQuota": 64, "clusterQueue": "research"},
    {"team": "eval", "gpuQuota": 16, "clusterQueue": "eval"},
]


def flavor(start: float, end: float, borrowing: bool = True) -> dict:
    return {
        "name": FLAVOR,
        "pools": [{"name": "h100-block", "gpus": 32, "start": start, "end": end}],
        "teams": TEAMS,
        "borrowing": borrowing,
    }


def test_the_block_flavor_has_quota_only_between_start_and_half_an_hour_before_the_end():
    start, end = 1000 * HOUR, 1336 * HOUR  # a 14-day block
    drain = 1800
    fl = flavor(start, end)
    assert desired(fl, start - 1, drain) == {"research": (0, 0), "eval": (0, 0)}
    # Inside: the plan's split of 32 GPUs (contract/quota.py), each may borrow up to its own quota.
    assert desired(fl, start, drain) == {"research": (26, 6), "eval": (6, 10)}
    assert desired(fl, end - drain - 1, drain) == {"research": (26, 6), "eval": (6, 10)}
    # EC2 starts reclaiming the instances 30 minutes before the end: no new job from then on.
    assert desired(fl, end - drain, drain) == {"research": (0, 0), "eval": (0, 0)}
    assert desired(flavor(start, end, borrowing=False), start, drain) == {"research": (26, 0), "eval": (6, 0)}
    # Two blocks behind one flavor: only the running one counts.
    two = [*fl["pools"], {"name": "b2", "gpus": 16, "start": end, "end": end + 100 * HOUR}]
    assert open_gpus(two, start + HOUR, drain) == 32
    assert open_gpus(two, end + HOUR, drain) == 16


def test_a_queue_already_right_is_not_patched():
    cq = {
        "metadata": {"resourceVersion": "7"},
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "96"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "26", "borrowingLimit": "6"},
                            ],
                        }
                    ]
                }
            ]
        },
    }
    assert patch_ops(cq, FLAVOR, 26, 6) == []
    assert patch_ops(cq, FLAVOR, 0, 0) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/1/nominalQuota", "value": "0"},
        {"op": "add", "path": "/spec/resourceGroups/0/flavors/0/resources/1/borrowingLimit", "value": "0"},
    ]


def test_the_platform_deploys_the_controller_with_least_privilege():
    result = planned(STACK)

    def named(kind: str) -> dict:
        (obj,) = [
            r.inputs
            for r in result.of_type(f"kubernetes:{kind}")
            if r.inputs["metadata"]["name"] == "trainplane-block-window"
        ]
        return obj

    (rule,) = named("rbac.authorization.k8s.io/v1:ClusterRole")["rules"]
    assert rule == {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["clusterqueues"],
        "resourceNames": ["eval", "research"],
        "verbs": ["get", "patch"],
    }
    binding = named("rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "trainplane-block-window", "namespace": "kueue-system"}
    ]
    assert named("core/v1:ServiceAccount")["metadata"]["namespace"] == "kueue-system"
    deploy = named("apps/v1:Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (c,) = pod["containers"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    config = json.loads(named("core/v1:ConfigMap")["data"]["config.json"])
    (pool,) = config["flavors"][0]["pools"]
    # The stack's blockStart / blockEnd.
    assert (pool["start"], pool["end"]) == (1796124600.0, 1797334200.0)
    # Stacks without a Capacity Block get none of it.
    assert not [
        r for r in planned("aws-dev").resources if "trainplane-block-window" in str(r.inputs.get("metadata"))
    ]
