"""One synthetic cluster for the idle rules (promtool, test_idle_rules.py) and the idle candidates query (a
real Prometheus, test_idle_query.py): dcgm-exporter's per-GPU utilisation as the DCGM ServiceMonitor stores
it (honorLabels: `pod`/`namespace`/`container` are the workload's; the scrape's `job`, `instance`, `service`,
`endpoint` are the exporter's; gpu_operator.DCGM_RELABELINGS adds `node`), kube-state-metrics' owner series
(cost_data's labels), and the controller's exemption series (its PodMonitor with honorLabels: `namespace`
and `job` are the job's).

Minutes 0..120, one sample a minute. Teams (stacks/Pulumi.aws-h100-reserved.yaml's, with idle policies):
research (below 5% for 30m, requeue), eval (below 10% for 1h, alert), ops (no idle policy).
- research/idle-gpt (JobSet, Jobs idle-gpt-workers-0 and -1, a pod each, 2 GPUs per pod): 0% on three
  GPUs and 8% on one, a mean of 2%: idle from minute 0, alerts from minute 30;
- research/blip (JobSet, one pod, 2 GPUs): 1% but one GPU at 90% at minute 20 (mean 45.5%): idle from 21,
  alerts from 51;
- research/busy (JobSet): 90%, never alerts;
- research/light (JobSet): 7%, over research's 5%: never alerts;
- research/exempt-job (JobSet): 0%, but exempt (the controller's series): never alerts;
- research/notebook (a bare pod, no Job): 0%: no job, so no series and no alert of ours;
- eval/ev (an elastic Job, no JobSet, one pod, 4 GPUs): 7%, under eval's 10%: alerts from minute 60;
- ops/ops-job (JobSet): 0%, but ops has no idle policy: never alerts.
"""

from __future__ import annotations

from collections.abc import Iterator

from tests.helpers.cost_data import KSM, NONE

MINUTES = 121
DCGM = {
    "job": "nvidia-dcgm-exporter",
    "service": "nvidia-dcgm-exporter",
    "endpoint": "gpu-metrics",
    "modelName": "NVIDIA H100 80GB HBM3",
    "DCGM_FI_DRIVER_VERSION": "580.95.05",
}
# The controller's exemption series, scraped by its PodMonitor (honorLabels).
CONTROLLER = {"instance": "10.0.3.7:9102", "container": "controller", "endpoint": "metrics"}

TEAMS = [
    {"name": "research", "gpuQuota": 64, "idle": {"gpuUtilBelow": 5, "for": "30m", "action": "requeue"}},
    {
        "name": "eval",
        "gpuQuota": 16,
        "idle": {"gpuUtilBelow": 10, "for": "1h", "action": "alert", "exemptLabels": {"tier": "interactive"}},
    },
    {"name": "ops", "gpuQuota": 8},
]
ACTION = {"research": "requeue", "eval": "alert"}


def flat(value: float) -> list[float]:
    return [value] * MINUTES


def blip(at: int, value: float, base: float) -> list[float]:
    return [value if m == at else base for m in range(MINUTES)]


# pod -> namespace, owning Job (None: a bare pod), JobSet of that Job (None: an elastic job's own Job),
# node, utilisation per GPU by minute
PODS: dict[str, tuple[str, str | None, str | None, str, list[list[float]]]] = {
    "idle-gpt-workers-0-0-aaaaa": ("research", "idle-gpt-workers-0", "idle-gpt", "n-1", [flat(0), flat(0)]),
    "idle-gpt-workers-1-0-bbbbb": ("research", "idle-gpt-workers-1", "idle-gpt", "n-2", [flat(0), flat(8)]),
    "blip-workers-0-0-ccccc": ("research", "blip-workers-0", "blip", "n-3", [blip(20, 90, 1), flat(1)]),
    "busy-workers-0-0-ddddd": ("research", "busy-workers-0", "busy", "n-3", [flat(90)]),
    "light-workers-0-0-eeeee": ("research", "light-workers-0", "light", "n-4", [flat(7)]),
    "exempt-job-workers-0-0-fffff": ("research", "exempt-job-workers-0", "exempt-job", "n-4", [flat(0)]),
    "notebook": ("research", None, None, "n-5", [flat(0)]),
    "ev-0-ggggg": ("eval", "ev", None, "n-6", [flat(7)] * 4),
    "ops-job-workers-0-0-hhhhh": ("ops", "ops-job-workers-0", "ops-job", "n-7", [flat(0)]),
}
EXEMPT = {("research", "exempt-job")}


def series() -> Iterator[tuple[str, dict[str, str], list[float]]]:
    """(metric, labels, value per minute) for every series, in cost_data.series()'s shape."""
    jobs: dict[tuple[str, str], str | None] = {}
    gpu_of_node: dict[str, int] = {}
    for pod, (ns, job, jobset, node, gpus) in PODS.items():
        kind, name = ("Job", job) if job else (NONE, NONE)
        owner = {"owner_kind": kind, "owner_name": name, "owner_is_controller": "true" if job else NONE}
        yield "kube_pod_owner", {**KSM, "namespace": ns, "pod": pod, "uid": f"uid-{pod}", **owner}, flat(1)
        if job:
            jobs[(ns, job)] = jobset
        for util in gpus:
            gpu = gpu_of_node.get(node, 0)
            gpu_of_node[node] = gpu + 1
            labels = {
                **DCGM,
                "instance": f"10.0.2.{node[2:]}:9400",
                "node": node,
                "Hostname": node,
                "gpu": str(gpu),
                "UUID": f"GPU-{node}-{gpu}",
                "device": f"nvidia{gpu}",
                "pod": pod,
                "namespace": ns,
                "container": "trainer",
            }
            yield "DCGM_FI_DEV_GPU_UTIL", labels, util
    for (ns, job), jobset in jobs.items():
        kind, name = ("JobSet", jobset) if jobset else (NONE, NONE)
        owner = {"owner_kind": kind, "owner_name": name, "owner_is_controller": "true" if jobset else NONE}
        yield "kube_job_owner", {**KSM, "namespace": ns, "job_name": job, **owner}, flat(1)
    # A GPU no pod holds: dcgm-exporter leaves pod/namespace/container empty (dropped: absent).
    yield "DCGM_FI_DEV_GPU_UTIL", {**DCGM, "instance": "10.0.2.9:9400", "node": "n-9", "gpu": "0"}, flat(0)
    for ns, job in EXEMPT:
        yield "trainplane_job_idle_exempt", {**CONTROLLER, "namespace": ns, "job": job}, flat(1)


def idle_from(job: tuple[str, str]) -> int | None:
    """The minute a job's mean utilisation went (and stayed) below its team's threshold, by hand."""
    return {("research", "idle-gpt"): 0, ("research", "blip"): 21, ("eval", "ev"): 0}.get(job)


# The minute each alert first fires: idle from + the team's window (a 1m rule group: pending at the first
# evaluation below, firing `for` later).
FIRES = {("research", "idle-gpt"): 30, ("research", "blip"): 51, ("eval", "ev"): 60}
