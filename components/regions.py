"""Where a platform may go: each cloud's regions (as its backend lists them, `CloudBackend.regions`), so
that `cloud: gcp` with `region: us-east-1` or `europe-wset4` is refused with a did-you-mean instead of
planning (and pricing) something that cannot exist; and the did-you-mean every such check uses.

A cloud's zones and machine type names are its backend's own checks (components/<cloud>/regions.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def regions(cloud: str) -> list[str]:
    """The regions of a registered cloud, sorted; none for a cloud without a list (or not registered)."""
    from components.backends import backend, backend_names

    return sorted(backend(cloud).regions()) if cloud in backend_names() else []


def did_you_mean(value: str, known: Iterable[str], cutoff: float = 0.75) -> str:
    """ "; did you mean 'x'?" for the closest known name (all of the equally close ones), or ""."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, value, k).ratio(), k) for k in known), key=lambda t: (-t[0], t[1])
    )
    best = [k for score, k in scored if score >= cutoff and score == scored[0][0]]
    return f"; did you mean {' or '.join(repr(k) for k in best[:3])}?" if best else ""


def unknown_gpu_machine(name: str, family: str, gpu_names: Iterable[str], where: str) -> str:
    """Why a machine type of a family that carries GPUs, which the catalog does not know, cannot be a
    pool: it would become a CPU pool (no GPU taint, resources, driver or price). Names the nearest known
    GPU machine types (difflib), else those of the same family."""
    known = sorted(gpu_names)
    near = (
        difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        or [k for k in known if k.startswith(family)][:3]
    )
    hint = f"; nearest known: {', '.join(near)}" if near else ""
    return (
        f"{name!r} is a GPU machine type ({where} {family}) that trainplane's catalog does not know, so it "
        f"cannot be sized, tainted or priced as a GPU pool (and is never a CPU pool){hint}"
    )


def _a(title: str) -> str:
    """The article before a cloud's name in prose: an AWS region, a GCP region."""
    return "an" if title[0] in "AEIOU" else "a"


def region_problems(cloud: str, region: str | None, path: str) -> Iterable[str]:
    """`region` must be one of the cloud's regions; another cloud's region is named as such."""
    from components.backends import backend, backends

    known = regions(cloud)
    if region is None or not known or region in known:
        return
    title = backend(cloud).display_name()
    others = [b.display_name() for b in backends() if b.name != cloud and region in b.regions()]
    elsewhere = f" (it is {_a(others[0])} {others[0]} region)" if others else ""
    hint = did_you_mean(region, known) or f"; e.g. {', '.join(known[:3])}, ... ({len(known)} regions)"
    yield f"{path}: {region!r} is not {_a(title)} {title} region{elsewhere}{hint}"
