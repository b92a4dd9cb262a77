"""`verify FLEET --kubeconfig MANAGER`: the fleet's wiring on the running clusters, read-only.

The manager is read with the given kubeconfig; each worker is reached the way MultiKueue reaches it:
with the kubeconfig in the Secret its MultiKueueCluster names (kueue-system, key `kubeconfig`), so a
worker that answers proves the token and the server there work. List calls only.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infra.verify.context import Context
from infra.verify.model import Plan
from infra.verify.report import Report

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


@dataclass
class WorkerState:
    local_queues: list[dict[str, Any]] = field(default_factory=list)
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    resource_quotas: list[dict[str, Any]] = field(default_factory=list)
    # Why the worker could not be read with its Secret's kubeconfig (None: it was).
    error: str | None = None


@dataclass
class FleetState:
    """What was read: the manager's Kueue objects and kueue-system Secrets, and each MultiKueueCluster's
    worker (by the MultiKueueCluster's name)."""

    secrets: list[dict[str, Any]] = field(default_factory=list)
    local_queues: list[dict[str, Any]] = field(default_factory=list)
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)
    workers: dict[str, WorkerState] = field(default_factory=dict)

    def secret(self, name: str) -> dict[str, Any] | None:
        return next((s for s in self.secrets if (s.get("metadata") or {}).get("name") == name), None)

    def cluster(self, name: str) -> dict[str, Any] | None:
        return next((c for c in self.clusters if (c.get("metadata") or {}).get("name") == name), None)


class FleetLiveView:
    """The live view fleet checks read (infra/verify/checks/fleet_live.py)."""

    mode: Literal["offline", "live"] = "live"

    def __init__(self, ctx: Context, state: FleetState, source: str) -> None:
        self.ctx, self.state, self.source = ctx, state, source


def _kueue(api: Any, plural: str) -> list[dict[str, Any]]:
    from kubernetes import client

    return list(
        client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, plural).get("items") or []
    )


def secret_text(secret: dict[str, Any] | None) -> str | None:
    raw = ((secret or {}).get("data") or {}).get("kubeconfig")
    return base64.b64decode(raw).decode() if isinstance(raw, str) else None


def _first_line(e: Exception) -> str:
    reason = getattr(e, "reason", None)
    status = getattr(e, "status", None)
    if status:
        return f"{status} {reason}"
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


def read_worker(text: str) -> WorkerState:
    import yaml
    from kubernetes import config

    from infra.verify.checks.fleet_access import kubeconfig_problems

    problems = kubeconfig_problems(text)
    if problems:
        return WorkerState(error=f"Kueue refuses the kubeconfig: {'; '.join(problems)}")
    try:
        from kubernetes import client

        api = config.new_client_from_config_dict(yaml.safe_load(text))
        quotas = client.CoreV1Api(api).list_resource_quota_for_all_namespaces().items
        return WorkerState(
            _kueue(api, "localqueues"),
            _kueue(api, "clusterqueues"),
            [api.sanitize_for_serialization(q) for q in quotas],
        )
    except Exception as e:  # ApiException (401/403), urllib3 connection errors
        return WorkerState(error=_first_line(e))


def read_fleet(kubeconfig: str | None, context: str | None = None) -> FleetState:
    from kubernetes import client, config

    from components.incluster.names import KUEUE_NAMESPACE
    from infra.verify.live import LiveError

    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=context)
        secrets = client.CoreV1Api(api).list_namespaced_secret(KUEUE_NAMESPACE).items
        state = FleetState(
            secrets=[api.sanitize_for_serialization(s) for s in secrets],
            local_queues=_kueue(api, "localqueues"),
            cluster_queues=_kueue(api, "clusterqueues"),
            clusters=_kueue(api, "multikueueclusters"),
        )
    except Exception as e:
        raise LiveError(
            f"cannot read the fleet's manager ({kubeconfig or 'default kubeconfig'}): {_first_line(e)}"
        ) from None
    for c in state.clusters:
        name = str(c["metadata"]["name"])
        location = (
            ((c.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig", {}).get("location", "")
        )
        text = secret_text(state.secret(str(location)))
        state.workers[name] = (
            read_worker(text)
            if text
            else WorkerState(error=f"no kubeconfig in Secret {KUEUE_NAMESPACE}/{location}")
        )
    return state


def verify_fleet_state(
    plan: Plan, state: FleetState, checks: Sequence[str] | None = None, source: str = ""
) -> Report:
    from infra.verify import run_checks

    view: Any = FleetLiveView(
        Context(plan), state, source or "fleet"
    )  # the fleet live runners read its state
    return run_checks(plan, view, checks)


def verify_fleet_live(
    plan: Plan, kubeconfig: str | None = None, context: str | None = None, checks: Sequence[str] | None = None
) -> Report:
    where = f"manager kubeconfig {kubeconfig or '(default)'}" + (f", context {context}" if context else "")
    return verify_fleet_state(plan, read_fleet(kubeconfig, context), checks, where)
