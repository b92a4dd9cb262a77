"""Idle reclaim's Prometheus side (issue 20, point 3): the per-job GPU utilisation recording rule and one
alert per team with an idle policy. Names come from contract/idle.py only; the GPU health
controller reads the alert through ALERTS (idle_reclaim.IDLE_QUERY) and acts on it (Event, and with `requeue` the
Workload's deactivation).

What the rule reads:
- DCGM_FI_DEV_GPU_UTIL (0-100), one series per GPU. The DCGM ServiceMonitor has honorLabels and drops the
  target's own pod/namespace/container (gpu_operator.dcgm_exporter_values, DCGM_RELABELINGS), so `pod` and
  `namespace` are those of the pod holding the GPU (dcgm-exporter's kubelet pod-resources mapping), and
  absent while no pod holds it: `pod!=""` keeps only held GPUs. Its other labels (`job` is the scrape job,
  nvidia-dcgm-exporter) are aggregated away per GPU (namespace, pod, node, gpu).
- the pod's training job: cost_rules.POD_JOB (kube_pod_owner/kube_job_owner: the JobSet, else the Job),
  reused as is so cost and idleness name a job the same way. Pods owned by no Job (a notebook, a bare
  pod) have no job and no idle alert of ours (GpuIdleButAllocated, per pod, still covers them).

The job's value is the mean over its GPUs at each evaluation, so one busy GPU of eight does not keep an
idle job alive and a data-loading stall on one rank does not make a busy job idle. The alert's `for` is
the team's window: a single evaluation at or above the threshold resets it (Prometheus' pending state),
and so does a moment of exemption.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.incluster.cost_rules import POD_JOB, span
from components.spec import TeamSpec
from contract.idle import IDLE_ALERT, IDLE_EXEMPT_METRIC, JOB_GPU_UTIL

GROUP = "trainplane.idle"
# Every series this module records (dashboards/metrics.py lets dashboards and rules read them).
RECORDED = (JOB_GPU_UTIL,)
# Step of idle_candidates_query's subquery: one sample a minute stands for one rule evaluation.
STEP_S = 60


def _num(value: float) -> str:
    """5.0 -> "5", 2.5 -> "2.5": the threshold as PromQL and the summary show it."""
    return f"{value:g}"


def job_gpu_util_expr(namespace: str | None = None) -> str:
    """Mean GPU utilisation of each training job's GPUs (labels namespace, job, team = namespace, as the
    cost rules label a team); `namespace`: only that namespace's jobs."""
    ns = f', namespace="{namespace}"' if namespace else ""
    per_gpu = f'max by (namespace, pod, node, gpu) (DCGM_FI_DEV_GPU_UTIL{{pod!=""{ns}}})'
    # `and` keeps the pods a Job owns: POD_JOB also lists the others, without a job label.
    owned = 'kube_pod_owner{owner_kind="Job"}'
    per_job = f"avg by (namespace, job) ({per_gpu} * on (namespace, pod) group_left (job) {POD_JOB} and on (namespace, pod) {owned})"
    return f'label_replace({per_job}, "team", "$1", "namespace", "(.+)")'


EXEMPT = f"unless on (namespace, job) ({IDLE_EXEMPT_METRIC} == 1)"


def idle_alert_expr(team: TeamSpec) -> str:
    """The team's alert expression (the team's namespace is its name: components.bundle.team_namespace)."""
    assert team.idle is not None, team.name
    return f'({JOB_GPU_UTIL}{{namespace="{team.name}"}} < {_num(team.idle.gpu_util_below)}) {EXEMPT}'


def idle_alert(team: TeamSpec) -> dict[str, Any]:
    """One team's alert rule: its threshold, its window as `for`, labels team and action."""
    idle = team.idle
    assert idle is not None, team.name
    return {
        "alert": IDLE_ALERT,
        "expr": idle_alert_expr(team),
        "for": idle.for_,
        "labels": {"severity": "warning", "platform": "trainplane", "team": team.name, "action": idle.action},
        "annotations": {
            "summary": "Training job {{ $labels.namespace }}/{{ $labels.job }}'s GPUs averaged under "
            f"{_num(idle.gpu_util_below)}% for {idle.for_} (team {team.name}'s idle policy, action "
            f"{idle.action})"
            + (": its Workload is requeued to give the GPUs back" if idle.action == "requeue" else "")
        },
    }


def idle_groups(teams: Sequence[TeamSpec]) -> list[dict[str, Any]]:
    """The PrometheusRule group: the recording rule always (dashboards read a defined series), an alert
    per team with an idle policy."""
    rules: list[dict[str, Any]] = [{"record": JOB_GPU_UTIL, "expr": job_gpu_util_expr()}]
    rules += [idle_alert(t) for t in teams if t.idle is not None]
    return [{"name": GROUP, "rules": rules}]


def idle_candidates_query(teams: Sequence[TeamSpec]) -> str:
    """The jobs the alert fires for at the query's time, as one instant query that needs no rule history
    (the rule's own expression in a subquery stepped a minute, as cost_rules.cost_query does): below the
    team's threshold at each of the window's minutes and at its start, i.e. the (window / 1m) + 1
    evaluations a one-minute rule group makes from pending to firing, and not exempt now. Labels
    namespace, job, team, action. Empty (`vector(0) < 0`) without an idle policy."""
    parts = []
    for t in teams:
        if t.idle is None:
            continue
        util = job_gpu_util_expr(t.name)
        # One window plus one step: window / step + 1 samples, whether the range is closed at its start
        # (Prometheus 2) or open there (Prometheus 3) (cost_rules.span).
        rng = f"[{span(t.idle.minutes * 60 + STEP_S)}:{STEP_S}s]"
        below = f"max_over_time(({util}){rng}) < {_num(t.idle.gpu_util_below)}"
        whole = f"count_over_time(({util}){rng}) >= {t.idle.minutes + 1}"
        labelled = (
            f'label_replace(({below} and on (namespace, job) {whole}), "action", "{t.idle.action}", "", "")'
        )
        parts.append(f"({labelled} {EXEMPT})")
    return " or ".join(parts) if parts else "vector(0) < 0"
