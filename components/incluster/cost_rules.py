"""GPU cost from what the platform knows: recording rules that price the GPUs running pods hold, by team,
job and pool, and what committed capacity (reservations, Capacity Blocks) costs while idle.

Prices come in as `PoolPrice`s, made by components/platform.py from the same table `trainplane plan` prints
(components/pricing.py: the catalog and `pricing.overrides`); the in-cluster layer never asks the catalog.

The series, all from kube-state-metrics (kubernetes/kube-state-metrics docs/metrics; infra/verify/facts.yaml):
- kube_pod_container_resource_requests{resource="nvidia_com_gpu"} (namespace, pod, node): GPUs a container
  asked for, on the node it was scheduled to;
- kube_pod_status_phase{phase="Running"} == 1: only running pods hold their GPUs;
- kube_pod_labels{label_trainplane_dev_job}: the job, and kube_node_labels{label_trainplane_dev_pool}: the
  pool of a node. KSM exports no Kubernetes label by default: kube-prometheus-stack 88.5.3 depends on
  kube-state-metrics 8.4.0 (prometheus-community/helm-charts@kube-prometheus-stack-88.5.3:
  charts/kube-prometheus-stack/Chart.yaml), whose values.yaml has `metricLabelsAllowlist: []` and whose
  templates/deployment.yaml joins the list with "," into --metric-labels-allowlist
  (@kube-state-metrics-8.4.0); the parent's values leave it unset. So `ksm_values()` allows exactly these
  two (KSM names a label `a.b/c` `label_a_b_c`);
- kube_node_status_allocatable{resource="nvidia_com_gpu"}: GPUs an on-demand or spot node brings, paid for
  whether a pod holds them or not.

Every `..._per_hour` series is a rate in dollars per hour, recorded once a minute (the group's interval).
A pod's series exists only while it runs, so its dollars over a window are sum_over_time(rate[w]) / 60 (each
sample stands for one minute), not avg_over_time(rate[w]) * hours: the average is over the samples that
exist, and would charge a pod that ran 10 minutes of the hour for the whole hour. `cost_query()` builds
the same sum from the same expression for `trainplane cost`, so report and rules agree to the cent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.bundle import POOL_LABEL as POOL_NODE_LABEL
from components.incluster.names import JOB_LABEL

UNASSIGNED = "unassigned"
# Rule evaluation interval: each recorded sample stands for this many seconds of spend.
INTERVAL_S = 60
WINDOWS = {"1h": 3600, "1d": 86400}
BY = ("team", "job", "pool")

PRICE = "trainplane:pool_gpu_hourly_price:dollars"
COST_RATE = "trainplane:gpu_cost:dollars_per_hour"
IDLE_RATE = "trainplane:gpu_idle_cost:dollars_per_hour"
USED_GPUS = "trainplane:gpus_held:count"


def ksm_label(label: str) -> str:
    """kube-state-metrics' name of a Kubernetes label on its *_labels series."""
    return "label_" + "".join(c if c.isalnum() else "_" for c in label)


@dataclass(frozen=True)
class PoolPrice:
    """One GPU pool's price, as the cost rules need it."""

    pool: str
    capacity: str
    # Dollars per GPU-hour: the pool's node price at its capacity type over its GPUs per node.
    gpu_hourly: float
    # Reserved capacity: GPUs paid for always (maxNodes x GPUs per node); 0 for other pools.
    committed_gpus: int = 0
    # The team a reservation's idle share is charged to; None: shown as `unassigned`.
    owner: str | None = None


def _const(value: float, labels: dict[str, str]) -> str:
    """A constant series with labels: vector() has none, each label_replace with an empty source and an
    empty regex sets one."""
    expr = f"vector({value!r})"
    for k, v in labels.items():
        expr = f'label_replace({expr}, "{k}", "{v}", "", "")'
    return expr


def price_expr(prices: Sequence[PoolPrice]) -> str:
    """Dollars per GPU-hour per pool (labels pool, capacity); `vector(0) < 0` (empty) without pools."""
    parts = [_const(p.gpu_hourly, {"pool": p.pool, "capacity": p.capacity}) for p in prices]
    return " or ".join(parts) if parts else "vector(0) < 0"


def _committed_expr(prices: Sequence[PoolPrice]) -> str:
    parts = [
        _const(float(p.committed_gpus), {"pool": p.pool, "team": p.owner or UNASSIGNED})
        for p in prices
        if p.committed_gpus
    ]
    return " or ".join(parts) if parts else "vector(0) < 0"


NODE_POOL = (
    f'max by (node, pool) (label_replace(kube_node_labels{{{ksm_label(POOL_NODE_LABEL)}!=""}}, '
    f'"pool", "$1", "{ksm_label(POOL_NODE_LABEL)}", "(.+)"))'
)
# GPUs each running pod holds, with its team (= namespace), job and node's pool.
POD_GPUS = (
    "sum by (team, job, pool) ("
    "label_replace(label_replace("
    'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}'
    f" * on (namespace, pod) group_left ({ksm_label(JOB_LABEL)})"
    f" max by (namespace, pod, {ksm_label(JOB_LABEL)}) (kube_pod_labels)"
    f', "job", "$1", "{ksm_label(JOB_LABEL)}", "(.*)"), "team", "$1", "namespace", "(.*)")'
    ' * on (namespace, pod) group_left () (max by (namespace, pod) (kube_pod_status_phase{phase="Running"}) == 1)'
    f" * on (node) group_left (pool) {NODE_POOL})"
)


def cost_rate_expr(prices: Sequence[PoolPrice]) -> str:
    """Dollars per hour the running pods' GPUs cost, by team, job, pool and capacity."""
    return f"{POD_GPUS} * on (pool) group_left (capacity) ({price_expr(prices)})"


def idle_rate_expr(prices: Sequence[PoolPrice]) -> str:
    """Dollars per hour of GPUs paid for and held by no pod, by pool, capacity and team: a reservation's
    whole size (its owner team's, else unassigned), an on-demand or spot node's allocatable GPUs
    (unassigned)."""
    allocatable = (
        'sum by (pool) (kube_node_status_allocatable{resource="nvidia_com_gpu"}'
        f" * on (node) group_left (pool) {NODE_POOL})"
    )
    # A reservation is charged only while the cluster is seen (kube-state-metrics reports a node): not
    # for the days before the platform existed, nor while its metrics are missing.
    committed = f"(({_committed_expr(prices)}) and on () count(kube_node_labels) > 0)"
    paid = f"({committed} or on (pool) {allocatable})"
    used = f"(sum by (pool) ({POD_GPUS}) or on (pool) {paid} * 0)"
    # group_left keeps the left side's team: one-to-one matching on (pool) would keep only pool.
    idle = f"clamp_min({paid} - on (pool) group_left () {used}, 0)"
    priced = f"{idle} * on (pool) group_left (capacity) ({price_expr(prices)})"
    return f'label_replace({priced}, "team", "{UNASSIGNED}", "team", "")'


def span(seconds: int) -> str:
    """A range one second short of the window: it holds exactly seconds / INTERVAL_S samples whether the
    range is closed at its start (Prometheus 2) or open there (Prometheus 3, the chart's)."""
    return f"{seconds - 1}s"


def window_dollars(rate: str, seconds: int, by: Sequence[str]) -> str:
    """Dollars a rate series added up to over the window, summed by `by` (see the module docstring)."""
    return f"sum by ({', '.join(by)}) (sum_over_time({rate}[{span(seconds)}])) / {3600 // INTERVAL_S}"


def _by(key: str) -> tuple[str, ...]:
    # A job name is unique only within its team's namespace.
    return ("team", "job") if key == "job" else (key,)


def recorded() -> frozenset[str]:
    """Every series name the cost rules record (dashboards may read these)."""
    names = {PRICE, USED_GPUS, COST_RATE, IDLE_RATE}
    for window in WINDOWS:
        names |= {f"trainplane:{key}_gpu_cost:dollars_{window}" for key in BY}
        names |= {f"trainplane:{key}_gpu_idle_cost:dollars_{window}" for key in ("team", "pool")}
    return frozenset(names)


def cost_groups(prices: Sequence[PoolPrice]) -> list[dict[str, Any]]:
    """The recording rules (a PrometheusRule's group). Without a priced GPU pool they record nothing,
    but exist, so the cost dashboard reads defined (empty) series."""
    rules: list[dict[str, Any]] = [
        {"record": PRICE, "expr": price_expr(prices)},
        {"record": USED_GPUS, "expr": POD_GPUS},
        {"record": COST_RATE, "expr": cost_rate_expr(prices)},
        {"record": IDLE_RATE, "expr": idle_rate_expr(prices)},
    ]
    for window, seconds in WINDOWS.items():
        for key in BY:
            rules.append(
                {
                    "record": f"trainplane:{key}_gpu_cost:dollars_{window}",
                    "expr": window_dollars(COST_RATE, seconds, _by(key)),
                }
            )
        for key in ("team", "pool"):
            rules.append(
                {
                    "record": f"trainplane:{key}_gpu_idle_cost:dollars_{window}",
                    "expr": window_dollars(IDLE_RATE, seconds, (key,)),
                }
            )
    return [{"name": "trainplane-cost", "interval": f"{INTERVAL_S}s", "rules": rules}]


def cost_query(prices: Sequence[PoolPrice], what: str, seconds: int, by: Sequence[str]) -> str:
    """What `trainplane cost` asks Prometheus: the recorded rate's own expression as a subquery stepped
    like the rule group, so the report needs no history of the recording rules (`what`: cost, idle or
    gpu_hours)."""
    expr = {"cost": cost_rate_expr, "idle": idle_rate_expr}.get(what)
    inner = expr(prices) if expr else POD_GPUS
    step = 3600 // INTERVAL_S
    return f"sum by ({', '.join(by)}) (sum_over_time(({inner})[{span(seconds)}:{INTERVAL_S}s])) / {step}"


def ksm_values() -> dict[str, Any]:
    """kube-prometheus-stack values: the node and pod labels the cost rules read from kube-state-metrics."""
    return {
        "kube-state-metrics": {"metricLabelsAllowlist": [f"nodes=[{POOL_NODE_LABEL}]", f"pods=[{JOB_LABEL}]"]}
    }
