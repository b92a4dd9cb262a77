"""Where a GCP platform may go and what it may run on: the zones of each region (data/regions.yaml, with
its source), and the form of Compute Engine machine type names (GCP has no list of them).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources

import yaml

from components.regions import did_you_mean, regions, unknown_gpu_machine

# Compute Engine machine type names: <series>-<type>-<vCPUs>[-suffix] (a3-megagpu-8g, c3-standard-8-lssd),
# <series>-custom-<vCPUs>-<MiB>, and the shared-core e2-micro/small/medium (Compute Engine docs,
# "Machine families resource and comparison guide"; "Create a VM with a custom machine type").
GCE_MACHINE_TYPE = re.compile(r"^([a-z][a-z0-9]{1,3})-([a-z]+)(?:-\d+g?(?:-\d+)?(?:-[a-z]+)?)?$")
GCE_SERIES = frozenset(
    "e2 n1 n2 n2d n4 n4a n4d c2 c2d c3 c3d c4 c4a c4d t2a t2d h3 h4d m1 m2 m3 m4 x4 z3 a2 a3 a4 a4x g2 g4 "
    "f1 g1".split()
)
# Series whose machine types come with GPUs attached (Compute Engine "Accelerator-optimized machine
# family": A2, A3, A4, A4X, G2, G4).
GPU_SERIES = frozenset("a2 a3 a4 a4x g2 g4".split())
GCE_TYPES = frozenset(
    "standard highmem highcpu megamem ultramem hypermem highgpu megagpu ultragpu edgegpu custom micro small "
    "medium".split()
)


@cache
def gcp_zone_letters(region: str) -> list[str]:
    doc = yaml.safe_load(resources.files("components.gcp").joinpath("data/regions.yaml").read_text())
    return list(doc["regions"].get(region) or [])


def gcp_zone_problems(region: str | None, zones: Sequence[str], path: str) -> Iterable[str]:
    """Zones of a GCP region: `<region>-<letter>`, with a letter the region has."""
    if region is None or region not in regions("gcp"):
        return  # the region itself is reported
    letters = gcp_zone_letters(region)
    known = [f"{region}-{letter}" for letter in letters]
    for j, z in enumerate(zones):
        if z in known:
            continue
        if z.rsplit("-", 1)[0] == region:
            yield f"{path}[{j}]: {z!r} is not a zone of region {region}; its zones: {', '.join(known)}"
        else:
            other = z.rsplit("-", 1)[0] in regions("gcp")
            hint = "" if other else did_you_mean(z, known)
            yield f"{path}[{j}]: {z!r} is not a zone of region {region}{hint}"


def machine_type_problem(name: str, catalog_names: Sequence[str]) -> str | None:
    """Why `name` is not a Compute Engine machine type (None when it may be one). There is no list: a
    name close to one the catalog knows is a typo (did you mean); otherwise it must have the form of a
    Compute Engine name."""
    if name in catalog_names:
        return None
    m = GCE_MACHINE_TYPE.match(name)
    if m is None:
        return f"{name!r} is not a Compute Engine machine type name (series-type-vCPUs, e.g. n2-standard-8)"
    series, kind = m.groups()
    if series in GPU_SERIES:
        gpu_types = [n for n in catalog_names if n.split("-", 1)[0] in GPU_SERIES]
        return unknown_gpu_machine(name, series, gpu_types, "Compute Engine series")
    if series not in GCE_SERIES or kind not in GCE_TYPES:
        fixed = name.replace(
            f"{series}-{kind}", f"{_closest(series, GCE_SERIES)}-{_closest(kind, GCE_TYPES)}", 1
        )
        hint = did_you_mean(name, catalog_names) or (f"; did you mean {fixed!r}?" if fixed != name else "")
        return f"{name!r} is not a Compute Engine machine type{hint}"
    return None


def _closest(word: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else word
