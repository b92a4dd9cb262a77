"""The NCCL preflight's floors: one published figure per fabric kind and collective, with its source."""

from __future__ import annotations

import pytest

from components.gcp.fabric import FABRICS
from components.nccl_floors import FLOORS, IMAGES, floor_gbps, pool_fabric_kind


@pytest.mark.parametrize(
    ("kind", "collective", "machine", "gbps"),
    [
        ("tcpxo", "all_gather", None, 188.9),
        ("tcpx", "all_gather", None, 70.9),
        ("rdma", "all_gather", None, 329.0),
        ("efa", "all_reduce", "p5.48xlarge", 800.0),
        ("efa", "all_reduce", "p5en.48xlarge", 800.0),
        ("efa", "all_reduce", "p4d.24xlarge", 300.0),
    ],
)
def test_floor_table(kind, collective, machine, gbps):
    floor = floor_gbps(kind, collective, machine)
    assert floor.busbw_gbps == gbps and floor.nodes == 2 and floor.source
    assert floor.minimum() == round(gbps * 0.9, 2) and floor.minimum(1.0) == gbps


@pytest.mark.parametrize(
    ("kind", "collective", "machine"),
    [
        ("tcpxo", "all_reduce", None),
        ("efa", "all_reduce", "g6.48xlarge"),
        ("efa", "all_gather", "p5.48xlarge"),
        ("nvlink", "all_gather", None),
    ],
)
def test_missing_figures_raise_naming_what_is_missing(kind, collective, machine):
    with pytest.raises(KeyError, match=f"no NCCL {collective} floor for fabric '{kind}'"):
        floor_gbps(kind, collective, machine)


def test_every_gke_fabric_has_an_all_gather_floor_and_every_image_is_pinned():
    assert {f.kind for f in FABRICS} <= {f.kind for f in FLOORS if f.collective == "all_gather"}
    assert all(":" in i.image.rsplit("/", 1)[-1] and not i.image.endswith(":latest") for i in IMAGES.values())


def test_pool_fabric_kind_from_platform_outputs():
    assert pool_fabric_kind({"fabric": {"kind": "tcpxo"}, "extendedResources": {}}) == "tcpxo"
    assert pool_fabric_kind({"extendedResources": {"vpc.amazonaws.com/efa": 32}}) == "efa"
    assert pool_fabric_kind({"name": "cpu"}) is None


def test_a_rack_pool_is_mnnvl_and_has_no_floor_until_one_is_published():
    assert pool_fabric_kind({"rack": {"gpus": 72, "nodes": 18}, "fabric": {"kind": "efa"}}) == "mnnvl"
    with pytest.raises(KeyError, match="no NCCL all_reduce floor for fabric 'mnnvl'"):
        floor_gbps("mnnvl", "all_reduce")
