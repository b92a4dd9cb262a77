"""Kubernetes support calendar per cloud: where a minor stands on a given day. Each cloud's backend brings
its section (`support_calendar` names it, `support_section()` holds it: components/<cloud>/data/
k8s_support.yaml for the built-in clouds); the calendar is their composition.

"Today" is always passed in (read once where a command starts: components.clock.today, TRAINPLANE_TODAY);
nothing here calls the clock in the middle of a decision.

Example:
    >>> from datetime import date
    >>> support_status("eks", "1.33", date(2026, 11, 28)).phase
    'extended'
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from components.backends import CloudBackend


@dataclass(frozen=True)
class MinorSupport:
    cloud: str
    minor: str
    released: date
    standard_end: date
    end: date | None  # None: end of extended support / end of life not yet in the calendar
    phase: str  # "unreleased" | "standard" | "extended" | "ended"
    source: str
    as_of: str


def calendar() -> dict[str, Any]:
    """Calendar name (`support_calendar`: eks, gke) -> its section, for every registered backend with one,
    in the registry's order."""
    from components.backends import backends

    return _calendar(backends())[0]


def calendar_file(cloud: str) -> str:
    """Where the section `cloud` of the calendar is kept, for error lines."""
    from components.backends import backends

    return _calendar(backends())[1][cloud]


@cache
def _calendar(clouds: tuple[CloudBackend, ...]) -> tuple[dict[str, Any], dict[str, str]]:
    sections: dict[str, Any] = {}
    files: dict[str, str] = {}
    for b in clouds:
        if b.support_calendar and (section := b.support_section()) is not None:
            sections[b.support_calendar] = dict(section)
            files[b.support_calendar] = b.support_file() or f"the {b.name} backend's support calendar"
    return sections, files


def support_status(cloud: str, minor: str, on: date) -> MinorSupport:
    """Where `minor` stands on `on` for `cloud`; a minor the calendar lacks is a ValueError."""
    section = calendar()[cloud]
    row = section["minors"].get(minor)
    if row is None:
        known = ", ".join(sorted(section["minors"]))
        raise ValueError(f"kubernetesVersion {minor} is not in the {cloud} support calendar (known: {known})")
    released = date.fromisoformat(row["released"])
    standard_end = date.fromisoformat(row["standardEnd"])
    end = date.fromisoformat(row["end"]) if row.get("end") else None
    if on < released:
        phase = "unreleased"
    elif on <= standard_end:
        phase = "standard"
    elif end is None or on <= end:
        phase = "extended"
    else:
        phase = "ended"
    return MinorSupport(cloud, minor, released, standard_end, end, phase, section["source"], section["asOf"])


def default_minor(on: date | None = None) -> str:
    """The default `kubernetesVersion`: the newest minor in standard support on `on` on every cloud of the
    calendar (one default whatever the cloud, so a stack keeps its version when it moves). `on` None: today
    (components.clock.today, TRAINPLANE_TODAY), read when a spec is loaded; never a literal that rots."""
    from components.clock import today

    day = today() if on is None else on
    try:
        return newest_standard(tuple(calendar()), day)
    except ValueError:
        # The calendar has run out (no release after the newest it knows): one line naming the key, never a
        # traceback, and never a silent pick of a minor past standard support.
        from components.spec.base import ConfigError

        as_of = max(str(calendar()[c]["asOf"]) for c in calendar())
        files = ", ".join(calendar_file(c) for c in calendar())
        raise ConfigError(
            [
                f"platform.cluster.kubernetesVersion: not set, and no minor is in standard support on "
                f"{' and '.join(c.upper() for c in calendar())} on {day} in trainplane's support calendar "
                f"({files}, as of {as_of}): set it, or update trainplane"
            ]
        ) from None


def newest_standard(clouds: tuple[str, ...], on: date) -> str:
    """The newest minor in standard support on every cloud in `clouds` on `on`."""
    common = set.intersection(*(set(calendar()[c]["minors"]) for c in clouds))
    ok = [m for m in common if all(support_status(c, m, on).phase == "standard" for c in clouds)]
    if not ok:
        raise ValueError(f"no Kubernetes minor is in standard support on {', '.join(clouds)} on {on}")
    return max(ok, key=lambda m: tuple(int(p) for p in m.split(".")))


def _key(minor: str) -> tuple[int, ...]:
    return tuple(int(p) for p in minor.split("."))


def problem(cloud: str, minor: str, on: date) -> str | None:
    """Why `minor` cannot run on `cloud` on `on` (not in the calendar, not released, past its end), or None."""
    section, label = calendar()[cloud], cloud.upper()
    if minor not in section["minors"]:
        known = ", ".join(sorted(section["minors"], key=_key))
        return f"{label} {minor} is not in the support calendar (known: {known}; {calendar_file(cloud)})"
    s = support_status(cloud, minor, on)
    if s.phase == "unreleased":
        return f"{label} {minor} is not released until {s.released} (today {on})"
    if s.phase == "ended":
        return f"{label} {minor} reached the end of extended support on {s.end} (today {on}): upgrade the cluster"
    return None


def control_plane_fee(cloud: str, minor: str, on: date, standard: float) -> tuple[float, str | None]:
    """The control plane's hourly fee for `minor` on `on`, and a warning when it is past standard support."""
    s = support_status(cloud, minor, on)
    if s.phase != "extended":
        return standard, None
    section, label = calendar()[cloud], cloud.upper()
    extended = section.get("extendedHourly")
    channel = section.get("extendedChannel")
    only_on = (
        f"; it applies on the {channel} release channel, the only one that keeps {minor} (on another, {label} "
        "upgrades the cluster)"
        if channel
        else ""
    )
    if extended is None:
        return standard, (
            f"{label} {minor} left standard support on {s.standard_end}: the cloud's extended-support fee is not "
            f"in the calendar ({section['pricingSource']} names no figure){only_on}; control plane priced at the "
            f"standard ${standard:.2f}/h, the real fee is higher"
        )
    until = f" until {s.end}" if s.end else ""
    return float(extended), (
        f"{label} {minor} left standard support on {s.standard_end}: control plane billed at ${extended:.2f}/h "
        f"extended support{until}"
    )
