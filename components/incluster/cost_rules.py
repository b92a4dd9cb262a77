"""GPU cost from what the platform knows: recording rules that price the GPUs running pods hold, by team,
job and pool, and what committed capacity (reservations, Capacity Blocks) costs while idle.

Prices come in as `PoolPrice`s, made by components/platform.py from the same table `trainplane plan` prints
(components/pricing.py: the catalog and `pricing.overrides`); the in-cluster layer never asks the catalog.

The series (kube-state-metrics' defaults: kubernetes/kube-state-metrics docs/metrics/workload/pod-metrics.md,
job-metrics.md and docs/metrics/cluster/node-metrics.md; infra/verify/facts.yaml), none of which needs a
chart value the team's values checker does not know:
- kube_pod_container_resource_requests{resource="nvidia_com_gpu"} (namespace, pod, node): GPUs a container
  asked for, on the node it was scheduled to;
- kube_pod_status_phase{phase="Running"} == 1: only running pods hold their GPUs;
- the job: kube_pod_owner{owner_kind="Job", owner_name} names a pod's Job, kube_job_owner{job_name,
  owner_kind="JobSet", owner_name} that Job's JobSet (a JobSet's child Jobs are owned by it; an elastic
  job's pods by its Job, which has no JobSet owner). A pod owned by no Job has no job (its team pays);
- the pool: `up{job="trainplane-node-pools", node, pool}`, one series per node from our own ServiceMonitor
  on the node exporter's Service (`node_pool_service_monitor()`): `attachMetadata.node` gives each target
  its node's labels (Prometheus' kubernetes_sd `attach_metadata.node` for role endpoints, mapped by
  prometheus-operator), relabelings copy `trainplane.dev/pool` and `trainplane.dev/capacity` into target
  labels, and metricRelabelings drop every scraped sample, so only the scrape's own series are stored.
  kube-state-metrics' kube_node_labels would need its `metricLabelsAllowlist`, a subchart value;
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

from components.bundle import CAPACITY_LABEL, POOL_LABEL
from components.incluster.names import PROMETHEUS_RELEASE

UNASSIGNED = "unassigned"
# Rule evaluation interval: each recorded sample stands for this many seconds of spend.
INTERVAL_S = 60
WINDOWS = {"1h": 3600, "1d": 86400}
BY = ("team", "job", "pool")

PRICE = "trainplane:pool_gpu_hourly_price:dollars"
COST_RATE = "trainplane:gpu_cost:dollars_per_hour"
IDLE_RATE = "trainplane:gpu_idle_cost:dollars_per_hour"
USED_GPUS = "trainplane:gpus_held:count"


# The `job` label of the node -> pool series (set by node_pool_service_monitor()'s relabelings).
NODE_POOLS_JOB = "trainplane-node-pools"


def node_meta_label(label: str) -> str:
    """Prometheus' service-discovery name of a node label (kubernetes_sd, role node or attach_metadata)."""
    return "__meta_kubernetes_node_label_" + "".join(c if c.isalnum() else "_" for c in label)


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
    # A Capacity Block's dates (blockStart, blockEnd) in Unix seconds: its GPUs are paid for only between
    # them (EC2 "Capacity Blocks for ML": the block exists from its start to its end date); None: always.
    window: tuple[int, int] | None = None
    # `nvidia.com/gpu` units each physical GPU advertises: GPU time-slicing's replicas (the device plugin's
    # sharing.timeSlicing.resources[].replicas with renameByDefault false, components/incluster/gpu_operator.py;
    # NVIDIA GPU Operator docs "Time-Slicing GPUs in Kubernetes"), else 1. Pods request, and nodes advertise,
    # units; the rules count physical GPUs (units / shares) and price those.
    shares: int = 1


def _const(value: float | str, labels: dict[str, str]) -> str:
    """A constant series with labels (`value`: a number or a scalar expression): vector() has none, each
    label_replace with an empty source and an empty regex sets one."""
    expr = f"vector({value if isinstance(value, str) else repr(value)})"
    for k, v in labels.items():
        expr = f'label_replace({expr}, "{k}", "{v}", "", "")'
    return expr


def price_expr(prices: Sequence[PoolPrice]) -> str:
    """Dollars per GPU-hour per pool (labels pool, capacity); `vector(0) < 0` (empty) without pools."""
    parts = [_const(p.gpu_hourly, {"pool": p.pool, "capacity": p.capacity}) for p in prices]
    return " or ".join(parts) if parts else "vector(0) < 0"


def committed_scalar(p: PoolPrice) -> str:
    """GPUs the pool's reservation holds at the evaluation time: a Capacity Block's only in
    [blockStart, blockEnd), 0 outside (time() is each step's own time in a subquery, so the report's
    subquery and the rule agree). 0 rather than no series, so the pool's paid GPUs do not fall back to
    its nodes' allocatable ones (a block's last node seen within the lookback after its end)."""
    gpus = float(p.committed_gpus)
    if p.window is None:
        return repr(gpus)
    start, end = p.window
    return f"{gpus!r} * (time() >= bool {start}) * (time() < bool {end})"


def _committed_expr(prices: Sequence[PoolPrice]) -> str:
    parts = [
        _const(committed_scalar(p), {"pool": p.pool, "team": p.owner or UNASSIGNED})
        for p in prices
        if p.committed_gpus
    ]
    return " or ".join(parts) if parts else "vector(0) < 0"


# Node -> pool: `group` is 1 whatever `up` says (a failed scrape still names the node's pool).
NODE_POOL = f'group by (node, pool) (up{{job="{NODE_POOLS_JOB}", pool!=""}})'
# Pod -> job (labels namespace, pod, job): its Job's JobSet, else its Job; a pod of no Job has no job label.
# KSM's target label job="kube-state-metrics" is replaced on the first two, dropped on the last.
_POD_JOB_NAME = 'label_replace(kube_pod_owner{owner_kind="Job"}, "job_name", "$1", "owner_name", "(.+)")'
POD_JOB = (
    "max by (namespace, pod, job) ("
    f"{_POD_JOB_NAME} * on (namespace, job_name) group_left (job)"
    ' max by (namespace, job_name, job) (label_replace(kube_job_owner{owner_kind="JobSet"},'
    ' "job", "$1", "owner_name", "(.+)"))'
    ' or on (namespace, pod) label_replace(kube_pod_owner{owner_kind="Job"}, "job", "$1", "owner_name", "(.+)")'
    ' or on (namespace, pod) label_replace(kube_pod_owner, "job", "", "", ""))'
)
# GPUs each running pod holds, with its team (= namespace), job and node's pool.
POD_GPUS = (
    "sum by (team, job, pool) ("
    "label_replace("
    'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}'
    f" * on (namespace, pod) group_left (job) {POD_JOB}"
    ', "team", "$1", "namespace", "(.*)")'
    ' * on (namespace, pod) group_left () (max by (namespace, pod) (kube_pod_status_phase{phase="Running"}) == 1)'
    f" * on (node) group_left (pool) {NODE_POOL})"
)


def physical(units: str, prices: Sequence[PoolPrice]) -> str:
    """`units` (a series with a pool label, in advertised nvidia.com/gpu units) as physical GPUs: over each
    pool's shares; unchanged where no pool shares its GPUs."""
    if all(p.shares == 1 for p in prices):
        return units
    per = " or ".join(_const(1 / p.shares, {"pool": p.pool}) for p in prices)
    return f"({units} * on (pool) group_left () ({per}))"


def held_expr(prices: Sequence[PoolPrice]) -> str:
    """Physical GPUs running pods hold, by team, job and pool."""
    return physical(POD_GPUS, prices)


def cost_rate_expr(prices: Sequence[PoolPrice]) -> str:
    """Dollars per hour the running pods' GPUs cost, by team, job, pool and capacity."""
    return f"{held_expr(prices)} * on (pool) group_left (capacity) ({price_expr(prices)})"


def idle_rate_expr(prices: Sequence[PoolPrice]) -> str:
    """Dollars per hour of GPUs paid for and held by no pod, by pool, capacity and team: a reservation's
    whole size (its owner team's, else unassigned), an on-demand or spot node's allocatable GPUs
    (unassigned)."""
    allocatable = physical(
        'sum by (pool) (kube_node_status_allocatable{resource="nvidia_com_gpu"}'
        f" * on (node) group_left (pool) {NODE_POOL})",
        prices,
    )
    # A reservation is charged only while the cluster is seen (kube-state-metrics reports a node): not
    # for the days before the platform existed, nor while its metrics are missing.
    committed = f"(({_committed_expr(prices)}) and on () count(kube_node_status_allocatable) > 0)"
    paid = f"({committed} or on (pool) {allocatable})"
    used = f"(sum by (pool) ({held_expr(prices)}) or on (pool) {paid} * 0)"
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
        {"record": USED_GPUS, "expr": held_expr(prices)},
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
    inner = expr(prices) if expr else held_expr(prices)
    step = 3600 // INTERVAL_S
    return f"sum by ({', '.join(by)}) (sum_over_time(({inner})[{span(seconds)}:{INTERVAL_S}s])) / {step}"


def node_pool_service_monitor(namespace: str) -> dict[str, Any]:
    """The ServiceMonitor spec whose `up` series map each node to its pool and capacity (module docstring).

    It selects the node exporter's Service, which kube-prometheus-stack deploys with an endpoint on every
    node (its DaemonSet): selector labels of prometheus-community/helm-charts
    charts/prometheus-node-exporter/templates/_helpers.tpl (`prometheus-node-exporter.selectorLabels`:
    app.kubernetes.io/name, app.kubernetes.io/instance = the release), port `http-metrics`
    (kube-prometheus-stack-88.5.3 values.yaml `prometheus-node-exporter.service.portName`).
    `attachMetadata.node` is in the chart's ServiceMonitor CRD (prometheus-operator v0.93.1); the operator
    writes it as kubernetes_sd `attach_metadata: {node: true}` ("valid for roles: pod, endpoints,
    endpointslice", Prometheus' configuration docs; prometheus-node-exporter's own chart offers the same
    for its ServiceMonitor, "Requires Prometheus v2.35.0 and above"; kube-prometheus-stack 88.5.3 runs
    Prometheus v3.14.0): each endpoint target gets __meta_kubernetes_node_label_* of its pod's node; Prometheus
    must list and watch nodes for that, which the chart's ClusterRole grants (kube-prometheus-stack-88.5.3
    templates/prometheus/clusterrole.yaml: nodes get/list/watch). The endpoint's relabelings come after the
    operator's own `job` relabelings (prometheus-operator v0.93.0 pkg/prometheus/promcfg.go
    generateServiceMonitorConfig appends ep.RelabelConfigs last; read at v0.93.0 and release-0.93, the newest
    the mirror holds, as the chart pins v0.93.1), so `job`
    is ours; metricRelabelings drop every sample the node exporter exposes (up and the
    scrape_* series are the scrape's own and stay)."""
    return {
        "selector": {
            "matchLabels": {
                "app.kubernetes.io/name": "prometheus-node-exporter",
                "app.kubernetes.io/instance": PROMETHEUS_RELEASE,
            }
        },
        "namespaceSelector": {"matchNames": [namespace]},
        "attachMetadata": {"node": True},
        "endpoints": [
            {
                "port": "http-metrics",
                "interval": f"{INTERVAL_S}s",
                "relabelings": [
                    {"action": "replace", "targetLabel": "job", "replacement": NODE_POOLS_JOB},
                    {
                        "action": "replace",
                        "sourceLabels": ["__meta_kubernetes_endpoint_node_name"],
                        "targetLabel": "node",
                    },
                    {
                        "action": "replace",
                        "sourceLabels": [node_meta_label(POOL_LABEL)],
                        "targetLabel": "pool",
                    },
                    {
                        "action": "replace",
                        "sourceLabels": [node_meta_label(CAPACITY_LABEL)],
                        "targetLabel": "capacity",
                    },
                ],
                "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"], "regex": ".+"}],
            }
        ],
    }
