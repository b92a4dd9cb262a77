"""The GPU health controller as a kopf operator (kopf 1.45.2): watches the GPU nodes, the diagnostic pods and
the GPU pods, asks `assess()` (gpu_health_agent.py) for each node's verdict, adds the straggler suspects
(suspects.py, from Prometheus' firing ALERTS), and applies node_recovery.py's plan: quarantine.py's taints,
cordon, node condition, Events and eviction of GPU pods for a new fault; node_return.py's decision for a
quarantined node (re-diagnose, hold, hand to replacement, or return after a diagnostic that passed since).

Run: `trainplane-controller gpu-health` (controllers/__main__.py: kopf.run, standalone, all namespaces,
the liveness endpoint), with GPU_HEALTH_CONFIG naming the config file (gpu_health.controller_config).

How kopf is used, so that it needs no permission beyond the controller's own (contract.recovery.
CONTROLLER_PERMISSIONS), and writes nothing of its own on the nodes:
- only indexes and `on.event` handlers: neither needs a finalizer nor stores progress or a diff-base
  (kopf 1.45.2 kopf/on.py: timers and daemons set requires_finalizer=True, so a Node would keep kopf's
  finalizer while the operator is down; index and event handlers do not);
- standalone (no KopfPeering CRD: one replica, Recreate strategy), `settings.scanning.disabled` (no
  watch of CRDs and namespaces: nodes and pods are built in; kopf _core/reactor/observation.py),
  `--all-namespaces` (pods of every namespace without listing namespaces), `settings.posting.enabled`
  off (our Events are posted by us, with the contract's reasons and CONTROLLER_NAME as their source);
- the periodic round (XIDs from Prometheus change without any node event) is a task started by the
  startup handler over the node index, cancelled by the cleanup handler; each round also runs idle reclaim
  (idle_round.py: it lists the team namespaces' jobs and Workloads itself, see there why not through kopf
  indexes; its permissions are idle_reclaim.IDLE_PERMISSIONS);
- pods: an index of the diagnostic pods, one of the pods holding GPUs per node (to evict; and the
  re-diagnosis waits until none is left, terminating ones included), and an event handler
  that remembers trainer hang exits (suspects.py (b)), all from one watch of pods.
The Kubernetes calls of our own (patches, evictions, Events) go through kube.Kube (the `kubernetes` client) in kopf's
thread pool: the handlers are synchronous.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import kopf

from contract.recovery import CONFIG_ENV
from controllers import idle_reclaim, quarantine, suspects
from controllers.agent_runtime import log
from controllers.idle_round import IdleRound
from controllers.kube import Kube
from controllers.node_reconcile import Controller, query_prometheus

# ---- kopf wiring --------------------------------------------------------------------------------

CONTROLLER: Controller | None = None


def _controller() -> Controller:
    assert CONTROLLER is not None, "the startup handler builds the controller"
    return CONTROLLER


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf logs in through the `kubernetes` client (in the pod its service account, elsewhere the
    kubeconfig), as our own requests do (kube.Kube.from_environment): one source of credentials."""
    return kopf.login_via_client(**kwargs)


class LoginApi:
    """Our own client, made on first use: the startup handlers run before the login, and a client made at
    import would read the credentials before kopf's first login has checked them."""

    def __init__(self) -> None:
        self._api: Kube | None = None

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        if self._api is None:
            self._api = Kube.from_environment()
        return self._api.request(method, path, body, content_type)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    global CONTROLLER
    settings.peering.standalone = True
    settings.scanning.disabled = True
    settings.posting.enabled = False
    with open(os.environ[CONFIG_ENV]) as f:
        CONTROLLER = Controller(json.load(f), LoginApi())
    CONTROLLER.nodes = kwargs["gpu_nodes"]
    memo.round = asyncio.create_task(
        _rounds(
            CONTROLLER, kwargs["gpu_nodes"], kwargs["diag_pods"], kwargs["gpu_pods"], _idle_round(CONTROLLER)
        )
    )


def _idle_round(controller: Controller) -> IdleRound:
    """Idle reclaim (idle_round.py) for the teams with an idle policy; a no-op without any."""
    config = controller.config

    def query(q: str) -> list[dict]:
        return query_prometheus(config["prometheusUrl"], q)

    def event(target: dict, reason: str, message: str) -> None:
        type_ = "Warning" if reason in idle_reclaim.WARNING_EVENTS else "Normal"
        controller.event(target, target["kind"], reason, message, type_, api_version=target["apiVersion"])

    return IdleRound(config, controller.api, query, event, controller.clock)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    task = memo.get("round")
    if task is not None:
        task.cancel()


async def _rounds(
    controller: Controller, nodes: kopf.Index, diags: kopf.Index, gpu_pods: kopf.Index, idle: IdleRound
) -> None:
    """Every interval, every GPU node again: XIDs (and the startup grace) change without a node event; then
    the idle round (the idle alerts change without any object's event)."""
    while True:
        await asyncio.sleep(controller.interval)
        try:
            await asyncio.to_thread(idle.run)
        except Exception as e:  # the node rounds go on
            log("idle_round_failed", error=repr(e))
        for name in list(nodes):
            for node in list(nodes.get(name, [])):
                try:
                    await asyncio.to_thread(
                        controller.reconcile, node, list(diags.get(name, [])), list(gpu_pods.get(name, []))
                    )
                except Exception as e:  # one node's failure must not end the rounds
                    log("round_failed", node=name, error=repr(e))


def _in_pool(body: kopf.Body, **_: Any) -> bool:
    return CONTROLLER is not None and CONTROLLER.in_pool(dict(body))


def _is_diag_pod(body: kopf.Body, namespace: str | None, **_: Any) -> bool:
    return CONTROLLER is not None and namespace == CONTROLLER.config["diagnostic"]["namespace"]


def _holds_gpus(body: kopf.Body, **_: Any) -> bool:
    return bool(body.get("spec", {}).get("nodeName")) and quarantine.holds_gpus(dict(body))


@kopf.index("nodes", when=_in_pool)
def gpu_nodes(name: str, body: kopf.Body, **_: Any) -> dict[str, dict]:
    return {name: dict(body)}


@kopf.index("pods", labels={"app": "trainplane-gpu-diag"}, when=_is_diag_pod)
def diag_pods(body: kopf.Body, **_: Any) -> dict[str, dict]:
    return {body["spec"].get("nodeName", ""): dict(body)}


@kopf.index("pods", when=_holds_gpus)
def gpu_pods(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[str, dict]:
    """The pods holding GPUs per node, those still terminating too: the others are evicted on a quarantine,
    and while any is left a quarantined node is not re-diagnosed (node_return.py rule 5)."""
    return {
        body["spec"]["nodeName"]: {
            "namespace": namespace,
            "name": name,
            "uid": body["metadata"].get("uid", ""),
            "terminating": bool(body["metadata"].get("deletionTimestamp")),
        }
    }


def _has_hang_exit(body: kopf.Body, **_: Any) -> bool:
    hangs = (CONTROLLER.config.get("hangs") or {}) if CONTROLLER is not None else {}
    for status in body.get("status", {}).get("containerStatuses") or []:
        if status.get("name") == hangs.get("container"):
            for state in (status.get("state") or {}, status.get("lastState") or {}):
                if (state.get("terminated") or {}).get("exitCode") == suspects.EXIT_HANG:
                    return True
    return False


@kopf.on.event("pods", when=_has_hang_exit)
def pod_hung(body: kopf.Body, **_: Any) -> None:
    """A trainer exited with the hang code: remembered; two incidents on a node make it a suspect."""
    _controller().saw_pod(dict(body))


@kopf.on.event("nodes", when=_in_pool)
def node_event(type: str, name: str, body: kopf.Body, **kwargs: Any) -> None:
    """A node changed (or was listed): decide at once rather than at the next round. The indexes come as
    keyword arguments named after their functions (kopf: "Indexing")."""
    if type == "DELETED":
        return
    diags, pods = kwargs["diag_pods"], kwargs["gpu_pods"]
    _controller().reconcile(dict(body), list(diags.get(name, [])), list(pods.get(name, [])))
