"""The GPU catalog: its GPU kinds (tests/integration/components/test_catalog.py compares it with the AWS instance data
that moto ships)."""

from __future__ import annotations

from components.catalog import catalog

REQUIRED_KINDS = {
    *("A10G", "L4", "L40S", "A100-40GB", "A100-80GB", "H100", "H100-MEGA", "H200", "B200"),
    *("B300", "GB200", "GB300", "RTX-PRO-6000"),
}
# Machines without a confirmed list price (issue 31): sold only as Capacity Blocks, or new and not yet
# priced from a source; the plan says "no price" for them instead of guessing.
# No current list price in the sources read (components/aws/data/catalog.yaml says why): the UltraServer nodes
# (Capacity Blocks only, no published rate found) and A4X / A4X Max (not in the GCP price table read).
UNPRICED = {"p6e-gb200.36xlarge", "p6e-gb300.36xlarge", "a4x-highgpu-4g", "a4x-maxgpu-4g-metal"}


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
            if shape.name in UNPRICED:
                assert shape.on_demand_hourly is None, shape.name
            else:
                assert shape.on_demand_hourly > 0, shape.name


def test_the_prices_of_todays_gpus_are_the_2026_list_prices():
    """Issue 31: the Blackwell machines are priced (they were null), from the dated price tables."""
    aws = catalog().pricing["aws"]
    assert (aws.region, aws.as_of) == ("us-east-1", "2026-07-20") and "karpenter-provider-aws" in aws.source
    gcp = catalog().pricing["gcp"]
    assert (gcp.region, gcp.as_of) == ("us-central1", "2026-08-20") and "Cyclenerd" in gcp.source
    hourly = {
        (cloud, name): catalog().machine(cloud, name).on_demand_hourly
        for cloud, name in [
            ("aws", "p6-b300.48xlarge"),
            ("aws", "g7e.2xlarge"),
            ("aws", "g7e.48xlarge"),
            ("aws", "g6.xlarge"),
            ("gcp", "g4-standard-48"),
            ("gcp", "g4-standard-384"),
            ("gcp", "g2-standard-4"),
        ]
    }
    assert hourly == {
        ("aws", "p6-b300.48xlarge"): 142.416,
        ("aws", "g7e.2xlarge"): 3.3631,
        ("aws", "g7e.48xlarge"): 33.1443,
        ("aws", "g6.xlarge"): 0.8048,
        ("gcp", "g4-standard-48"): 4.4999,
        ("gcp", "g4-standard-384"): 35.9994,
        ("gcp", "g2-standard-4"): 0.7068,
    }
    # GCP machines that bundle their GPUs carry one price for VM + GPUs (+ bundled local SSD), as before.
    assert catalog().machine("gcp", "a3-highgpu-8g").on_demand_hourly == 88.49
    # Prices with no current source keep their old date, so the plan flags them, or stay null.
    for cloud, name in [("aws", "p5e.48xlarge"), ("gcp", "a3-ultragpu-8g"), ("gcp", "a4-highgpu-8g")]:
        assert catalog().machine(cloud, name).price_as_of == "2025-06", name
    assert catalog().pricing["gcp"].spot_fraction == 0.58


def test_todays_gpus_and_their_facts():
    b300 = catalog().machine("aws", "p6-b300.48xlarge")
    assert (b300.gpu, b300.gpus, b300.efa_interfaces, b300.nvlink_domain) == ("B300", 8, 16, 8)
    assert b300.local_nvme_gb == 30400
    gb200 = catalog().machine("aws", "p6e-gb200.36xlarge")
    assert (gb200.gpu, gb200.gpus, gb200.nvlink_domain, gb200.capacity_block_only) == ("GB200", 4, 72, True)
    a4x = catalog().machine("gcp", "a4x-highgpu-4g")
    assert (a4x.gpu, a4x.accelerator_type, a4x.gpus, a4x.nvlink_domain) == ("GB200", "nvidia-gb200", 4, 72)
    a4x_max = catalog().machine("gcp", "a4x-maxgpu-4g-metal")
    assert (a4x_max.gpu, a4x_max.accelerator_type, a4x_max.gpus) == ("GB300", "nvidia-gb300", 4)
    assert catalog().gpu("RTX-PRO-6000").counts("aws") == [1, 2, 4, 8]
    assert catalog().gpu("RTX-PRO-6000").counts("gcp") == [1, 2, 4, 8]
    assert catalog().machine("gcp", "g4-standard-384").accelerator_type == "nvidia-rtx-pro-6000"
    # Peak dense throughput per GPU, bf16 and fp8 (None: no FP8 tensor cores).
    peaks = {
        k: (catalog().gpu(k).peak_bf16_tflops, catalog().gpu(k).peak_fp8_tflops)
        for k in ("A100-80GB", "H100", "B200", "B300", "GB200")
    }
    assert peaks == {
        "A100-80GB": (312, None),
        "H100": (989, 1979),
        "B200": (2250, 4500),
        "B300": (2250, 4500),
        "GB200": (2500, 5000),
    }
    # A machine as many GPUs as its NVLink domain, except rack-scale nodes and PCIe cards.
    assert catalog().machine("aws", "p5.4xlarge").nvlink_domain == 1
    assert catalog().machine("gcp", "a2-megagpu-16g").nvlink_domain == 16
    assert catalog().machine("aws", "g7e.48xlarge").nvlink_domain == 1
    assert catalog().machine("gcp", "a4-highgpu-8g").local_nvme_gb == 32 * 375


def test_gcp_gpu_nics_agree_with_the_fabric_table():
    from components.gcp.fabric_table import FABRICS

    for fabric in FABRICS:
        nics = fabric.rdma_subnets or fabric.networks
        for name in fabric.machine_types:
            assert catalog().machine("gcp", name).gpu_nics == nics, name


def test_pools_by_kind_and_count_take_a_priced_machine_first():
    assert catalog().shapes("aws", "L4", 1)[0].on_demand_hourly is not None


def test_spot_pools_can_draw_on_all_same_shape_types():
    assert [m.name for m in catalog().shapes("aws", "H200", 8)] == ["p5en.48xlarge", "p5e.48xlarge"]
    assert len(catalog().shapes("aws", "A10G", 1)) == 5
