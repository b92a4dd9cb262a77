"""GPU node health: the decision. Which faults a GPU node shows, and whether its diagnostic is outstanding.

The kopf operator (gpu_health_operator.py) calls it; it uses the standard library and the contract only
(the names it shares with the library are contract/recovery.py's). The decision is one pure function,
`assess()`, unit-tested on node objects; quarantine.py turns its verdict into the node's taints, cordon,
condition, Events and evictions.

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
- a recent XID on a GPU (contract.recovery.XID_QUERY, through Prometheus) when it is not an application
  XID ("xid-<n>"); the signal clears once no new XID came for a few minutes (DCGM's last-XID gauge never
  does: see there);
- DCGM's memory-health fields, through Prometheus (gpu_health.FAULT_QUERIES): uncorrectable ECC errors since
  the driver loaded ("ecc-uncorrectable") and a failed row remap ("row-remap-failed"). Each also raises an
  XID (48; 64) that DCGM's last-XID field may already have overwritten with a later one, and the fields stay
  set until the GPU is reset, so the node stays out until a reset and a passing diagnostic.

Taint keys use the cluster-autoscaler's prefixes (cluster-autoscaler FAQ, "How does Cluster Autoscaler
treat nodes with status/startup/ignore taints?"): a node with the startup taint counts as not ready yet,
a node with the status taint as ready but unusable, so the autoscaler adds capacity for waiting jobs.
Jobs never tolerate either key; the GPU operator's DaemonSets and the diagnostic do.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contract.recovery import DIAGNOSTIC_TAINT, HEALTH_TAINTS, QUARANTINE_TAINT
from controllers.agent_runtime import quantity

UNHEALTHY_TAINT = QUARANTINE_TAINT
PENDING_TAINT = DIAGNOSTIC_TAINT
OUR_TAINTS = HEALTH_TAINTS
GPU_RESOURCE = "nvidia.com/gpu"
# Set by the EKS node monitoring agent (EKS node health docs, AcceleratedHardware issues).
EKS_GPU_CONDITION = "AcceleratedHardwareReady"
# The diagnostic's init container ends with one line `result=<pass|fail|error|skipped> rc=<n>` first in its
# termination message (see gpu_diag_script.diag_script()).
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
    faults: Sequence[str] = (),
) -> Verdict:
    """Which GPU faults a node shows, and whether its node-start diagnostic is still outstanding.

    `expected_gpus` is what the pool's machine type has (None when it cannot be known, e.g. with MIG),
    `diag` is None when the diagnostic is off, `xids` the last XID of each of the node's GPUs, `faults`
    the reasons of the DCGM fault queries that hold for one of its GPUs (faults_by_node).
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
    reasons.extend(r for r in sorted(set(faults)) if r not in reasons)
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
    """XID_QUERY's samples -> the recent XIDs per node: a row's `xid` label (a count of recent events) or,
    without one, its value (the XID itself).

    >>> xids_by_node([{"metric": {"node": "n1", "gpu": "0", "xid": "79"}, "value": [0, "2"]},
    ...               {"metric": {"node": "n2", "gpu": "3"}, "value": [0, "48"]}])
    {'n1': [79], 'n2': [48]}
    """
    out: dict[str, list[int]] = {}
    for sample in result:
        metric = sample.get("metric", {})
        node = metric.get("node")
        try:
            value = int(metric["xid"]) if "xid" in metric else int(float(sample["value"][1]))
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if node:
            out.setdefault(node, []).append(value)
    return out


def faults_by_node(reason: str) -> Any:
    """A parser of one DCGM fault query's samples (value > 0 on a GPU: the fault holds) -> node -> [reason].

    >>> faults_by_node("row-remap-failed")([{"metric": {"node": "n1"}, "value": [0, "1"]},
    ...                                     {"metric": {"node": "n2"}, "value": [0, "0"]}])
    {'n1': ['row-remap-failed']}
    """

    def parse(result: list[dict]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for sample in result:
            node = sample.get("metric", {}).get("node")
            try:
                value = float(sample["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if node and value > 0:
                out[node] = [reason]
        return out

    return parse


def pool_of(node: dict, pools: list[dict]) -> dict | None:
    labels = node.get("metadata", {}).get("labels") or {}
    for pool in pools:
        if all(labels.get(k) == v for k, v in pool["matchLabels"].items()):
            return pool
    return None
