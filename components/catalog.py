"""GPU catalog: which machines of each cloud carry which GPU, and what they cost.

The catalog is open: the GPU kinds are cloud-neutral (`data/gpus.yaml`, `gpus:` with their memory and
peak throughput), and each cloud's backend brings its section (`CloudBackend.catalog_section`): its GPU
machines, CPU machines and price basis. The built-in clouds keep their sections in their own packages
(components/<cloud>/data/catalog.yaml), composed with the kinds here when the catalog loads, so they can
be reviewed and updated without touching code. Prices are list prices
for planning; `trainplane plan` shows them as assumptions and stack config can override them.

Example:
    >>> from components.catalog import catalog
    >>> [m.name for m in catalog().shapes("aws", "H100", gpus=8)]
    ['p5.48xlarge']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from components.backends import CloudBackend


@dataclass(frozen=True)
class MachineShape:
    """One machine type on one cloud (GPU fields are 0/None for CPU machines)."""

    cloud: str
    name: str
    vcpus: int
    memory_gib: float
    on_demand_hourly: float | None  # None: no confirmed list price (see price_source / capacity_block_only)
    gpu: str | None = None
    gpus: int = 0
    gpu_memory_gib: float = 0.0
    efa_interfaces: int = 0
    accelerator_type: str | None = None
    local_ssd_count: int = 0
    # Added with the Blackwell catalog (issue 31); defaults keep older callers and data working.
    local_nvme_gb: int = 0  # instance-store NVMe in decimal GB (AWS); GCP: bundled local SSDs x 375 GB
    gpu_nics: int = 0  # GPUDirect (TCPX/TCPXO) or RDMA NICs for GPU traffic (GCP; EFA on AWS is above)
    nvlink_domain: int = 0  # GPUs one NVLink domain joins (8: a node; 72: an NVL72 rack of 18 nodes)
    capacity_block_only: bool = False  # sold only as Capacity Blocks (no on-demand, spot or ODCR)
    capacity_block_hourly: float | None = None  # a published Capacity Block rate, when there is one
    price_as_of: str | None = None  # the date of on_demand_hourly when the entry's own (else its basis')
    price_source: str | None = None
    source: str | None = None  # where the entry's shape facts come from, when not its section's
    unverified: tuple[str, ...] = ()  # fields no primary source confirmed yet
    arch: str = "x86_64"  # the CPU architecture (arm64: Grace nodes), which picks the node image

    @property
    def priced(self) -> bool:
        """Whether the catalog has a list price for it (an unsold or unconfirmed price is None)."""
        return self.on_demand_hourly is not None


@dataclass(frozen=True)
class GpuKind:
    name: str
    memory_gib: float
    peak_bf16_tflops: float
    # cloud -> the machines of that cloud carrying this GPU, for every cloud with a catalog section
    on: Mapping[str, tuple[MachineShape, ...]] = field(default_factory=dict)

    peak_fp8_tflops: float | None = None  # dense; None: the GPU has no FP8 tensor cores
    nvlink_domain: int = 1  # GPUs one NVLink domain joins at most (1: none, PCIe only)
    source: str = ""
    as_of: str = ""

    def shapes_on(self, cloud: str) -> tuple[MachineShape, ...]:
        """The machines of `cloud` carrying this GPU (none for a cloud without a catalog section)."""
        return self.on.get(cloud, ())

    def counts(self, cloud: str) -> list[int]:
        return sorted({m.gpus for m in self.shapes_on(cloud)})

    def offered_on(self) -> list[str]:
        """The clouds that have a machine with this GPU, in the registry's order."""
        return [cloud for cloud, shapes in self.on.items() if shapes]


@dataclass(frozen=True)
class CatalogSection:
    """One cloud's part of the catalog, as its backend brings it: machine entries in the layout of
    a cloud's data/catalog.yaml (vcpus, memoryGiB, onDemandHourly, gpus, ...), each named by `machine_key`."""

    cloud: str
    machine_key: str  # the key that names a machine ("instanceType"), also the pool key that names one
    gpus: Mapping[str, Sequence[Mapping[str, Any]]]  # GPU kind -> its machines on this cloud
    cpu: Sequence[Mapping[str, Any]] = ()
    pricing: Mapping[str, Any] | None = None  # where the prices come from (a PriceBasis)

    @classmethod
    def of_doc(cls, doc: Mapping[str, Any], cloud: str, machine_key: str) -> CatalogSection:
        """The section of `cloud` in its own catalog file (components/<cloud>/data/catalog.yaml): `gpus`
        (GPU kind -> its machines), `cpu` and `pricing`, with the `source`s and dates of each."""
        return cls(
            cloud=cloud,
            machine_key=machine_key,
            gpus={kind: machines or [] for kind, machines in (doc.get("gpus") or {}).items()},
            cpu=doc.get("cpu") or [],
            pricing=doc.get("pricing"),
        )


@dataclass(frozen=True)
class PriceBasis:
    """Where a cloud's prices come from, shown next to every cost estimate."""

    region: str
    source: str
    as_of: str
    spot_fraction: float
    spot_source: str


class Catalog:
    def __init__(self, doc: Mapping[str, Any], sections: Iterable[CatalogSection]) -> None:
        """`doc`: the GPU kinds (data/gpus.yaml `gpus:`); `sections`: each cloud's machines."""
        sections = list(sections)
        self._by_name: dict[tuple[str, str], MachineShape] = {}
        self.pricing: dict[str, PriceBasis] = {}
        per_kind: dict[str, dict[str, tuple[MachineShape, ...]]] = {kind: {} for kind in doc["gpus"]}
        for section in sections:
            for kind, machines in section.gpus.items():
                if kind not in per_kind:
                    raise ValueError(f"catalog section {section.cloud}: {kind!r} is not a known GPU kind")
                entry = doc["gpus"][kind]
                per_kind[kind][section.cloud] = tuple(
                    _shape(
                        section,
                        m,
                        gpu=kind,
                        gpus=int(m["gpus"]),
                        gpu_memory_gib=entry["memoryMiB"] / 1024,
                        nvlink_domain=int(
                            m.get("nvlinkDomain") or min(int(entry.get("nvlinkDomain", 1)), int(m["gpus"]))
                        ),
                    )
                    for m in machines
                )
            for m in section.cpu:
                shape = _shape(section, m)
                self._by_name[(section.cloud, shape.name)] = shape
            if section.pricing is not None:
                self.pricing[section.cloud] = _price_basis(section.pricing)
        self._gpus = {
            kind: GpuKind(
                name=kind,
                memory_gib=entry["memoryMiB"] / 1024,
                peak_bf16_tflops=float(entry["peakBf16Tflops"]),
                peak_fp8_tflops=_float(entry.get("peakFp8Tflops")),
                nvlink_domain=int(entry.get("nvlinkDomain", 1)),
                source=str(entry.get("source", "")),
                as_of=str(entry.get("asOf", "")),
                on=per_kind[kind],
            )
            for kind, entry in doc["gpus"].items()
        }
        for gpu in self._gpus.values():
            for shapes in gpu.on.values():
                for shape in shapes:
                    self._by_name[(shape.cloud, shape.name)] = shape

    def gpu_names(self) -> list[str]:
        return list(self._gpus)

    def gpu(self, name: str) -> GpuKind | None:
        return self._gpus.get(name)

    def machine_names(self, cloud: str) -> list[str]:
        """Every instance/machine type of `cloud` the catalog knows (GPU and CPU), sorted."""
        return sorted(name for c, name in self._by_name if c == cloud)

    def machine(self, cloud: str, name: str) -> MachineShape | None:
        """The shape of an instance/machine type, GPU or CPU; None when the catalog does not know it."""
        return self._by_name.get((cloud, name))

    def shapes(self, cloud: str, gpu: str, gpus: int | None = None) -> list[MachineShape]:
        """Machines of `cloud` carrying `gpu` (optionally exactly `gpus` of them), cheapest first.

        Machines with the same GPU kind and count are interchangeable for a training job, which is what
        spot pools use to widen the capacity they can draw from.
        """
        kind = self._gpus.get(gpu)
        if kind is None:
            return []
        found = [m for m in kind.shapes_on(cloud) if gpus is None or m.gpus == gpus]
        # Unpriced machines last: a pool by kind and count takes the first, which must be one the plan prices.
        return sorted(found, key=lambda m: (m.on_demand_hourly is None, m.on_demand_hourly or 0.0))


# A Compute Engine local SSD disk holds 375 GB (Compute Engine docs, "About Local SSD disks").
GCE_LOCAL_SSD_GB = 375


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _shape(section: CatalogSection, m: Mapping[str, Any], **gpu: Any) -> MachineShape:
    ssds = int(m.get("localSsdCount", 0))
    return MachineShape(
        cloud=section.cloud,
        name=m[section.machine_key],
        vcpus=int(m["vcpus"]),
        memory_gib=float(m["memoryGiB"]),
        on_demand_hourly=_float(m["onDemandHourly"]),
        efa_interfaces=int(m.get("efaInterfaces", 0)),
        accelerator_type=m.get("acceleratorType"),
        local_ssd_count=ssds,
        local_nvme_gb=int(m.get("localNvmeGB", ssds * GCE_LOCAL_SSD_GB)),
        gpu_nics=int(m.get("gpuNics", 0)),
        capacity_block_only=bool(m.get("capacityBlockOnly", False)),
        capacity_block_hourly=_float(m.get("capacityBlockHourly")),
        price_as_of=str(m["priceAsOf"]) if m.get("priceAsOf") else None,
        price_source=m.get("priceSource"),
        source=m.get("source"),
        unverified=tuple(m.get("unverified") or ()),
        arch=str(m.get("arch", "x86_64")),
        **gpu,
    )


def _price_basis(p: Mapping[str, Any]) -> PriceBasis:
    return PriceBasis(
        region=p["region"],
        source=p["source"],
        as_of=str(p["asOf"]),
        spot_fraction=float(p["spotFraction"]),
        spot_source=p["spotSource"],
    )


def catalog() -> Catalog:
    """The catalog of the registered backends' sections (parsed once per set of backends)."""
    from components.backends import backends

    return _catalog(backends())


@cache
def _catalog(clouds: tuple[CloudBackend, ...]) -> Catalog:
    text = resources.files("components").joinpath("data/gpus.yaml").read_text()
    return Catalog(yaml.safe_load(text), [s for b in clouds if (s := b.catalog_section()) is not None])
