"""GPU node health controller: taints GPU nodes whose GPUs are unhealthy so no job lands there.

This file is shipped as is (a ConfigMap) into the controller pod and runs on a stock Python image, so it
uses the standard library only. The decision is one pure function, `assess()`, unit-tested on node
objects; the loop around it reads nodes, the diagnostic pods and Prometheus, and patches taints.

Signals, all produced by components that already watch the GPUs (this controller only acts on them):
- the NVIDIA device plugin marks a GPU unhealthy on a critical XID and the kubelet lowers the node's
  allocatable `nvidia.com/gpu` below its capacity ("gpus-unhealthy");
- fewer GPUs in the node's capacity than its pool's machine type has, or none at all once the startup
  grace has passed ("gpus-missing");
- EKS's node monitoring agent sets the condition AcceleratedHardwareReady=False on GPU faults
  (XIDs, DCGM health, device count) ("accelerated-hardware");
- the diagnostic DaemonSet runs `dcgmi diag` once when a node starts and reports through its init
  container's termination message ("diag-failed", "diag-error"); until it has, the node carries the
  pending taint;
- DCGM's last XID per GPU (DCGM_FI_DEV_XID_ERRORS, through Prometheus) when it is not an application
  XID ("xid-<n>").

Taint keys use the cluster-autoscaler's prefixes (cluster-autoscaler FAQ, "How does Cluster Autoscaler
treat nodes with status/startup/ignore taints?"): a node with the startup taint counts as not ready yet,
a node with the status taint as ready but unusable, so the autoscaler adds capacity for waiting jobs.
Jobs never tolerate either key; the GPU operator's DaemonSets and the diagnostic do.

Usage: python gpu_health_agent.py --config /etc/gpu-health/config.json [--once]
"""

from __future__ import annotations

import calendar
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

try:
    from components.incluster.agent_runtime import JSON_PATCH, KubeApi, log, quantity, run
except ImportError:  # in the controller pod: shipped next to this file
    from agent_runtime import JSON_PATCH, KubeApi, log, quantity, run  # type: ignore[import-not-found,no-redef]

UNHEALTHY_TAINT = "status-taint.cluster-autoscaler.kubernetes.io/gpu-unhealthy"
PENDING_TAINT = "startup-taint.cluster-autoscaler.kubernetes.io/gpu-diagnostic"
OUR_TAINTS = (UNHEALTHY_TAINT, PENDING_TAINT)
GPU_RESOURCE = "nvidia.com/gpu"
# Set by the EKS node monitoring agent (EKS node health docs, AcceleratedHardware issues).
EKS_GPU_CONDITION = "AcceleratedHardwareReady"
# The diagnostic's init container ends with one line `result=<pass|fail|error|skipped> rc=<n>` first in its
# termination message (see diag_script() in gpu_health.py).
DIAG_LINE = re.compile(r"result=(pass|fail|error|skipped)\b(?:\s+rc=(-?\d+))?")


@dataclass(frozen=True)
class Diag:
    """What the node-start diagnostic says about one node: pending until its init container ended."""

    result: str  # pending | pass | fail | error | skipped
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    reasons: tuple[str, ...] = ()
    pending: bool = False

    def taints(self) -> list[dict[str, str]]:
        """The taints of ours the node must carry (NoSchedule: running pods stay, new ones do not land)."""
        if self.reasons:
            return [{"key": UNHEALTHY_TAINT, "value": taint_value(self.reasons[0]), "effect": "NoSchedule"}]
        if self.pending:
            return [{"key": PENDING_TAINT, "value": "pending", "effect": "NoSchedule"}]
        return []


@dataclass(frozen=True)
class Policy:
    diagnostic: bool = True
    startup_grace_s: float = 1200.0
    ignored_xids: frozenset[int] = field(default_factory=frozenset)


def taint_value(reason: str) -> str:
    """A taint value is a label value: at most 63 of [A-Za-z0-9_.-], starting and ending alphanumeric."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "-", reason)[:63].strip("-_.")
    return value or "unhealthy"


def _age_s(node: dict, now: float) -> float:
    created = node.get("metadata", {}).get("creationTimestamp")
    if not created:
        return float("inf")
    return now - calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ"))


def assess(
    node: dict,
    *,
    expected_gpus: int | None,
    diag: Diag | None,
    xids: list[int],
    now: float,
    policy: Policy,
) -> Verdict:
    """Which GPU faults a node shows, and whether its node-start diagnostic is still outstanding.

    `expected_gpus` is what the pool's machine type has (None when it cannot be known, e.g. with MIG),
    `diag` is None when the diagnostic is off, `xids` the last XID of each of the node's GPUs.
    """
    status = node.get("status", {})
    capacity = quantity(status.get("capacity", {}).get(GPU_RESOURCE))
    allocatable = quantity(status.get("allocatable", {}).get(GPU_RESOURCE))
    reasons: list[str] = []
    for cond in status.get("conditions", []):
        if cond.get("type") == EKS_GPU_CONDITION and cond.get("status") == "False":
            reasons.append("accelerated-hardware")
    if diag is not None and diag.result in ("fail", "error"):
        reasons.append(f"diag-{'failed' if diag.result == 'fail' else 'error'}")
    for xid in sorted(set(xids)):
        if xid > 0 and xid not in policy.ignored_xids:
            reasons.append(f"xid-{xid}")
    if capacity is not None and allocatable is not None and allocatable < capacity:
        reasons.append("gpus-unhealthy")
    started = _age_s(node, now) >= policy.startup_grace_s
    if expected_gpus and (capacity or 0) < expected_gpus and (capacity or started):
        # A node that advertises some GPUs but too few is broken at once; one with none may still be
        # starting its driver and device plugin.
        reasons.append("gpus-missing")
    pending = policy.diagnostic and (diag is None or diag.result == "pending")
    return Verdict(tuple(reasons), pending=pending and not reasons)


def desired_taints(node: dict, verdict: Verdict) -> list[dict[str, Any]]:
    """The node's taints with ours replaced by what the verdict asks for; others stay as they are."""
    current = node.get("spec", {}).get("taints") or []
    kept = [t for t in current if t.get("key") not in OUR_TAINTS]
    ours = {(t["key"], t["effect"]): t for t in current if t.get("key") in OUR_TAINTS}
    wanted = []
    for t in verdict.taints():
        old = ours.get((t["key"], t["effect"]))
        # Keep the first timeAdded (and value) of a taint that stays, so the alert's age is honest.
        wanted.append(old if old is not None and old.get("value") == t["value"] else t)
    return kept + wanted


def _canonical(taints: list[dict]) -> list[str]:
    return sorted(json.dumps(t, sort_keys=True) for t in taints)


def diag_of(pod: dict, container: str) -> Diag:
    """Read the diagnostic's verdict from its init container's termination message."""
    for status in pod.get("status", {}).get("initContainerStatuses") or []:
        if status.get("name") != container:
            continue
        term = status.get("state", {}).get("terminated") or status.get("lastState", {}).get("terminated")
        if not term:
            return Diag("pending")
        message = term.get("message") or ""
        match = DIAG_LINE.search(message)
        if match:
            return Diag(match.group(1), message.strip()[:500])
        return Diag("error", f"exit code {term.get('exitCode')}, no result line")
    return Diag("pending")


def diag_by_node(pods: list[dict], container: str) -> dict[str, Diag]:
    """The newest diagnostic pod's verdict per node (a rollout may briefly leave two)."""
    newest: dict[str, dict] = {}
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName")
        if not node or pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        created = pod.get("metadata", {}).get("creationTimestamp", "")
        if node not in newest or created > newest[node].get("metadata", {}).get("creationTimestamp", ""):
            newest[node] = pod
    return {node: diag_of(pod, container) for node, pod in newest.items()}


def xids_by_node(result: list[dict]) -> dict[str, list[int]]:
    """Prometheus instant-query samples of the last XID per (node, gpu) -> XIDs per node."""
    out: dict[str, list[int]] = {}
    for sample in result:
        node = sample.get("metric", {}).get("node")
        try:
            value = int(float(sample["value"][1]))
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if node:
            out.setdefault(node, []).append(value)
    return out


def pool_of(node: dict, pools: list[dict]) -> dict | None:
    labels = node.get("metadata", {}).get("labels") or {}
    for pool in pools:
        if all(labels.get(k) == v for k, v in pool["matchLabels"].items()):
            return pool
    return None


# ---- I/O: the Kubernetes API and Prometheus over HTTP ------------------------------------------


class Api(KubeApi):
    """The few Kubernetes API calls the controller makes."""

    def nodes(self) -> list[dict]:
        return self.request("GET", "/api/v1/nodes").get("items", [])

    def pods(self, namespace: str, selector: str) -> list[dict]:
        query = urllib.parse.urlencode({"labelSelector": selector})
        return self.request("GET", f"/api/v1/namespaces/{namespace}/pods?{query}").get("items", [])

    def set_taints(self, node: dict, taints: list[dict]) -> None:
        # JSON patch guarded by the resourceVersion: a node changed meanwhile (the node lifecycle
        # controller adds its own taints) fails the test op, and the next round starts from fresh state.
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
            {"op": "add", "path": "/spec/taints", "value": taints},
        ]
        name = urllib.parse.quote(node["metadata"]["name"])
        self.request("PATCH", f"/api/v1/nodes/{name}", patch, JSON_PATCH)


def query_prometheus(url: str, query: str) -> list[dict]:
    full = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(full, timeout=15) as resp:
        body = json.loads(resp.read())
    if body.get("status") != "success":
        raise RuntimeError(f"prometheus: {body.get('error', body)}")
    return body["data"]["result"]


def reconcile(api: Api, config: dict, now: float | None = None) -> dict[str, Verdict]:
    """One round: assess every node of a GPU pool and patch the taints that differ. Returns verdicts."""
    now = time.time() if now is None else now
    policy = Policy(
        diagnostic=bool(config["diagnostic"]["enabled"]),
        startup_grace_s=float(config["startupGraceSeconds"]),
        ignored_xids=frozenset(config["ignoredXids"]),
    )
    diags: dict[str, Diag] = {}
    if policy.diagnostic:
        d = config["diagnostic"]
        diags = diag_by_node(api.pods(d["namespace"], d["podSelector"]), d["container"])
    xids: dict[str, list[int]] = {}
    if config.get("prometheusUrl"):
        try:
            xids = xids_by_node(query_prometheus(config["prometheusUrl"], config["xidQuery"]))
        except (OSError, urllib.error.URLError, RuntimeError, ValueError) as e:
            # Without Prometheus the other signals still hold; the XID alert covers the gap.
            log("prometheus_unavailable", error=str(e))
    verdicts: dict[str, Verdict] = {}
    for node in api.nodes():
        pool = pool_of(node, config["pools"])
        if pool is None:
            continue
        name = node["metadata"]["name"]
        verdict = assess(
            node,
            expected_gpus=pool.get("expectedGpus"),
            diag=diags.get(name, Diag("pending")) if policy.diagnostic else None,
            xids=xids.get(name, []),
            now=now,
            policy=policy,
        )
        verdicts[name] = verdict
        current = node.get("spec", {}).get("taints") or []
        wanted = desired_taints(node, verdict)
        if _canonical(wanted) != _canonical(current):
            try:
                api.set_taints(node, wanted)
                log(
                    "taints_set",
                    node=name,
                    pool=pool["name"],
                    reasons=list(verdict.reasons),
                    pending=verdict.pending,
                )
            except urllib.error.HTTPError as e:
                log("taint_patch_failed", node=name, status=e.code)
    return verdicts


def main(argv: list[str] | None = None) -> int:
    return run("gpu-health", (__doc__ or "").splitlines()[0], argv, Api, reconcile)


if __name__ == "__main__":
    sys.exit(main())
