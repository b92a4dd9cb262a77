"""GPU catalog: which AWS instance types and GCP machine types carry which GPU, and what they cost.

The data lives in `data/gpus.yaml` so it can be reviewed and updated without touching code. Prices are
list prices for planning; `trainplane plan` shows them as assumptions and stack config can override them.

Example:
    >>> from components.catalog import catalog
    >>> [m.name for m in catalog().shapes("aws", "H100", gpus=8)]
    ['p5.48xlarge']
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

import yaml

Cloud = Literal["aws", "gcp"]
# Each cloud of the catalog file and the key its machine entries are named by.
CLOUD_KEYS: tuple[tuple[Cloud, str], ...] = (("aws", "instanceType"), ("gcp", "machineType"))


@dataclass(frozen=True)
class MachineShape:
    """One machine type on one cloud (GPU fields are 0/None for CPU machines)."""

    cloud: Cloud
    name: str
    vcpus: int
    memory_gib: float
    on_demand_hourly: float
    gpu: str | None = None
    gpus: int = 0
    gpu_memory_gib: float = 0.0
    efa_interfaces: int = 0
    accelerator_type: str | None = None
    local_ssd_count: int = 0


@dataclass(frozen=True)
class GpuKind:
    name: str
    memory_gib: float
    peak_bf16_tflops: float
    aws: tuple[MachineShape, ...]
    gcp: tuple[MachineShape, ...]

    def shapes(self, cloud: Cloud) -> tuple[MachineShape, ...]:
        return self.aws if cloud == "aws" else self.gcp

    def counts(self, cloud: Cloud) -> list[int]:
        return sorted({m.gpus for m in self.shapes(cloud)})


@dataclass(frozen=True)
class PriceBasis:
    """Where a cloud's prices come from, shown next to every cost estimate."""

    region: str
    source: str
    as_of: str
    spot_fraction: float
    spot_source: str


class Catalog:
    def __init__(self, doc: dict) -> None:
        self._gpus: dict[str, GpuKind] = {}
        self._by_name: dict[tuple[str, str], MachineShape] = {}
        for kind, entry in doc["gpus"].items():
            per_cloud: dict[str, tuple[MachineShape, ...]] = {}
            for cloud, key in CLOUD_KEYS:
                per_cloud[cloud] = tuple(
                    MachineShape(
                        cloud=cloud,
                        name=m[key],
                        vcpus=int(m["vcpus"]),
                        memory_gib=float(m["memoryGiB"]),
                        on_demand_hourly=float(m["onDemandHourly"]),
                        gpu=kind,
                        gpus=int(m["gpus"]),
                        gpu_memory_gib=entry["memoryMiB"] / 1024,
                        efa_interfaces=int(m.get("efaInterfaces", 0)),
                        accelerator_type=m.get("acceleratorType"),
                        local_ssd_count=int(m.get("localSsdCount", 0)),
                    )
                    for m in entry.get(cloud) or []
                )
            self._gpus[kind] = GpuKind(
                name=kind,
                memory_gib=entry["memoryMiB"] / 1024,
                peak_bf16_tflops=float(entry["peakBf16Tflops"]),
                aws=per_cloud["aws"],
                gcp=per_cloud["gcp"],
            )
        for cloud, key in CLOUD_KEYS:
            for m in doc.get("cpu", {}).get(cloud, []):
                shape = MachineShape(
                    cloud=cloud,
                    name=m[key],
                    vcpus=int(m["vcpus"]),
                    memory_gib=float(m["memoryGiB"]),
                    on_demand_hourly=float(m["onDemandHourly"]),
                )
                self._by_name[(cloud, shape.name)] = shape
        for kind in self._gpus.values():
            for shape in kind.aws + kind.gcp:
                self._by_name[(shape.cloud, shape.name)] = shape
        self.pricing = {
            cloud: PriceBasis(
                region=p["region"],
                source=p["source"],
                as_of=str(p["asOf"]),
                spot_fraction=float(p["spotFraction"]),
                spot_source=p["spotSource"],
            )
            for cloud, p in doc["pricing"].items()
        }

    def gpu_names(self) -> list[str]:
        return list(self._gpus)

    def gpu(self, name: str) -> GpuKind | None:
        return self._gpus.get(name)

    def machine_names(self, cloud: Cloud) -> list[str]:
        """Every instance/machine type of `cloud` the catalog knows (GPU and CPU), sorted."""
        return sorted(name for c, name in self._by_name if c == cloud)

    def machine(self, cloud: Cloud, name: str) -> MachineShape | None:
        """The shape of an instance/machine type, GPU or CPU; None when the catalog does not know it."""
        return self._by_name.get((cloud, name))

    def shapes(self, cloud: Cloud, gpu: str, gpus: int | None = None) -> list[MachineShape]:
        """Machines of `cloud` carrying `gpu` (optionally exactly `gpus` of them), cheapest first.

        Machines with the same GPU kind and count are interchangeable for a training job, which is what
        spot pools use to widen the capacity they can draw from.
        """
        kind = self._gpus.get(gpu)
        if kind is None:
            return []
        found = [m for m in kind.shapes(cloud) if gpus is None or m.gpus == gpus]
        return sorted(found, key=lambda m: m.on_demand_hourly)


@cache
def catalog() -> Catalog:
    """The packaged catalog, parsed once per process."""
    text = resources.files("components").joinpath("data/gpus.yaml").read_text()
    return Catalog(yaml.safe_load(text))
