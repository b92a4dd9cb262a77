"""The GPU health controller's reconcile of one node, without kopf: the config, the Prometheus reads (XIDs,
firing straggler alerts, cached per round), the hang exits seen, and the requests that carry out
node_recovery.py's plan (the guarded node patch, the condition through nodes/status, Events, evictions).
gpu_health_operator.py feeds it from kopf's indexes and events.

The requests go through kube.Kube (the `kubernetes` client); Prometheus is read with a plain HTTP GET.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from kubernetes.client import ApiException

from contract.recovery import CONTROLLER_NAME, EVENT_EVICTED
from controllers import node_recovery, node_return, quarantine, suspects
from controllers.agent_runtime import JSON_PATCH, log
from controllers.gpu_health_agent import (
    Diag,
    Policy,
    Verdict,
    assess,
    diag_by_node,
    faults_by_node,
    pool_of,
    xids_by_node,
)

STRATEGIC_MERGE = "application/strategic-merge-patch+json"


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def query_prometheus(url: str, query: str) -> list[dict]:
    full = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(full, timeout=15) as resp:
        body = json.loads(resp.read())
    if body.get("status") != "success":
        raise RuntimeError(f"prometheus: {body.get('error', body)}")
    return body["data"]["result"]


class Controller:
    """The config, the API client and the per-node reconcile; one per operator process."""

    def __init__(self, config: dict, api: Any, clock: Any = time.time) -> None:
        self.config, self.api, self.clock = config, api, clock
        self.policy = Policy(
            diagnostic=bool(config["diagnostic"]["enabled"]),
            startup_grace_s=float(config["startupGraceSeconds"]),
            ignored_xids=frozenset(config["ignoredXids"]),
        )
        self.interval = float(config["intervalSeconds"])
        self.evict_gpu_pods = bool(config.get("quarantine", {}).get("evictGpuPods", True))
        q = config.get("quarantine", {})
        self.return_policy = node_return.Policy(
            rediagnose=bool(q.get("rediagnose", True)),
            replace_after_minutes=float(q.get("replaceAfterMinutes", 30)),
            wait_for_gpu_pods=bool(q.get("waitForGpuPods", True)),
            retries=int(q.get("rediagnoseRetries", 3)),
            backoff_s=float(q.get("rediagnoseBackoffSeconds", 60)),
        )
        self.team_policy = node_recovery.team_policy(config)
        # The GPU node index (kopf's, set at startup): how many nodes each pool has.
        self.nodes: Any = {}
        self._cache: dict[str, tuple[float, Any]] = {}
        self._announced: set[tuple[str, str, str]] = set()
        # Every hang exit seen (a restart deletes the pods, the evidence must outlive them).
        self.hangs: set[suspects.HangExit] = set()
        self._lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}

    def in_pool(self, node: dict) -> bool:
        return pool_of(node, self.config["pools"]) is not None

    def _query(self, query: str, parse: Any) -> Any:
        """A Prometheus instant query, parsed; asked at most once per interval (every node reads it)."""
        with self._lock:
            at, value = self._cache.get(query, (float("-inf"), parse([])))
            if self.config.get("prometheusUrl") and self.clock() - at >= self.interval:
                try:
                    value = parse(query_prometheus(self.config["prometheusUrl"], query))
                except (OSError, urllib.error.URLError, RuntimeError, ValueError) as e:
                    # Without Prometheus the other signals still hold; the XID alert covers the gap.
                    log("prometheus_unavailable", query=query, error=str(e))
                self._cache[query] = (self.clock(), value)
            return value

    def xids(self) -> dict[str, list[int]]:
        """The last XID per GPU of every node."""
        return self._query(self.config["xidQuery"], xids_by_node)

    def faults(self) -> dict[str, list[str]]:
        """The DCGM fault reasons (ECC, row remap) that hold on a GPU of each node."""
        out: dict[str, list[str]] = {}
        for reason, query in sorted(self.config.get("faultQueries", {}).items()):
            for node, reasons in self._query(query, faults_by_node(reason)).items():
                out.setdefault(node, []).extend(reasons)
        return out

    def stragglers(self) -> dict[str, suspects.Suspect]:
        """The nodes the firing straggler alerts name, with their team's choice (quarantine or Event)."""
        return self._query(
            suspects.STRAGGLER_QUERY,
            lambda rows: {s.node: s for s in suspects.straggler_suspects(rows, self.team_policy)},
        )

    def saw_pod(self, pod: dict) -> None:
        """Remember a training pod's hang exits (suspects.py (b))."""
        hangs = self.config.get("hangs") or {}
        exits = suspects.hang_exits(
            pod, container=hangs.get("container", ""), job_label=hangs.get("jobLabel", "")
        )
        with self._lock:
            self.hangs.update(exits)
            horizon = self.clock() - suspects.HANG_WINDOW_S
            self.hangs = {e for e in self.hangs if e.finished_at >= horizon}

    def hang_suspect(self, node: dict) -> suspects.Suspect | None:
        name = node["metadata"]["name"]
        with self._lock:
            mine = [e for e in self.hangs if e.node == name]
        found = suspects.hang_suspects(mine, self.clock(), {name: suspects.spent_until(node)})
        return found[0] if found else None

    def pool_size(self, pool: dict) -> int:
        """How many nodes of `pool` the node index holds. It is read from a worker thread while kopf's loop
        updates it: a read that met an update is taken again."""
        for _ in range(5):
            try:
                nodes = [n for key in list(self.nodes) for n in list(self.nodes.get(key, []))]
                return sum(1 for n in nodes if self.in_pool_of(n, pool))
            except RuntimeError:  # changed size during iteration
                continue
        return 0

    def in_pool_of(self, node: dict, pool: dict) -> bool:
        return pool_of(node, self.config["pools"]) == pool

    def reconcile(self, node: dict, diag_pods: list[dict], gpu_pods: list[dict]) -> Verdict | None:
        """Assess one node and apply what its verdict asks for. None for a node outside the GPU pools.
        `gpu_pods`: the pods on it that hold GPUs (quarantine.holds_gpus), terminating ones marked so."""
        pool = pool_of(node, self.config["pools"])
        if pool is None:
            return None
        name = node["metadata"]["name"]
        with self._lock:
            lock = self._node_locks.setdefault(name, threading.Lock())
        with lock:
            diag = None
            if self.policy.diagnostic:
                diag = diag_by_node(diag_pods, self.config["diagnostic"]["container"]).get(
                    name, Diag("pending")
                )
            verdict = assess(
                node,
                expected_gpus=pool.get("expectedGpus"),
                diag=diag,
                xids=self.xids().get(name, []),
                now=self.clock(),
                policy=self.policy,
                faults=self.faults().get(name, []),
            )
            evidence = diag.detail.splitlines()[0] if diag and diag.result in ("fail", "error") else ""
            suspect = self.stragglers().get(name) or self.hang_suspect(node)
            if suspect is not None and suspect.action == "quarantine":
                verdict = Verdict((*verdict.reasons, suspect.reason))
                evidence = evidence or suspect.message
            elif suspect is not None and suspect.key not in self._announced:
                self._announced.add(suspect.key)
                self.event(node, "Node", suspect.event_reason, suspect.message, "Warning")
            ctx = node_recovery.Context(
                container=self.config["diagnostic"]["container"],
                policy=self.return_policy,
                pool=node_return.Replacement.from_config(pool),
                pool_nodes=self.pool_size(pool),
                evict_gpu_pods=self.evict_gpu_pods,
                gpu_pods=len(gpu_pods),
            )
            plan, rediagnose = node_recovery.plan(
                node,
                verdict,
                ctx,
                diag=diag,
                diag_pod=node_recovery.newest_pod(diag_pods),
                now=self.clock(),
                evidence=evidence,
            )
            if self.apply(node, plan, gpu_pods, verdict) and rediagnose:
                # node_return asked to rerun the diagnostic: its DaemonSet makes a new pod.
                self.evict(
                    {"namespace": self.config["diagnostic"]["namespace"], "name": rediagnose}, name, ""
                )
            return verdict

    def apply(self, node: dict, plan: quarantine.NodePlan, gpu_pods: list[dict], verdict: Verdict) -> bool:
        """Send the plan; False when the guarded node patch lost a race (nothing else was sent)."""
        meta = node["metadata"]
        name = urllib.parse.quote(meta["name"])
        if plan.ops:
            # Guarded by the resourceVersion: a node changed meanwhile (the node lifecycle controller adds
            # its own taints) fails the test op; its next watch event brings the fresh state.
            test = {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}
            try:
                self.api.request("PATCH", f"/api/v1/nodes/{name}", [test, *plan.ops], JSON_PATCH)
            except ApiException as e:
                log("node_patch_failed", node=meta["name"], status=e.status)
                return False
            log("node_patched", node=meta["name"], reasons=list(verdict.reasons), pending=verdict.pending)
        if plan.condition is not None:
            # Strategic merge: conditions merge by type, so the kubelet's own conditions stay untouched.
            body = {"status": {"conditions": [plan.condition]}}
            self.api.request("PATCH", f"/api/v1/nodes/{name}/status", body, STRATEGIC_MERGE)
        for event in plan.events:
            self.event(node, "Node", event.reason, event.message, event.type)
        if plan.evict:
            for pod in gpu_pods:
                if not pod.get("terminating"):  # evicted already, its grace period running
                    self.evict(pod, meta["name"], verdict.reasons[0])
        return True

    def evict(self, pod: dict, node: str, reason: str) -> None:
        """policy/v1 Eviction: honours PodDisruptionBudgets and gives the pod DisruptionTarget, which the
        job's podFailurePolicy ignores (an uncounted restart)."""
        ns, name = pod["namespace"], pod["name"]
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
        path = f"/api/v1/namespaces/{urllib.parse.quote(ns)}/pods/{urllib.parse.quote(name)}/eviction"
        try:
            self.api.request("POST", path, body)
        except ApiException as e:
            # 429: a disruption budget says not now; 404: gone already. The next round tries again.
            log("evict_failed", pod=f"{ns}/{name}", node=node, status=e.status)
            return
        log("pod_evicted", pod=f"{ns}/{name}", node=node, reason=reason)
        if reason:  # a GPU pod of a job (not the diagnostic, which node_return announces itself)
            self.event(
                pod, "Pod", EVENT_EVICTED, f"evicted from quarantined node {node} ({reason})", "Warning"
            )

    def event(
        self, obj: dict, kind: str, reason: str, message: str, type_: str, api_version: str = "v1"
    ) -> None:
        """A core/v1 Event; a cluster-scoped object's go to `default`, as client-go's recorder does
        (kubernetes/client-go tools/record/event.go makeEvent)."""
        meta = obj.get("metadata", obj)
        ns = meta.get("namespace") or "default"
        now = rfc3339(self.clock())
        involved = {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta.get("uid", "")}
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": ns},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": CONTROLLER_NAME},
            "reportingComponent": CONTROLLER_NAME,
            "reportingInstance": os.environ.get("HOSTNAME", CONTROLLER_NAME),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.api.request("POST", f"/api/v1/namespaces/{urllib.parse.quote(ns)}/events", body)
        except ApiException as e:
            log("event_failed", reason=reason, name=meta["name"], status=e.status)
