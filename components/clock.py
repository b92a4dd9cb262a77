"""Today's date, for the facts that age (price dates, support calendars): read once where a command
starts and passed down as a parameter, so pure code never asks the system clock.

`TRAINPLANE_TODAY=YYYY-MM-DD` pins the date (tests, reproducible plans, "what will this say in March?").
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import date

ENV = "TRAINPLANE_TODAY"
# How old a price may be before `trainplane plan` warns about it.
PRICE_MAX_AGE_MONTHS = 6


def today(environ: Mapping[str, str] | None = None) -> date:
    """TRAINPLANE_TODAY when set, else the system's date."""
    value = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not value:
        return date.today()
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{ENV}: {value!r} is not a date (YYYY-MM-DD)") from None


def as_of_date(as_of: str) -> date:
    """The day a fact's `asOf` stands for: YYYY-MM-DD, or YYYY-MM (its month's first day, the older end)."""
    m = re.fullmatch(r"(\d{4})-(\d{2})(?:-(\d{2}))?", as_of.strip())
    if m is None:
        raise ValueError(f"asOf {as_of!r} is not a date (YYYY-MM or YYYY-MM-DD)")
    return date(int(m[1]), int(m[2]), int(m[3] or 1))


def months_old(as_of: str, on: date) -> int:
    """Whole months from `as_of` to `on` (0 when not yet a month old)."""
    then = as_of_date(as_of)
    months = (on.year - then.year) * 12 + on.month - then.month - (on.day < then.day)
    return max(months, 0)
