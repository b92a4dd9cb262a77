"""One synthetic cluster, minute by minute, for the cost rules (promtool) and `trainplane cost` (a real
Prometheus): kube-state-metrics series as kube-prometheus-stack stores them (KSM's ServiceMonitor honours
the metric labels, so a pod's namespace is the pod's), on the pools of stacks/Pulumi.aws-h100-reserved.yaml
with its `h100-odcr` reservation owned by team research.

Minutes 0..180, one sample a minute. Over the hour ending at minute 120 (samples 61..120):
- research/gpt-0 (job gpt) holds 8 GPUs on h100-od the whole time,
- research/gpt-1 (job gpt) holds 8 GPUs on h100-block until minute 90, then Succeeded (30 of the 60),
- eval/ev-0 (job ev) holds 2 + 2 GPUs (two containers) on h100-spot the whole time,
- eval/ev-pending asks for 8 GPUs and is never scheduled (no node): costs nothing,
- system/cuda-test holds 1 GPU on a node outside every pool: priced by no pool, costs nothing.
Each node has 8 allocatable GPUs; the reservations are 32 GPUs (h100-block, 4 x p5.48xlarge) and 16
(h100-odcr, 2 x p5.48xlarge) whether nodes run or not.
"""

from __future__ import annotations

from collections.abc import Iterator

MINUTES = 181  # samples at minutes 0..180
KSM = {
    "job": "kube-state-metrics",
    "instance": "10.0.0.12:8080",
    "service": "kube-prometheus-stack-kube-state-metrics",
}
POOL = "label_trainplane_dev_pool"
JOB = "label_trainplane_dev_job"

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
# pod -> namespace, job, node, GPUs per container, last minute Running (later: Succeeded)
PODS = {
    "gpt-0": ("research", "gpt", "n-od", (8,), 180),
    "gpt-1": ("research", "gpt", "n-block", (8,), 90),
    "ev-0": ("eval", "ev", "n-spot", (2, 2), 180),
    "ev-pending": ("eval", "ev", "", (8,), -1),
    "cuda-test": ("system", "", "n-sys", (1,), 180),
}


def series() -> Iterator[tuple[str, dict[str, str], list[float]]]:
    """(metric, labels, value per minute) for every series of the cluster."""
    for node, pool in NODES.items():
        yield "kube_node_labels", {**KSM, "node": node, **({POOL: pool} if pool else {})}, [1.0] * MINUTES
        labels = {**KSM, "node": node, "resource": "nvidia_com_gpu", "unit": "integer"}
        yield "kube_node_status_allocatable", labels, [8.0] * MINUTES
    for pod, (ns, job, node, gpus, last) in PODS.items():
        uid = f"uid-{pod}"
        base = {**KSM, "namespace": ns, "pod": pod, "uid": uid}
        yield "kube_pod_labels", {**base, **({JOB: job} if job else {})}, [1.0] * MINUTES
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


def promtool_series() -> list[dict[str, str]]:
    """input_series of a promtool rule test (interval 1m)."""
    return [
        {"series": f"{name}{{{_labels(labels)}}}", "values": " ".join(f"{v:g}" for v in values)}
        for name, labels, values in series()
    ]


def openmetrics(start_s: int) -> str:
    """The same series as an OpenMetrics file for `promtool tsdb create-blocks-from openmetrics`, minute 0 at
    `start_s` (Unix seconds)."""
    by_name: dict[str, list[str]] = {}
    for name, labels, values in series():
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
