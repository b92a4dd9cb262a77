"""`trainplane gpus [--cloud C] [--gpu NAME] [--region R] [--json]`: the GPU catalog (the kinds in
components/data/gpus.yaml, each cloud's machines and prices in components/<cloud>/data/catalog.yaml) as a
table: each GPU's machines per cloud, their interconnect, local NVMe, list prices with their date and
region, and the capacity kinds a pool of each may have (infra/gpu_catalog.py). docs/cli.md, "gpus".
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

from infra.commands import EXIT_OK
from infra.console import make_console, table
from infra.gpu_catalog import CAPACITY_BLOCK, GpuRow

if TYPE_CHECKING:
    from components.catalog import PriceBasis

COLUMNS = (
    "GPU",
    "cloud",
    "machine",
    "GPUs/node",
    "GPU memory",
    "bf16/fp8 TFLOPS",
    "interconnect",
    "local NVMe",
    "on-demand $/h",
    "$/GPU-h",
    "block $/h",
    "price date",
    "capacity kinds",
    "note",
)
RIGHT = ("GPUs/node", "GPU memory", "bf16/fp8 TFLOPS", "local NVMe", "on-demand $/h", "$/GPU-h", "block $/h")
NO_PRICE = "-"
NO_FP8 = "n/a"
FOOTNOTES = {
    NO_PRICE: (
        f"{NO_PRICE}: no list price in the catalog (not sold that way, or no price confirmed yet); "
        "the plan leaves such pools out of its totals unless platform.pricing.overrides prices them"
    ),
    NO_FP8: f"{NO_FP8}: the GPU has no FP8 tensor cores",
}


def cmd_gpus(args: argparse.Namespace, console: Console) -> int:
    from components.catalog import catalog
    from components.clock import today
    from infra.gpu_catalog import gpu_rows, price_warning

    cat = catalog()
    rows = gpu_rows(cat, args.cloud, args.gpu, args.region)
    warning = price_warning(rows, today())
    if args.json:
        print(json.dumps([r.as_json() for r in rows], indent=2))
        if warning:
            make_console(stderr=True).print(warning, markup=False, highlight=False, soft_wrap=True)
        return EXIT_OK
    _print_table(rows, _price_lines(rows, cat.pricing, args.region), console, warning)
    return EXIT_OK


def _print_table(
    rows: Sequence[GpuRow], header: Sequence[str], console: Console, warning: str | None
) -> None:
    def say(line: str, style: str | None = None) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True, style=style)

    say(f"GPU machines of the trainplane catalog: {len(rows)}")
    for line in header:
        say(line)
    if warning:
        say(warning, style="yellow")
    t = table(None, *COLUMNS, right=RIGHT)
    used: set[str] = set()
    for r in rows:
        cells = _cells(r)
        used |= {NO_PRICE} if NO_PRICE in cells[8:11] else set()
        used |= {NO_FP8} if r.peak_fp8_tflops is None else set()
        t.add_row(*cells)
    console.print(t)
    for mark, text in FOOTNOTES.items():
        if mark in used:
            say(text, style="dim")


def _price_lines(rows: Sequence[GpuRow], pricing: Mapping[str, PriceBasis], region: str | None) -> list[str]:
    """Where each shown cloud's prices come from; with --region, that the catalog prices one region only."""
    lines = []
    for cloud in dict.fromkeys(r.cloud for r in rows):
        basis = pricing.get(cloud)
        if basis is None:
            lines.append(f"prices: {cloud}: the catalog has no price basis")
            continue
        lines.append(
            f"prices: {cloud} on-demand list prices in USD, {basis.region}, as of {basis.as_of} ({basis.source})"
        )
        if region is not None and region != basis.region:
            lines.append(
                f"--region {region}: the catalog keeps no per-region offerings or prices; the machines are "
                f"{cloud}'s catalog and the prices are {basis.region}'s: check availability and price in "
                f"{region}"
            )
    return lines


def _cells(r: GpuRow) -> list[str]:
    s = r.shape
    fp8 = NO_FP8 if r.peak_fp8_tflops is None else _num(r.peak_fp8_tflops)
    block = _money(s.capacity_block_hourly) if CAPACITY_BLOCK in r.capacity_kinds else ""
    return [
        r.gpu,
        r.cloud,
        s.name,
        str(s.gpus),
        f"{_num(s.gpu_memory_gib)} GiB",
        f"{_num(r.peak_bf16_tflops)} / {fp8}",
        interconnect(r),
        f"{s.local_nvme_gb:,} GB" if s.local_nvme_gb else "none",
        _money(s.on_demand_hourly),
        _money(r.per_gpu_hourly),
        block,
        r.price_as_of or "",
        ", ".join(r.capacity_kinds),
        note(r),
    ]


def interconnect(r: GpuRow) -> str:
    """The machine's GPU networking: EFA interfaces, GPUDirect/RDMA NICs, its NVLink domain (or PCIe)."""
    s = r.shape
    parts = []
    if s.efa_interfaces:
        parts.append(f"{s.efa_interfaces} EFA")
    if s.gpu_nics:
        parts.append(f"{s.gpu_nics} GPUDirect NICs")
    parts.append(f"NVLink {s.nvlink_domain} GPUs" if s.nvlink_domain > 1 else "PCIe, no NVLink")
    return ", ".join(parts)


def note(r: GpuRow) -> str:
    s = r.shape
    notes = []
    if s.capacity_block_only:
        notes.append("sold only as Capacity Blocks")
    if s.arch != "x86_64":
        notes.append(s.arch)
    if s.unverified:
        notes.append(f"unverified: {', '.join(s.unverified)}")
    return "; ".join(notes)


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value - round(value)) < 0.05 else f"{value:,.1f}"


def _money(value: float | None) -> str:
    return NO_PRICE if value is None else f"${value:,.2f}"


def add_parsers(command: Callable[..., argparse.ArgumentParser]) -> None:
    gpus: Any = command(
        "gpus",
        help="the GPU catalog: machines, interconnect, list prices and capacity kinds per cloud",
        description="The GPU catalog (components/catalog.py) as a table, or --json (a list of objects).",
    )
    gpus.add_argument("--cloud", metavar="CLOUD", help="only this cloud's machines (a cloud with a catalog)")
    gpus.add_argument("--gpu", metavar="NAME", help="only this GPU (H100, B200, ...; case does not matter)")
    gpus.add_argument(
        "--region",
        metavar="R",
        help="only the cloud that has this region; the catalog's prices are for one region per cloud",
    )
    gpus.add_argument("--json", action="store_true", help="a list of objects, one per machine")
    gpus.set_defaults(func=cmd_gpus)
