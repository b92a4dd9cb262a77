"""k8s-support: the cluster's Kubernetes minor against its cloud's support calendar (each cloud's section,
components/<cloud>/data/k8s_support.yaml) on the day verify runs (components.clock.today, TRAINPLANE_TODAY).

A note (a warning, never a failure) when the minor leaves standard support within WARN_DAYS or is in
extended support (the control plane then costs the extended rate); a finding when it is past its end of
extended support, not released yet, or not in the calendar. An existing cluster has no calendar: skipped.
"""

from __future__ import annotations

from components import k8s_support
from components.clock import today
from infra.verify.context import Context
from infra.verify.report import CheckResult

WARN_DAYS = 60


def run(ctx: Context) -> CheckResult:
    res = CheckResult("k8s-support")
    cloud, minor = ctx.backend.support_calendar, ctx.platform.kubernetes_version
    if cloud is None or not minor:
        res.skipped = "no cloud support calendar (an existing cluster)" if cloud is None else "no version"
        return res
    day = today()
    res.examined.append(f"{cloud.upper()} {minor} on {day}")
    if line := k8s_support.problem(cloud, minor, day):
        res.fail(f"kubernetesVersion: {line}")
        return res
    s = k8s_support.support_status(cloud, minor, day)
    if s.phase == "extended":
        standard = float(k8s_support.calendar()[cloud]["standardHourly"])
        _, warning = k8s_support.control_plane_fee(cloud, minor, day, standard)
        res.note(f"warning: {warning}")
    elif (s.standard_end - day).days <= WARN_DAYS:
        res.note(
            f"warning: {cloud.upper()} {minor} leaves standard support on {s.standard_end} "
            f"({(s.standard_end - day).days} days): plan the upgrade"
        )
    return res
