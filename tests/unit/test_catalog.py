"""The GPU catalog: its GPU kinds (tests/integration/test_catalog.py compares it with the AWS instance data
that moto ships)."""

from __future__ import annotations

from components.catalog import catalog

REQUIRED_KINDS = {"A10G", "L4", "L40S", "A100-40GB", "A100-80GB", "H100", "H100-MEGA", "H200", "B200"}


def test_catalog_has_every_required_gpu_kind():
    assert REQUIRED_KINDS <= set(catalog().gpu_names())


def test_gcp_shapes_carry_accelerator_strings_and_counts():
    a3 = catalog().machine("gcp", "a3-megagpu-8g")
    assert (a3.gpu, a3.gpus, a3.accelerator_type) == ("H100-MEGA", 8, "nvidia-h100-mega-80gb")
    assert catalog().machine("gcp", "g2-standard-24").gpus == 2
    assert catalog().machine("gcp", "a2-megagpu-16g").gpus == 16
    assert catalog().gpu("L4").counts("gcp") == [1, 2, 4, 8]
    for kind in catalog().gpu_names():
        for shape in catalog().gpu(kind).shapes_on("gcp"):
            assert shape.accelerator_type and shape.accelerator_type.startswith("nvidia-")


def test_every_price_has_a_source_and_date():
    for cloud in ("aws", "gcp"):
        basis = catalog().pricing[cloud]
        assert basis.source and basis.as_of and 0 < basis.spot_fraction < 1
    for kind in catalog().gpu_names():
        for shape in catalog().gpu(kind).shapes_on("aws") + catalog().gpu(kind).shapes_on("gcp"):
            assert shape.on_demand_hourly > 0, shape.name


def test_spot_pools_can_draw_on_all_same_shape_types():
    assert [m.name for m in catalog().shapes("aws", "H200", 8)] == ["p5en.48xlarge", "p5e.48xlarge"]
    assert len(catalog().shapes("aws", "A10G", 1)) == 5
