"""The rows of `trainplane gpus`: every catalog machine with a GPU, as the catalog and its cloud's backend
describe it (components/catalog.py: the kinds and each cloud's data/catalog.yaml), filtered by cloud, GPU
and region.

Nothing here is looked up elsewhere or guessed: the capacity kinds are those the machine's backend offers
(`CloudBackend.capacity_kinds`), narrowed to Capacity Blocks for machines the catalog marks
`capacityBlockOnly` (the rule components/aws/rules.py enforces on pools); a price the catalog does not
have stays None; fields no primary source confirmed are listed as the catalog lists them (`unverified`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from components.backend_protocol import CapacityKinds
from components.catalog import Catalog, MachineShape, PriceBasis
from components.clock import PRICE_MAX_AGE_MONTHS, as_of_date, months_old
from components.regions import did_you_mean, region_problems
from infra.stacks import UsageError

CAPACITY_BLOCK = "capacity-block"


@dataclass(frozen=True)
class GpuRow:
    """One machine carrying a GPU, on one cloud."""

    gpu: str
    cloud: str
    shape: MachineShape
    peak_bf16_tflops: float
    peak_fp8_tflops: float | None
    capacity_kinds: tuple[str, ...]
    price_as_of: str | None
    price_region: str | None
    price_source: str | None

    @property
    def per_gpu_hourly(self) -> float | None:
        od = self.shape.on_demand_hourly
        return None if od is None else round(od / self.shape.gpus, 4)

    def as_json(self) -> dict[str, Any]:
        s = self.shape
        return {
            "gpu": self.gpu,
            "cloud": self.cloud,
            "machine": s.name,
            "gpusPerNode": s.gpus,
            "gpuMemoryGiB": round(s.gpu_memory_gib, 2),
            "peakBf16Tflops": self.peak_bf16_tflops,
            "peakFp8Tflops": self.peak_fp8_tflops,
            "vcpus": s.vcpus,
            "memoryGiB": s.memory_gib,
            "arch": s.arch,
            "efaInterfaces": s.efa_interfaces,
            "gpuNics": s.gpu_nics,
            "nvlinkDomain": s.nvlink_domain,
            "localNvmeGB": s.local_nvme_gb,
            "onDemandHourly": s.on_demand_hourly,
            "onDemandHourlyPerGpu": self.per_gpu_hourly,
            "capacityBlockHourly": s.capacity_block_hourly,
            "priceAsOf": self.price_as_of,
            "priceRegion": self.price_region,
            "priceSource": self.price_source,
            "capacityKinds": list(self.capacity_kinds),
            "capacityBlockOnly": s.capacity_block_only,
            "unverified": list(s.unverified),
        }


def machine_capacity_kinds(capacity: CapacityKinds, shape: MachineShape) -> tuple[str, ...]:
    """The capacity kinds a pool of `shape` may have: its cloud's for that machine type (Capacity Blocks
    are sold for some types only), or only Capacity Blocks for a machine sold only that way."""
    offered = capacity.for_machine(shape.name)
    if shape.capacity_block_only:
        return tuple(k for k in offered if k == CAPACITY_BLOCK)
    return offered


def catalog_clouds() -> list[str]:
    """The clouds whose backend brings a catalog section (machines it sells), in the registry's order."""
    from components.backends import backends

    return [b.name for b in backends() if b.catalog_section() is not None]


def gpu_rows(
    cat: Catalog, cloud: str | None = None, gpu: str | None = None, region: str | None = None
) -> list[GpuRow]:
    """The catalog's GPU machines, GPU by GPU in the catalog's order, then cloud, then machine; each filter
    that names something the catalog does not know raises UsageError (one line, with a did-you-mean)."""
    from components.backends import backend

    clouds = catalog_clouds()
    if cloud is not None and cloud not in clouds:
        hint = did_you_mean(cloud, clouds) or f"; known: {', '.join(clouds)}"
        raise UsageError([f"--cloud {cloud}: not a cloud with a GPU catalog{hint}"])
    if region is not None:
        clouds = _clouds_of_region(region, [cloud] if cloud else clouds)
    elif cloud is not None:
        clouds = [cloud]
    kinds = [gpu_name(cat, gpu)] if gpu is not None else cat.gpu_names()
    rows = []
    for name in kinds:
        kind = cat.gpu(name)
        assert kind is not None
        for c in clouds:
            basis = cat.pricing.get(c)
            offered = backend(c).capacity_kinds()
            for shape in kind.shapes_on(c):
                rows.append(
                    _row(kind.name, kind.peak_bf16_tflops, kind.peak_fp8_tflops, shape, basis, offered)
                )
    if not rows and gpu is not None:
        kind = cat.gpu(kinds[0])
        on = kind.offered_on() if kind else []
        elsewhere = f"; it is on {', '.join(on)}" if on else "; no cloud's catalog has a machine with it"
        raise UsageError([f"--gpu {kinds[0]}: no machine of {', '.join(clouds)} carries it{elsewhere}"])
    return rows


def gpu_name(cat: Catalog, name: str) -> str:
    """The catalog's name of a GPU (case aside: h100 is H100); UsageError with a did-you-mean otherwise."""
    known = cat.gpu_names()
    found = next((k for k in known if k.lower() == name.lower()), None)
    if found is None:
        hint = did_you_mean(name.upper(), known) or ""
        raise UsageError([f"--gpu {name}: not a GPU of the catalog{hint} (known: {', '.join(known)})"])
    return found


def _clouds_of_region(region: str, clouds: list[str]) -> list[str]:
    """The clouds (of `clouds`) that have `region`; UsageError naming it when none has."""
    from components.backends import backend

    mine = [c for c in clouds if region in backend(c).regions()]
    if mine:
        return mine
    if len(clouds) == 1:
        problem = next(iter(region_problems(clouds[0], region, "--region")), None)
        raise UsageError([problem or f"--region {region}: not a region of {clouds[0]}"])
    every = sorted({r for c in clouds for r in backend(c).regions()})
    hint = did_you_mean(region, every)
    raise UsageError([f"--region {region}: not a region of {' or '.join(clouds)}{hint}"])


def _row(
    gpu: str,
    bf16: float,
    fp8: float | None,
    shape: MachineShape,
    basis: PriceBasis | None,
    offered: CapacityKinds,
) -> GpuRow:
    priced = shape.priced or shape.capacity_block_hourly is not None
    return GpuRow(
        gpu=gpu,
        cloud=shape.cloud,
        shape=shape,
        peak_bf16_tflops=bf16,
        peak_fp8_tflops=fp8,
        capacity_kinds=machine_capacity_kinds(offered, shape),
        # An unpriced machine has no price date (the basis' date would read as a price of that day).
        price_as_of=(shape.price_as_of or (basis.as_of if basis else None)) if priced else None,
        price_region=basis.region if basis else None,
        price_source=shape.price_source or (basis.source if basis else None),
    )


def price_warning(rows: Sequence[GpuRow], today: date) -> str | None:
    """A warning when the oldest price shown is older than PRICE_MAX_AGE_MONTHS on `today`."""
    dates = sorted({r.price_as_of for r in rows if r.price_as_of}, key=as_of_date)
    if not dates or months_old(dates[0], today) <= PRICE_MAX_AGE_MONTHS:
        return None
    age = months_old(dates[0], today)
    return (
        f"warning: prices are {age} months old (as of {dates[0]}, today {today.isoformat()}; older than "
        f"{PRICE_MAX_AGE_MONTHS} months): check the cloud's price list before planning with them"
    )
