"""The cost tests' platform (stacks/Pulumi.aws-h100-reserved.yaml with a reservation owned by a team) and the
cost report's number format, shared by the cost rules, report and dashboard tests (tests/integration)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from tests.helpers.plans import platform_object

# The synthetic cluster's Capacity Block is bought for all the times the tests look at (promtool's minutes
# from the Unix epoch, the backfilled Prometheus' last hours): a block costs nothing outside its dates.
ALWAYS = ("1970-01-01T00:00:00Z", "2100-01-01T00:00:00Z")


def owned_platform(block: tuple[str, str] | None = ALWAYS) -> dict:
    """The stack with h100-odcr owned by research and h100-block's dates `block` (None: the stack's own,
    2026-12-01 to 2026-12-15)."""
    platform = platform_object("aws-h100-reserved")
    for pool in platform["nodePools"]:
        if pool["name"] == "h100-odcr":
            pool["owner"] = "research"
        if pool["name"] == "h100-block" and block:
            pool["blockStart"], pool["blockEnd"] = block
    return platform


def dollars_text(dollars: float) -> str:
    """Dollars as `trainplane cost` writes them in its CSV: two decimals, half up."""
    return str(Decimal(repr(dollars)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
