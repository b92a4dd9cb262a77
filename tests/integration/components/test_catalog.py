"""The GPU catalog agrees with the AWS instance data that moto ships (AWS DescribeInstanceTypes output)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import moto
import pytest

from components.catalog import catalog

# Catalog GPU kind -> GPU name as AWS reports it.
AWS_GPU_NAME = {
    "A10G": "A10G",
    "L4": "L4",
    "L40S": "L40S",
    "A100-40GB": "A100",
    "A100-80GB": "A100",
    "H100": "H100",
    "H200": "H200",
    "B200": "B200",
    "B300": "B300",
    "GB200": "B200",  # AWS names the GPU, not the superchip
    "GB300": "B300",
    "RTX-PRO-6000": "RTX PRO Server 6000",
}
# Catalog types that moto's data (moto 5.2.5) does not have yet: UltraServer nodes do not show up in
# DescribeInstanceTypes outside the regions that sell them (aws/eks-charts hack/update-efa-instance-types.sh
# hard-codes them for that reason). They are checked against their documented source instead: each names
# it and lists the fields no primary source confirmed (`unverified`).
NOT_IN_MOTO = {"p6e-gb200.36xlarge", "p6e-gb300.36xlarge"}


@cache
def aws_instance_types() -> dict:
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as f:
        return json.load(f)


def aws_shapes():
    for kind in catalog().gpu_names():
        for shape in catalog().gpu(kind).shapes_on("aws"):
            yield pytest.param(kind, shape, id=shape.name)


def test_the_aws_types_moto_lacks_are_named_and_carry_their_documented_source():
    lacking = {s.name for _, s in (p.values for p in aws_shapes()) if s.name not in aws_instance_types()}
    assert lacking == NOT_IN_MOTO, "moto gained or lost a catalog type: check it against moto's data"
    for name in sorted(lacking):
        shape = catalog().machine("aws", name)
        assert shape.source and "moto" in shape.source and "lack" in shape.source, name
        assert shape.unverified, f"{name}: say which fields no primary source confirmed"


@pytest.mark.parametrize(("kind", "shape"), [p for p in aws_shapes() if p.values[1].name not in NOT_IN_MOTO])
def test_aws_entry_matches_aws_instance_data(kind, shape):
    data = aws_instance_types()[shape.name]
    gpu = data["GpuInfo"]["Gpus"][0]
    assert gpu["Name"] == AWS_GPU_NAME[kind]
    assert gpu["Count"] == shape.gpus
    assert gpu["MemoryInfo"]["SizeInMiB"] == round(shape.gpu_memory_gib * 1024)
    assert data["VCpuInfo"]["DefaultVCpus"] == shape.vcpus
    assert data["MemoryInfo"]["SizeInMiB"] == round(shape.memory_gib * 1024)
    efa = (data["NetworkInfo"].get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)
    assert efa == shape.efa_interfaces
    assert (data.get("InstanceStorageInfo") or {}).get("TotalSizeInGB", 0) == shape.local_nvme_gb


def test_catalog_lists_every_aws_size_of_the_families_it_covers():
    # A family half-listed would make spot pools draw from fewer instance types than they could.
    listed = {s.name for k in catalog().gpu_names() for s in catalog().gpu(k).shapes_on("aws")}
    families = {n.split(".")[0] for n in listed}
    by_name = {v: k for k, v in AWS_GPU_NAME.items()}
    missing = sorted(
        name
        for name, data in aws_instance_types().items()
        if name.split(".")[0] in families
        and data.get("GpuInfo")
        and data["GpuInfo"]["Gpus"][0]["Name"] in by_name
        and name not in listed
    )
    assert missing == []
