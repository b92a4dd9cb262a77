"""Reading one training job from a cluster (read-only, the official `kubernetes` client, as
`verify --kubeconfig` does: infra/verify/live.py) and its trainer series from Prometheus' HTTP API.

Every failure to read is a StatusError with one line (the CLI exits 2 on it): an unknown job or namespace,
a cluster or Prometheus that cannot be reached or answers with an error.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from components.incluster.names import JOB_LABEL
from contract.recovery import EVENT_REASONS, STEPS_REDONE
from infra.status.api import JobState, related, when
from infra.status.goodput import Series

# JobSet v0.12.0 (jobset.x-k8s.io/v1alpha2; components/incluster/job_runtime.py JOBSET_API) and Kueue
# 0.19.2 (kueue.x-k8s.io/v1beta2, its storage version: config/components/crd/bases/kueue.x-k8s.io_workloads.yaml).
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"  # jobset v0.12.0 api/jobset/v1alpha2 JobSetNameKey
STEP = "trainplane_step"
# Prometheus returns at most 11,000 points per series (prometheus/web/api/v1/api.go, queryRange).
MAX_POINTS = 10_000
MIN_STEP_S = 15  # the PodMonitor's scrape interval (components/incluster/observability.py)
TIMEOUT_S = 30


FORBIDDEN = object()  # `absent`'s default: a 403 is an error


class StatusError(Exception):
    """The job, the cluster or Prometheus cannot be read: one line."""


def read_job(
    namespace: str,
    name: str,
    kind: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> JobState:
    """The job `namespace/name` (a JobSet, else an elastic job's batch/v1 Job; `kind` when known), its
    Kueue Workloads, pods, their nodes and the Events about all of them."""
    try:
        return _read(namespace, name, kind, kubeconfig, context)
    except StatusError:
        raise
    except Exception as e:  # kubernetes' ConfigException, ApiException, urllib3 connection errors
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        where = kubeconfig or "default kubeconfig"
        raise StatusError(f"cannot read the cluster ({where}): {type(e).__name__}: {first}") from None


def _read(
    namespace: str, name: str, kind: str | None, kubeconfig: str | None, context: str | None
) -> JobState:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise StatusError(f"--kubeconfig {kubeconfig}: no such file")
    api = config.new_client_from_config(config_file=kubeconfig, context=context)
    core, custom, batch = client.CoreV1Api(api), client.CustomObjectsApi(api), client.BatchV1Api(api)

    def plain(obj: Any) -> dict[str, Any]:
        return api.sanitize_for_serialization(obj)

    def absent(call: Any, *args: Any, forbidden: Any = FORBIDDEN, **kw: Any) -> Any:
        """None when not found; `forbidden` when the user may not read it (a team's Role need not
        cover namespaces, nodes or cluster-wide Events: that evidence is then left out)."""
        try:
            return call(*args, **kw)
        except ApiException as e:
            if e.status == 404:
                return None
            if e.status == 403 and forbidden is not FORBIDDEN:
                return forbidden
            raise

    if absent(core.read_namespace, namespace, forbidden=True) is None:
        raise StatusError(f"namespace {namespace!r}: no such namespace on the cluster")
    obj, found = None, kind or "JobSet"
    if kind in (None, "JobSet"):
        obj = absent(custom.get_namespaced_custom_object, *JOBSET[:2], namespace, JOBSET[2], name)
    if obj is None and kind in (None, "Job"):
        job = absent(batch.read_namespaced_job, name, namespace)
        obj, found = (plain(job), "Job") if job is not None else (None, found)
    if obj is None:
        what = kind or "JobSet or Job"
        raise StatusError(f"job {namespace}/{name}: no {what} of that name in namespace {namespace}")
    uid = obj["metadata"].get("uid")
    listed = absent(
        custom.list_namespaced_custom_object, *WORKLOADS[:2], namespace, WORKLOADS[2], forbidden=None
    )
    workloads = [
        w
        for w in (listed or {}).get("items", [])
        if any(
            o.get("kind") == found and o.get("name") == name and o.get("uid") in (None, uid)
            for o in w["metadata"].get("ownerReferences") or []
        )
    ]
    pods = [plain(p) for p in core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={name}").items]
    if not pods and found == "JobSet":  # a JobSet trainplane did not build
        selector = f"{JOBSET_NAME_LABEL}={name}"
        pods = [plain(p) for p in core.list_namespaced_pod(namespace, label_selector=selector).items]
    node_names = sorted({p["spec"]["nodeName"] for p in pods if (p.get("spec") or {}).get("nodeName")})
    nodes = {
        n: plain(node) for n in node_names if (node := absent(core.read_node, n, forbidden=None)) is not None
    }
    # Node Events are read below, only for the job's nodes and the GPU health controller's reasons.
    names = [w["metadata"]["name"] for w in workloads]
    ns_events = [plain(x) for x in core.list_namespaced_event(namespace).items]
    events = [e for e in ns_events if related(e, found, name, names) and _kind_of(e) != "Node"]
    node_events = absent(
        core.list_event_for_all_namespaces, field_selector="involvedObject.kind=Node", forbidden=None
    )
    node_events = node_events.items if node_events is not None else []
    events += [
        e
        for e in (plain(x) for x in node_events)
        if e["involvedObject"].get("name") in nodes and e.get("reason") in EVENT_REASONS
    ]
    return JobState(namespace, name, found, obj, workloads, pods, nodes, events)


def _kind_of(e: dict[str, Any]) -> str:
    return str((e.get("involvedObject") or {}).get("kind", ""))


def read_series(url: str, state: JobState, now: float | None = None) -> Series:
    """The job's step and steps-redone series from the Prometheus at `url`, from the job's creation to now."""
    end = time.time() if now is None else now
    start = when(state.object["metadata"].get("creationTimestamp")) or end - 86400
    step = max(MIN_STEP_S, math.ceil((end - start) / MAX_POINTS))
    labels = f'namespace="{state.namespace}",job="{state.name}"'
    return Series(
        steps=_range(url, f"max({STEP}{{{labels}}})", start, end, step),
        redone=_range(url, f"max({STEPS_REDONE}{{{labels}}})", start, end, step),
    )


def _range(url: str, query: str, start: float, end: float, step: int) -> list[tuple[float, float]]:
    params = urllib.parse.urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step}
    )
    target = f"{url.rstrip('/')}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(target, timeout=TIMEOUT_S) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as e:
        raise StatusError(f"Prometheus at {url}: HTTP {e.code}: {_error_of(e)}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise StatusError(f"cannot reach Prometheus at {url}: {reason}") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        raise StatusError(f"Prometheus at {url}: {(body or {}).get('error', 'not a Prometheus answer')}")
    result = body["data"].get("result") or []
    return [(float(t), float(v)) for t, v in (result[0].get("values") or [])] if result else []


def _error_of(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(e.read()).get("error") or e.reason)
    except (ValueError, AttributeError):
        return str(e.reason)
