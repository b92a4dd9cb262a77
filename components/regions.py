"""Where a platform may go: each cloud's regions and zones, and the machine type names it knows, so that
`cloud: gcp` with `region: us-east-1`, `europe-wset4` or zone `europe-west4-z`, and a mistyped instance
type, are refused with a did-you-mean instead of planning (and pricing) something that cannot exist.

The data is in `data/regions.yaml` and `data/aws_instance_types.yaml`, each with its source.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from typing import Any

import yaml

CLOUD_NAMES = {"aws": "AWS", "gcp": "GCP"}
# Compute Engine machine type names: <series>-<type>-<vCPUs>[-suffix] (a3-megagpu-8g, c3-standard-8-lssd),
# <series>-custom-<vCPUs>-<MiB>, and the shared-core e2-micro/small/medium (Compute Engine docs,
# "Machine families resource and comparison guide"; "Create a VM with a custom machine type").
GCE_MACHINE_TYPE = re.compile(r"^([a-z][a-z0-9]{1,3})-([a-z]+)(?:-\d+g?(?:-\d+)?(?:-[a-z]+)?)?$")
GCE_SERIES = frozenset(
    "e2 n1 n2 n2d n4 n4a n4d c2 c2d c3 c3d c4 c4a c4d t2a t2d h3 h4d m1 m2 m3 m4 x4 z3 a2 a3 a4 a4x g2 g4 "
    "f1 g1".split()
)
GCE_TYPES = frozenset(
    "standard highmem highcpu megamem ultramem hypermem highgpu megagpu ultragpu edgegpu custom micro small "
    "medium".split()
)


@cache
def _data(name: str) -> dict[str, Any]:
    return yaml.safe_load(resources.files("components").joinpath(f"data/{name}").read_text())


def regions(cloud: str) -> list[str]:
    data = _data("regions.yaml").get(cloud) or {}
    return sorted(data.get("regions") or [])


def gcp_zone_letters(region: str) -> list[str]:
    return list(_data("regions.yaml")["gcp"]["regions"].get(region) or [])


def aws_instance_types() -> frozenset[str]:
    return frozenset(_data("aws_instance_types.yaml")["instanceTypes"])


def did_you_mean(value: str, known: Iterable[str], cutoff: float = 0.75) -> str:
    """ "; did you mean 'x'?" for the closest known name (all of the equally close ones), or ""."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, value, k).ratio(), k) for k in known), key=lambda t: (-t[0], t[1])
    )
    best = [k for score, k in scored if score >= cutoff and score == scored[0][0]]
    return f"; did you mean {' or '.join(repr(k) for k in best[:3])}?" if best else ""


def region_problems(cloud: str, region: str | None, path: str) -> Iterable[str]:
    """`region` must be one of the cloud's regions; another cloud's region is named as such."""
    known = regions(cloud)
    if region is None or not known or region in known:
        return
    others = [c for c in CLOUD_NAMES if c != cloud and region in regions(c)]
    article = "an" if CLOUD_NAMES[cloud][0] in "AEIOU" else "a"
    elsewhere = (
        f" (it is {('an' if others and others[0] == 'aws' else 'a')} {CLOUD_NAMES[others[0]]} region)"
        if others
        else ""
    )
    hint = did_you_mean(region, known) or f"; e.g. {', '.join(known[:3])}, ... ({len(known)} regions)"
    yield f"{path}: {region!r} is not {article} {CLOUD_NAMES[cloud]} region{elsewhere}{hint}"


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


def aws_zone_problems(region: str | None, zones: Sequence[str], path: str) -> Iterable[str]:
    """An availability zone is the region's name and one letter (us-east-1a)."""
    if region is None:
        return
    for j, z in enumerate(zones):
        if not re.fullmatch(re.escape(region) + r"[a-z]", z):
            # A zone of another region is no typo: no suggestion for it.
            other = z[:-1] in regions("aws")
            hint = "" if other else did_you_mean(z, [f"{region}{c}" for c in "abcdef"])
            yield f"{path}[{j}]: {z!r} is not an availability zone of region {region}{hint}"


def machine_type_problem(cloud: str, name: str, key: str, catalog_names: Sequence[str]) -> str | None:
    """Why `name` is not a machine type of `cloud` (None when it may be one).

    AWS: every instance type the provider SDK knows. GCP has no such list: a name close to one the
    catalog knows is a typo (did you mean); otherwise it must have the form of a Compute Engine name."""
    if name in catalog_names:
        return None
    if cloud == "aws":
        if name in aws_instance_types():
            return None
        hint = did_you_mean(name, catalog_names, 0.8) or did_you_mean(name, sorted(aws_instance_types()))
        return f"{name!r} is not an EC2 instance type{hint}"
    if cloud == "gcp":
        m = GCE_MACHINE_TYPE.match(name)
        if m is None:
            return (
                f"{name!r} is not a Compute Engine machine type name (series-type-vCPUs, e.g. n2-standard-8)"
            )
        series, kind = m.groups()
        if series not in GCE_SERIES or kind not in GCE_TYPES:
            fixed = name.replace(
                f"{series}-{kind}", f"{_closest(series, GCE_SERIES)}-{_closest(kind, GCE_TYPES)}", 1
            )
            hint = did_you_mean(name, catalog_names) or (
                f"; did you mean {fixed!r}?" if fixed != name else ""
            )
            return f"{name!r} is not a Compute Engine machine type{hint}"
    return None


def _closest(word: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else word
