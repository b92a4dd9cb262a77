"""`trainplane verify STACK --kubeconfig F | --context C`: the same questions asked of a running cluster.

Read-only, with the official `kubernetes` client (list calls only): this module reads the cluster once
(`ClusterState`); the checks that have a live runner in the registry (infra/verify/registry.py; they live
in infra/verify/checks/live_cluster.py) then ask it the offline checks' questions through a live
`ClusterView` (infra/verify/view.py). The offline plan says what should be there; the cluster says what is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.verify.context import Context
from infra.verify.model import Plan
from infra.verify.report import Report
from infra.verify.view import ClusterState, LiveView

__all__ = ["ClusterState", "LiveError", "read_cluster", "verify_live", "verify_state"]


class LiveError(Exception):
    """The cluster cannot be read (bad kubeconfig, unreachable API, no permission): one line."""


def read_cluster(kubeconfig: str | None = None, context: str | None = None) -> ClusterState:
    """List what the live checks need, read-only; LiveError says why the cluster cannot be read."""
    try:
        return _read(kubeconfig, context)
    except LiveError:
        raise
    except Exception as e:  # kubernetes' ConfigException, ApiException, urllib3 connection errors
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise LiveError(
            f"cannot read the cluster ({kubeconfig or 'default kubeconfig'}): {type(e).__name__}: {first}"
        ) from None


def _read(kubeconfig: str | None, context: str | None) -> ClusterState:
    from kubernetes import client, config

    if kubeconfig is not None:
        from pathlib import Path

        if not Path(kubeconfig).is_file():
            raise LiveError(f"--kubeconfig {kubeconfig}: no such file")
    api = config.new_client_from_config(config_file=kubeconfig, context=context)
    core, storage, apps = client.CoreV1Api(api), client.StorageV1Api(api), client.AppsV1Api(api)

    def items(resp: Any) -> list[dict[str, Any]]:
        return [api.sanitize_for_serialization(i) for i in resp.items]

    return ClusterState(
        storage_classes=items(storage.list_storage_class()),
        csi_drivers=items(storage.list_csi_driver()),
        nodes=items(core.list_node()),
        pvcs=items(core.list_persistent_volume_claim_for_all_namespaces()),
        daemon_sets=items(apps.list_daemon_set_for_all_namespaces()),
        pods=items(core.list_pod_for_all_namespaces()),
        service_accounts=items(core.list_service_account_for_all_namespaces()),
    )


def verify_state(
    plan: Plan, state: ClusterState, checks: Sequence[str] | None = None, source: str = "cluster"
) -> Report:
    """The registry's live runners on what was read from a cluster (offline-only checks: skipped)."""
    from infra.verify import run_checks

    return run_checks(plan, LiveView(Context(plan), state, source), checks)


def verify_live(
    plan: Plan, kubeconfig: str | None = None, context: str | None = None, checks: Sequence[str] | None = None
) -> Report:
    state = read_cluster(kubeconfig, context)
    where = f"kubeconfig {kubeconfig or '(default)'}" + (f", context {context}" if context else "")
    return verify_state(plan, state, checks, where)
