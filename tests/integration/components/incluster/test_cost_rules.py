"""The cost recording rules, rendered from the real PrometheusRule of stacks/Pulumi.aws-h100-reserved.yaml
(with its h100-odcr reservation owned by team research), run by `promtool test rules` on the synthetic
cluster of tests/helpers/cost_data.py; the expected dollars are worked out by hand there, compared in
whole cents (round(x * 100)) so float noise cannot pass or fail a case."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.helpers import cost_data as D
from tests.helpers import procs
from tests.helpers.cost_stack import owned_platform
from tests.helpers.plans import plan_object

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not on PATH (CI installs Debian's prometheus)"
)


def rule_groups(platform: dict) -> list[dict]:
    (cr,) = [r for r in plan_object(platform).resources if r.type.endswith("PrometheusRule")]
    groups = [g for g in cr.inputs["spec"]["groups"] if g["name"] == "trainplane-cost"]
    assert groups, "the stack's PrometheusRule has no trainplane-cost group"
    return groups


@pytest.fixture(scope="module")
def cost_rule_groups() -> list[dict]:
    return rule_groups(owned_platform())


def cents(dollars: float) -> int:
    return round(dollars * 100)


def samples(record: str, expected: dict, keys: tuple[str, ...]) -> dict:
    return {
        "expr": f"round({record} * 100)",
        "eval_time": f"{D.HOUR_END_MIN}m",
        "exp_samples": [
            {
                "labels": "{"
                + ",".join(
                    f'{k}="{v}"' for k, v in zip(keys, k if isinstance(k, tuple) else (k,), strict=True)
                )
                + "}",
                "value": cents(dollars),
            }
            for k, dollars in sorted(expected.items())
        ],
    }


def run(
    tmp_path, groups: list[dict], tests: list[dict], rows: D.Rows | None = None
) -> subprocess.CompletedProcess:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": D.promtool_series(rows), "promql_expr_test": tests}],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    return procs.run(
        [PROMTOOL, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def test_the_price_series_is_the_plans_price_per_gpu_hour(cost_rule_groups, tmp_path):
    want = {
        f'{{capacity="{cap}",pool="{pool}"}}': cents(D.PRICE[pool] * 100)
        for pool, cap in (
            ("h100-od", "on-demand"),
            ("h100-spot", "spot"),
            ("h100-block", "capacity-block"),
            ("h100-odcr", "reservation"),
        )
    }
    test = {
        "expr": "round(trainplane:pool_gpu_hourly_price:dollars * 10000)",
        "eval_time": "1m",
        "exp_samples": [{"labels": k, "value": v} for k, v in sorted(want.items())],
    }
    got = run(tmp_path, cost_rule_groups, [test])
    assert got.returncode == 0, got.stdout + got.stderr


@pytest.mark.parametrize("by", ["team", "job", "pool"])
def test_cost_of_the_hour_by(by, cost_rule_groups, tmp_path):
    keys = ("team", "job") if by == "job" else (by,)
    test = samples(f"trainplane:{by}_gpu_cost:dollars_1h", D.HOUR[by], keys)
    got = run(tmp_path, cost_rule_groups, [test])
    assert got.returncode == 0, got.stdout + got.stderr


@pytest.mark.parametrize("by", ["team", "pool"])
def test_idle_cost_of_the_hour_by(by, cost_rule_groups, tmp_path):
    """Reservations cost their whole size less what pods held (h100-odcr to its owner research, the
    Capacity Block to unassigned); an on-demand or spot node its allocatable GPUs no pod held."""
    test = samples(f"trainplane:{by}_gpu_idle_cost:dollars_1h", D.HOUR_IDLE[by], (by,))
    got = run(tmp_path, cost_rule_groups, [test])
    assert got.returncode == 0, got.stdout + got.stderr


def test_a_pod_that_ran_part_of_the_window_pays_only_its_minutes(cost_rule_groups, tmp_path):
    """gpt-1 ran 30 of the hour's 60 minutes on the Capacity Block: 8 GPUs x $3.9325 x 0.5 h = $15.73, where
    avg_over_time(rate) x 1 h would say $31.46; over the day window (samples 0..180, 181 minutes from the
    first) it ran minutes 0..90: 91 minutes."""
    day = {
        "expr": 'round(trainplane:pool_gpu_cost:dollars_1d{pool="h100-block"} * 100)',
        "eval_time": "180m",
        "exp_samples": [
            {"labels": '{pool="h100-block"}', "value": cents(8 * D.PRICE["h100-block"] * 91 / 60)}
        ],
    }
    hour = samples("trainplane:pool_gpu_cost:dollars_1h", D.HOUR["pool"], ("pool",))
    got = run(tmp_path, cost_rule_groups, [hour, day])
    assert got.returncode == 0, got.stdout + got.stderr


def test_a_capacity_block_costs_nothing_outside_its_dates(tmp_path):
    """The stack's own block (2026-12-01 to 2026-12-15) at promtool's minute 120 (1970): its 32 GPUs are not
    paid for then, so no idle dollars; the ODCR, which has no dates, still is (issue 30, major 3)."""
    test = samples(
        "trainplane:pool_gpu_idle_cost:dollars_1h",
        {**D.HOUR_IDLE["pool"], "h100-block": 0.0},
        ("pool",),
    )
    got = run(tmp_path, rule_groups(owned_platform(block=None)), [test])
    assert got.returncode == 0, got.stdout + got.stderr


def test_a_capacity_block_is_paid_only_up_to_its_end(tmp_path):
    """A block that ends at minute 60: over the day window at minute 180 its idle is minutes 0..59 only,
    32 GPUs less gpt-1's 8, for one hour: 24 x $3.9325 = $94.38 (was the whole 181 minutes)."""
    day = {
        "expr": 'round(trainplane:pool_gpu_idle_cost:dollars_1d{pool="h100-block"} * 100)',
        "eval_time": "180m",
        "exp_samples": [{"labels": '{pool="h100-block"}', "value": cents(24 * D.PRICE["h100-block"])}],
    }
    groups = rule_groups(owned_platform(block=("1970-01-01T00:00:00Z", "1970-01-01T01:00:00Z")))
    got = run(tmp_path, groups, [day])
    assert got.returncode == 0, got.stdout + got.stderr


def sliced_series(replicas: int) -> D.Rows:
    """The synthetic cluster with GPU time-slicing: every node advertises, and every pod requests, units of
    nvidia.com/gpu, `replicas` per physical GPU (NVIDIA/k8s-device-plugin "Shared Access to GPUs")."""
    units = {"kube_pod_container_resource_requests", "kube_node_status_allocatable"}
    for name, labels, values in D.series():
        yield name, labels, [v * replicas if name in units else v for v in values]


@pytest.mark.parametrize("by", ["team", "pool"])
def test_time_slicing_prices_physical_gpus(by, tmp_path):
    """With timeSlicing.replicas 4 each 8-GPU node advertises 32 units: the dollars, idle dollars and GPUs
    held are those of the physical GPUs, as without sharing (issue 30, major 6: were 4 x)."""
    platform = owned_platform()
    platform["gpuOperator"] = {"timeSlicing": {"replicas": 4}}
    held = {
        "expr": "round(sum by (team) (trainplane:gpus_held:count) * 100)",
        "eval_time": f"{D.HOUR_END_MIN}m",
        # gpt-0's 8 GPUs (gpt-1 has Succeeded at minute 90), ev-0's 4.
        "exp_samples": [
            {"labels": '{team="eval"}', "value": 400},
            {"labels": '{team="research"}', "value": 800},
        ],
    }
    tests = [
        samples(f"trainplane:{by}_gpu_cost:dollars_1h", D.HOUR[by], (by,)),
        samples(f"trainplane:{by}_gpu_idle_cost:dollars_1h", D.HOUR_IDLE[by], (by,)),
        held,
    ]
    got = run(tmp_path, rule_groups(platform), tests, rows=list(sliced_series(4)))
    assert got.returncode == 0, got.stdout + got.stderr
