"""One synthetic cluster, minute by minute, for the cost rules (promtool) and `trainplane cost` (a real
Prometheus): kube-state-metrics series as kube-prometheus-stack stores them (KSM's ServiceMonitor honours
the metric labels, so a pod's namespace is the pod's) and the node -> pool `up` series of the ServiceMonitor
`trainplane-node-pools` (components/incluster/cost_rules.node_pool_service_monitor), on the pools of stacks/Pulumi.aws-h100-reserved.yaml
with its `h100-odcr` reservation owned by team research.

Minutes 0..180, one sample a minute. Over the hour ending at minute 120 (samples 61..120):
Pods name their job through their owners, as kube-state-metrics reports them (kube_pod_owner,
kube_job_owner; "<none>" where an object has no owner): the JobSet gpt's pods are owned by its child
Jobs gpt-workers-0 and gpt-workers-1, the elastic job ev's pods by its Job ev (owned by no JobSet).
- research/gpt-0 (job gpt) holds 8 GPUs on h100-od the whole time,
- research/gpt-1 (job gpt) holds 8 GPUs on h100-block until minute 90, then Succeeded (30 of the 60),
- eval/ev-0 (job ev) holds 2 + 2 GPUs (two containers) on h100-spot the whole time,
- eval/ev-pending asks for 8 GPUs and is never scheduled (no node): costs nothing,
- system/cuda-test holds 1 GPU on a node outside every pool: priced by no pool, costs nothing.
Each node has 8 allocatable GPUs; the reservations are 32 GPUs (h100-block, 4 x p5.48xlarge) and 16
(h100-odcr, 2 x p5.48xlarge) whether nodes run or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

MINUTES = 181  # samples at minutes 0..180
KSM = {
    "job": "kube-state-metrics",
    "instance": "10.0.0.12:8080",
    "service": "kube-prometheus-stack-kube-state-metrics",
}
# The node -> pool ServiceMonitor's target labels (its relabelings, and the operator's for an endpoint).
NODE_POOLS = {
    "job": "trainplane-node-pools",
    "namespace": "monitoring",
    "service": "kube-prometheus-stack-prometheus-node-exporter",
    "endpoint": "http-metrics",
}
CAPACITY = {
    "h100-od": "on-demand",
    "h100-spot": "spot",
    "h100-block": "capacity-block",
    "h100-odcr": "reservation",
}
NONE = "<none>"

# pool's price per GPU-hour at its capacity (the plan's table: p5.48xlarge $55.04/h on demand in the catalog,
# spot at 45% of it, reserved at pricing.overrides' $31.46/h), by hand: node price / 8 GPUs.
PRICE = {"h100-od": 55.04 / 8, "h100-spot": 55.04 * 0.45 / 8, "h100-block": 31.46 / 8, "h100-odcr": 31.46 / 8}
NODES = {
    "n-od": "h100-od",
    "n-spot": "h100-spot",
    "n-block": "h100-block",
    "n-odcr": "h100-odcr",
    "n-sys": None,
}
# Kubernetes Job -> (namespace, its JobSet or None: an elastic job's Job, owned by no JobSet)
JOBS = {
    "gpt-workers-0": ("research", "gpt"),
    "gpt-workers-1": ("research", "gpt"),
    "ev": ("eval", None),
}
# pod -> namespace, owning Job (None: a bare pod), node, GPUs per container, last minute Running (later:
# Succeeded)
PODS = {
    "gpt-0": ("research", "gpt-workers-0", "n-od", (8,), 180),
    "gpt-1": ("research", "gpt-workers-1", "n-block", (8,), 90),
    "ev-0": ("eval", "ev", "n-spot", (2, 2), 180),
    "ev-pending": ("eval", "ev", "", (8,), -1),
    "cuda-test": ("system", None, "n-sys", (1,), 180),
}


def series() -> Iterator[tuple[str, dict[str, str], list[float]]]:
    """(metric, labels, value per minute) for every series of the cluster."""
    for i, (node, pool) in enumerate(NODES.items()):
        target = {
            **NODE_POOLS,
            "instance": f"10.0.1.{i}:9100",
            "pod": f"kube-prometheus-stack-prometheus-node-exporter-{node}",
            "container": "node-exporter",
            "node": node,
            **({"pool": pool, "capacity": CAPACITY[pool]} if pool else {}),
        }
        # n-spot's node exporter fails every scrape (up 0): its node still belongs to its pool.
        yield "up", target, [0.0 if node == "n-spot" else 1.0] * MINUTES
        labels = {**KSM, "node": node, "resource": "nvidia_com_gpu", "unit": "integer"}
        yield "kube_node_status_allocatable", labels, [8.0] * MINUTES
    for job, (ns, jobset) in JOBS.items():
        kind, name = ("JobSet", jobset) if jobset else (NONE, NONE)
        owner = {"owner_kind": kind, "owner_name": name, "owner_is_controller": "true" if jobset else NONE}
        yield "kube_job_owner", {**KSM, "namespace": ns, "job_name": job, **owner}, [1.0] * MINUTES
    for pod, (ns, job, node, gpus, last) in PODS.items():
        uid = f"uid-{pod}"
        base = {**KSM, "namespace": ns, "pod": pod, "uid": uid}
        kind, name = ("Job", job) if job else (NONE, NONE)
        owner = {"owner_kind": kind, "owner_name": name, "owner_is_controller": "true" if job else NONE}
        yield "kube_pod_owner", {**base, **owner}, [1.0] * MINUTES
        for i, n in enumerate(gpus):
            labels = {
                **base,
                "container": f"c{i}",
                "node": node,
                "resource": "nvidia_com_gpu",
                "unit": "integer",
            }
            yield "kube_pod_container_resource_requests", labels, [float(n)] * MINUTES
        running = [1.0 if m <= last else 0.0 for m in range(MINUTES)]
        yield "kube_pod_status_phase", {**base, "phase": "Running"}, running
        pending = [1.0 if last < 0 else 0.0] * MINUTES
        yield "kube_pod_status_phase", {**base, "phase": "Pending"}, pending
        yield (
            "kube_pod_status_phase",
            {**base, "phase": "Succeeded"},
            [1.0 - r - p for r, p in zip(running, pending, strict=True)],
        )


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if v != "")


Rows = Iterable[tuple[str, dict[str, str], list[float]]]


def promtool_series(rows: Rows | None = None) -> list[dict[str, str]]:
    """input_series of a promtool rule test (interval 1m); `rows`: another data set's series()."""
    return [
        {"series": f"{name}{{{_labels(labels)}}}", "values": " ".join(f"{v:g}" for v in values)}
        for name, labels, values in (series() if rows is None else rows)
    ]


def openmetrics(start_s: int, rows: Rows | None = None) -> str:
    """The same series as an OpenMetrics file for `promtool tsdb create-blocks-from openmetrics`, minute 0 at
    `start_s` (Unix seconds); `rows`: another data set's series()."""
    by_name: dict[str, list[str]] = {}
    for name, labels, values in series() if rows is None else rows:
        lines = by_name.setdefault(name, [])
        for m, v in enumerate(values):
            lines.append(f"{name}{{{_labels(labels)}}} {v:g} {start_s + 60 * m}")
    out = []
    for name, lines in by_name.items():
        out.append(f"# TYPE {name} gauge")
        out.extend(lines)
    out.append("# EOF")
    return "\n".join(out) + "\n"


# Dollars over the hour ending at minute 120 (samples 61..120: 60 minutes), by hand.
HOUR_END_MIN = 120
GPT0 = 8 * PRICE["h100-od"] * 60 / 60  # 55.04
GPT1 = 8 * PRICE["h100-block"] * 30 / 60  # 15.73: Running 61..90
EV0 = 4 * PRICE["h100-spot"] * 60 / 60  # 12.384
IDLE_BLOCK = (32 * 60 - 8 * 30) * PRICE["h100-block"] / 60  # 110.11 unassigned
IDLE_ODCR = 16 * PRICE["h100-odcr"]  # 62.92 research (the owner)
IDLE_SPOT = (8 - 4) * PRICE["h100-spot"]  # 12.384 unassigned
IDLE_OD = 0.0
HOUR = {
    "team": {"research": GPT0 + GPT1, "eval": EV0},
    "job": {("research", "gpt"): GPT0 + GPT1, ("eval", "ev"): EV0},
    "pool": {"h100-od": GPT0, "h100-block": GPT1, "h100-spot": EV0},
}
HOUR_IDLE = {
    "team": {"unassigned": IDLE_BLOCK + IDLE_SPOT, "research": IDLE_ODCR},
    "pool": {"h100-block": IDLE_BLOCK, "h100-odcr": IDLE_ODCR, "h100-spot": IDLE_SPOT, "h100-od": IDLE_OD},
}
HOUR_GPU_HOURS = {"research": 8 + 8 * 30 / 60, "eval": 4.0}
