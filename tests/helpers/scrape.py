"""What Prometheus stores for a scraped sample: target relabeling, then honor_labels (a model).

The alert-rule tests (test_alert_rules.py) feed promtool series whose labels come from `scrape()` applied
to what the exporters expose; test_dcgm_scrape.py checks `scrape()` against a real Prometheus scraping
the same exposition with the same configuration, so the rule tests use the labels a cluster stores.

Target labels are those prometheus-operator v0.93 gives a ServiceMonitor / PodMonitor endpoint before the
monitor's own relabelings (pkg/prometheus/promcfg.go: namespace, service, pod, container, job, endpoint).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from components.incluster.gpu_operator import DCGM_RELABELINGS, dcgm_exporter_values
from components.incluster.observability import trainer_pod_monitor

# ---- what the exporters expose -----------------------------------------------------------------

NODE = "gpu-node-a"
# dcgm-exporter's per-GPU labels (internal/pkg/rendermetrics/render_metrics.go at 4.5.3-4.8.2; main renames
# Hostname to hostname, which no rule reads) plus the label-type field DCGM_FI_DRIVER_VERSION.
GPU_LABELS = {
    "gpu": "0",
    "UUID": "GPU-3f2a9c1e-0000-4000-8000-000000000000",
    "pci_bus_id": "00000000:53:00.0",
    "device": "nvidia0",
    "modelName": "NVIDIA H100 80GB HBM3",
    "Hostname": NODE,
    "DCGM_FI_DRIVER_VERSION": "570.172.08",
}
# Set by dcgm-exporter's Kubernetes mapping while a pod holds the GPU (transformation/kubernetes.go).
WORKLOAD = {"pod": "gpt-small-0-x2v9q", "namespace": "research", "container": "trainer"}


def gpu(index: int, allocated: bool = False, node: str = NODE) -> dict[str, str]:
    labels = {**GPU_LABELS, "gpu": str(index), "device": f"nvidia{index}", "Hostname": node}
    labels["UUID"] = labels["UUID"][:-2] + f"{index:02d}"
    return {**labels, **(WORKLOAD if allocated else {})}


# ---- the targets prometheus-operator builds ----------------------------------------------------


def dcgm_target(node: str = NODE, address: str = "10.0.1.17:9400") -> dict[str, str]:
    return {
        "__address__": address,
        "__meta_kubernetes_pod_node_name": node,
        "namespace": "gpu-operator",
        "service": "nvidia-dcgm-exporter",
        "pod": f"nvidia-dcgm-exporter-{node[-1]}x7k2",
        "container": "nvidia-dcgm-exporter",
        # jobLabel: app on the operator's ServiceMonitor asset.
        "job": "nvidia-dcgm-exporter",
        "endpoint": "gpu-metrics",
    }


def trainer_node(index: int) -> str:
    """The node a training pod of completion index `index` runs on in these tests: gpu-node-a, -b, ..."""
    return f"gpu-node-{chr(ord('a') + index)}"


def trainer_target(job: str, index: int, address: str = "10.0.2.30:9090") -> dict[str, str]:
    return {
        "__address__": address,
        "__meta_kubernetes_pod_node_name": trainer_node(index),
        # A JobSet pod: its child Job's name in job-name, trainplane's job label, the completion index.
        "__meta_kubernetes_pod_label_batch_kubernetes_io_job_name": f"{job}-workers-0",
        "__meta_kubernetes_pod_label_trainplane_dev_job": job,
        "__meta_kubernetes_pod_label_batch_kubernetes_io_job_completion_index": str(index),
        "namespace": "research",
        "pod": f"{job}-workers-0-{index}-abcde",
        "container": "trainer",
        "job": f"research/{job}",
        "endpoint": "metrics",
    }


def dcgm_config() -> tuple[list[dict], bool]:
    monitor = dcgm_exporter_values()["serviceMonitor"]
    return monitor["relabelings"], monitor["honorLabels"]


def trainer_config(job: str = "gpt-small") -> tuple[list[dict], bool]:
    (endpoint,) = trainer_pod_monitor(job)["podMetricsEndpoints"]
    return endpoint["relabelings"], bool(endpoint.get("honorLabels", False))


# ---- relabeling and honor_labels ---------------------------------------------------------------


def relabel(labels: Mapping[str, str], configs: Iterable[Mapping]) -> dict[str, str]:
    """Prometheus relabel_config semantics for the actions the platform uses (replace, labeldrop)."""
    out = dict(labels)
    for cfg in configs:
        action = cfg.get("action", "replace").lower()
        regex = re.compile(f"^(?:{cfg.get('regex', '(.*)')})$")
        if action == "labeldrop":
            out = {k: v for k, v in out.items() if not regex.match(k)}
        elif action == "replace":
            value = cfg.get("separator", ";").join(out.get(s, "") for s in cfg.get("sourceLabels", []))
            m = regex.match(value)
            if not m:
                continue
            result = re.sub(
                r"\$\{?(\w+)\}?",
                lambda ref, m=m: m.group(int(ref[1]) if ref[1].isdigit() else ref[1]) or "",
                cfg.get("replacement", "$1"),
            )
            if result:
                out[cfg["targetLabel"]] = result
            else:
                out.pop(cfg["targetLabel"], None)
        else:
            raise NotImplementedError(action)
    return out


def target_labels(target: Mapping[str, str], relabelings: Iterable[Mapping]) -> dict[str, str]:
    labels = relabel(target, relabelings)
    labels.setdefault("instance", labels["__address__"])
    return {k: v for k, v in labels.items() if not k.startswith("__") and v}


def scrape(
    sample: Mapping[str, str], target: Mapping[str, str], relabelings: Iterable[Mapping], honor_labels: bool
) -> dict[str, str]:
    """Labels Prometheus stores for one exposed sample of one target."""
    tlabels = target_labels(target, relabelings)
    out = {k: v for k, v in sample.items() if v}
    for name, value in tlabels.items():
        if name not in out:
            out[name] = value
        elif not honor_labels:
            exported = "exported_" + name
            while exported in out:
                exported = "exported_" + exported
            out[exported] = out[name]
            out[name] = value
    return out


def dcgm_series(sample: Mapping[str, str], target: Mapping[str, str] | None = None) -> dict[str, str]:
    relabelings, honor = dcgm_config()
    return scrape(sample, target or dcgm_target(sample.get("Hostname", NODE)), relabelings, honor)


def trainer_series(sample: Mapping[str, str], job: str = "gpt-small", index: int = 0) -> dict[str, str]:
    relabelings, honor = trainer_config(job)
    return scrape(sample, trainer_target(job, index), relabelings, honor)


def selector(name: str, labels: Mapping[str, str]) -> str:
    """A PromQL / promtool series selector."""
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


__all__ = ["DCGM_RELABELINGS", "dcgm_series", "gpu", "scrape", "selector", "trainer_node", "trainer_series"]
