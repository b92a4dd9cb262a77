"""The GPU health controller's idle round (idle_reclaim.py decides, this lists and sends) and its exemption
export: IDLE_EXEMPT_METRIC{namespace, job} = 1 per exempt job, on the controller's metrics port, scraped by the
controller's PodMonitor (honorLabels, so `namespace` and `job` stay the job's, not the controller's).

The jobs, Workloads and pods are listed per team namespace with an idle policy each round through our own
client, not watched through kopf indexes: kopf with `settings.scanning.disabled` resolves the resources to
watch once, at startup (kopf 1.45.2 _core/reactor/observation.py resource_observer), and the JobSet and Kueue
CRDs come from other releases, without an order to the controller's Deployment: an index created before them
would never be served until a restart. A list of a kind whose CRD is missing (404) counts as empty.
Standard library, and prometheus_client for the export (images/controller/requirements.txt).
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

from kubernetes.client import ApiException

from contract.idle import IDLE_EXEMPT_METRIC
from controllers import idle_reclaim as R
from controllers.agent_runtime import JSON_PATCH, log

# Each kind's namespaced list path and kind.
KINDS = (
    (f"/apis/{R.JOBSET_API}/namespaces/{{ns}}/jobsets", R.JOBSET_API, "JobSet"),
    ("/apis/batch/v1/namespaces/{ns}/jobs", "batch/v1", "Job"),
)
WORKLOADS = f"/apis/{R.WORKLOAD_API}/namespaces/{{ns}}/workloads"
# The hold's queues (idle_hold.py): LocalQueues per namespace, ClusterQueues cluster-scoped.
LOCAL_QUEUES = f"/apis/{R.WORKLOAD_API}/namespaces/{{ns}}/localqueues"
CLUSTER_QUEUES = f"/apis/{R.WORKLOAD_API}/clusterqueues"
PLURALS = {"Workload": "workloads", "JobSet": "jobsets", "Job": "jobs"}


class ExemptGauge:
    """IDLE_EXEMPT_METRIC, served by prometheus_client on `port` (0: not served, the tests read `current`)."""

    def __init__(self, port: int) -> None:
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        self.registry = CollectorRegistry()
        self.gauge = Gauge(
            IDLE_EXEMPT_METRIC,
            "1 for each training job exempt from idle reclaim (idle-exempt label or its team's exemptLabels)",
            ["namespace", "job"],
            registry=self.registry,
        )
        self.current: set[tuple[str, str]] = set()
        if port:
            start_http_server(port, registry=self.registry)

    def set(self, exempt: list[tuple[str, str]]) -> None:
        new = set(exempt)
        for ns, job in self.current - new:
            self.gauge.remove(ns, job)
        for ns, job in new:
            self.gauge.labels(ns, job).set(1)
        self.current = new


class IdleRound:
    """One per operator process; `run()` every controller interval."""

    def __init__(self, config: dict, api: Any, query: Any, event: Any, clock: Any = time.time) -> None:
        self.policies = R.TeamPolicy.from_config(config)
        self.api, self.query, self.event, self.clock = api, query, event, clock
        self.announced: set[tuple[str, str]] = set()
        self.held: set[tuple[str, str]] = set()
        port = int((config.get("idle") or {}).get("metricsPort") or 0)
        self.gauge = ExemptGauge(port) if self.policies else None

    def _list(self, path: str, ns: str, api_version: str = "", kind: str = "") -> list[dict]:
        try:
            body = self.api.request("GET", path.format(ns=urllib.parse.quote(ns)))
        except ApiException as e:
            if e.status == 404:  # the CRD is not installed (no Kueue): none of them
                return []
            raise
        items = body.get("items") or []
        for item in items:  # a list's items carry neither (the List has them)
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def _queues(self, workloads: list[dict]) -> R.Queues | None:
        """The queues, listed only while a Workload of ours waits to be reactivated; None when a list fails
        (the held stay held this round, the next round lists again)."""
        namespaces = sorted({w["metadata"]["namespace"] for w in workloads if R.ours(w) and not R.active(w)})
        if not namespaces:
            return R.Queues()
        try:
            local = [q for ns in namespaces for q in self._list(LOCAL_QUEUES, ns)]
            return R.Queues(tuple(local), tuple(self._list(CLUSTER_QUEUES, "")))
        except Exception as e:  # an API error or timeout: not known whether anyone waits
            log("kueue_queues_unavailable", error=repr(e))
            return None

    def run(self) -> None:
        if not self.policies:
            return
        jobs: list[dict] = []
        workloads: list[dict] = []
        pods: list[dict] = []
        for ns in sorted(self.policies):
            for path, api_version, kind in KINDS:
                jobs += self._list(path, ns, api_version, kind)
            workloads += self._list(WORKLOADS, ns, R.WORKLOAD_API, "Workload")
            pods += self._list("/api/v1/namespaces/{ns}/pods", ns, "v1", "Pod")
        assert self.gauge is not None
        self.gauge.set(R.exempt_jobs(jobs, self.policies))
        try:
            alerts = self.query(R.IDLE_QUERY)
        except Exception as e:  # without Prometheus no episode starts or ends; reactivation still runs
            log("prometheus_unavailable", query=R.IDLE_QUERY, error=repr(e))
            alerts = None
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock()))
        if alerts is None:  # keep the episodes as they are: fake the same alerts from what was announced
            alerts = [
                {"metric": {"alertname": R.IDLE_ALERT, "namespace": n, "job": j}} for n, j in self.announced
            ]
        queues = self._queues(workloads)
        previous = R.Decision([], self.announced, self.held)
        decision = R.decide(alerts, jobs, workloads, pods, self.policies, previous, now, queues=queues)
        self.announced, self.held = decision.announced, decision.held
        self.apply(decision.actions)

    def apply(self, actions: list[R.Action]) -> None:
        failed: set[tuple[str, str]] = set()  # groups whose Workload patch failed: the rest is dropped
        for a in actions:
            t = a.target
            if a.group in failed:
                continue
            if not a.patch:
                self.event(t, a.reason, a.message)
                continue
            path = (
                f"/apis/{t['apiVersion']}/namespaces/{urllib.parse.quote(t['namespace'])}/"
                f"{PLURALS[t['kind']]}/{urllib.parse.quote(t['name'])}"
            )
            try:
                self.api.request("PATCH", path, list(a.patch), JSON_PATCH)
                log("workload_patched", workload=f"{t['namespace']}/{t['name']}", group="/".join(a.group))
            except ApiException as e:
                # 422 (the test op: it changed meanwhile) or 404: decided again next round.
                log("workload_patch_failed", workload=f"{t['namespace']}/{t['name']}", status=e.status)
                failed.add(a.group)
                self.announced.discard(a.group)
