"""A machine type that carries GPUs is never a CPU pool (issue 31): one the catalog does not know is one
error naming the nearest known GPU types; one it knows needs its `gpu`. These used to plan as CPU pools
(no GPU taint, no nvidia.com/gpu, no price), and the only error came later, from Kueue's quota."""

from __future__ import annotations

import pytest

from components.spec import ConfigError, PlatformSpec
from tests.helpers.plans import platform_object


def problems_with_pool(stack: str, pool: dict) -> list[str]:
    obj = platform_object(stack)
    obj["nodePools"].append({"name": "extra", "minNodes": 0, "maxNodes": 1, **pool})
    with pytest.raises(ConfigError) as err:
        PlatformSpec.load(obj)
    return err.value.problems


@pytest.mark.parametrize(
    ("stack", "key", "name", "nearest"),
    [
        # RTX PRO 4500 (g7), T4 (g4dn), V100 (p3): EC2 types the provider knows, the catalog does not.
        ("aws-dev", "instanceType", "g7.2xlarge", "g7e.2xlarge"),
        ("aws-dev", "instanceType", "g4dn.xlarge", "g5.xlarge"),
        ("aws-dev", "instanceType", "p3.2xlarge", "p5.4xlarge"),
        # A fractional G4 and an A4 size GCP does not sell: well-formed names of GPU series.
        ("gcp-dev", "machineType", "g4-standard-6", "g4-standard-96"),
        ("gcp-dev", "machineType", "a4-highgpu-4g", "a4-highgpu-8g"),
    ],
)
def test_an_unknown_gpu_machine_type_is_one_error_naming_the_nearest_known(stack, key, name, nearest):
    (line,) = problems_with_pool(stack, {key: name})
    assert line.startswith(f"platform.nodePools[2].{key}: {name!r} is a GPU machine type")
    assert "never a CPU pool" in line
    assert nearest in line.split("nearest known: ")[1]


@pytest.mark.parametrize(
    ("stack", "key", "name", "gpu"),
    [
        ("aws-dev", "instanceType", "p6-b300.48xlarge", "B300"),
        ("aws-dev", "instanceType", "p6e-gb200.36xlarge", "GB200"),
        ("aws-dev", "instanceType", "g7e.48xlarge", "RTX-PRO-6000"),
        ("gcp-dev", "machineType", "a4x-highgpu-4g", "GB200"),
        ("gcp-dev", "machineType", "a4x-maxgpu-4g-metal", "GB300"),
        ("gcp-dev", "machineType", "g4-standard-48", "RTX-PRO-6000"),
    ],
)
def test_a_known_gpu_machine_without_gpu_says_which_gpu_it_carries(stack, key, name, gpu):
    (line,) = problems_with_pool(stack, {key: name})
    assert line.endswith(f"set gpu: {gpu}")


def test_a_p6_b300_pool_is_a_b300_gpu_pool():
    obj = platform_object("aws-dev")
    obj["nodePools"].append(
        {"name": "b300", "instanceType": "p6-b300.48xlarge", "gpu": "B300", "minNodes": 0, "maxNodes": 2}
    )
    pool = PlatformSpec.load(obj).node_pools[-1]
    assert pool.is_gpu and pool.gpu == "B300"


def test_cpu_machine_types_the_provider_knows_stay_cpu_pools():
    obj = platform_object("aws-dev")
    obj["nodePools"].append({"name": "cpu", "instanceType": "c7i.4xlarge", "minNodes": 0, "maxNodes": 1})
    assert not PlatformSpec.load(obj).node_pools[-1].is_gpu


@pytest.mark.parametrize("capacity", ["on-demand", "spot"])
def test_ultraserver_nodes_come_only_as_capacity_blocks(capacity):
    (line,) = problems_with_pool(
        "aws-dev",
        # A whole UltraServer of 4-GPU nodes, so that the capacity is the one problem.
        {
            "instanceType": "p6e-gb200.36xlarge",
            "gpu": "GB200",
            "gpusPerNode": 4,
            "maxNodes": 18,
            "capacity": capacity,
        },
    )
    assert line == (
        "platform.nodePools[2].capacity: p6e-gb200.36xlarge is sold only as Capacity Blocks (UltraServers); "
        f"use capacity: capacity-block, not {capacity}"
    )
