"""The typed result of `trainplane verify`: one CheckResult per named check, one Finding per failure.

A check fails when it has at least one finding; notes say what it could not decide offline (an existing
cluster's default StorageClass, its NetworkPolicy enforcement) and never fail it.

One type for the three modes: `offline` (a plan), `live` (a running cluster) and `cloud` (`verify
--cloud`, the cloud's own APIs: infra/verify/cloud.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from infra.verify.registry import CHECKS

__all__ = ["CHECKS", "CheckResult", "Finding", "Mode", "Report", "Status"]
Status = Literal["pass", "fail", "skip"]
Mode = Literal["offline", "live", "cloud"]


@dataclass(frozen=True)
class Finding:
    """One failure: what is wrong, in one line, and the objects it is about."""

    check: str
    message: str
    objects: tuple[str, ...] = ()

    def line(self) -> str:
        return f"{self.check}: {self.message}"


@dataclass
class CheckResult:
    name: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # What was looked at, for the summary table ("3 claims", "24 flows"...).
    examined: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def status(self) -> Status:
        if self.skipped is not None:
            return "skip"
        return "fail" if self.findings else "pass"

    def fail(self, message: str, *objects: str) -> None:
        self.findings.append(Finding(self.name, message, tuple(objects)))

    def note(self, message: str) -> None:
        self.notes.append(message)


@dataclass
class Report:
    stack: str
    cloud: str
    kubernetes_version: str | None
    mode: Mode
    source: str
    checks: list[CheckResult] = field(default_factory=list)
    # About the whole run, not one check: e.g. that the cloud has no verifier and the defaults answered.
    notes: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """Whether any check ran (was not skipped)."""
        return any(c.status != "skip" for c in self.checks)

    @property
    def ok(self) -> bool:
        # `--cloud` with every check skipped (GCP today, an existing cluster) asked the cloud nothing: not a
        # pass, or `verify --cloud && pulumi up` would go on as if the reservations had been checked.
        if self.mode == "cloud" and not self.verified:
            return False
        return all(c.status != "fail" for c in self.checks)

    @property
    def findings(self) -> list[Finding]:
        return [f for c in self.checks for f in c.findings]

    def check(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def failed(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "fail"]

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "cloud": self.cloud,
            "kubernetesVersion": self.kubernetes_version,
            "mode": self.mode,
            "source": self.source,
            "ok": self.ok,
            "checks": [
                {
                    "name": c.name,
                    "status": c.status,
                    "findings": [asdict(f) for f in c.findings],
                    "notes": c.notes,
                    "examined": c.examined,
                    **({"skipped": c.skipped} if c.skipped else {}),
                }
                for c in self.checks
            ],
            **({"notes": self.notes} if self.notes else {}),
        }
