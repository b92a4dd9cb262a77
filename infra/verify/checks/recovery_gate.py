"""recovery, rule `rediagnose-gate`: the re-diagnosis of a quarantined node cannot start before the node's GPU
pods are gone (issue 30 (4)).

An evicted trainer keeps its GPUs through its terminationGracePeriodSeconds; a diagnostic started then finds
them busy and ends `skipped`. The controller reruns the diagnostic only once no pod on the node that holds
GPUs is left, terminating ones included (node_return.py rule 5, quarantine.holds_gpus), and retries a
skipped run. That holds only if:
- its config (ConfigMap gpu-operator/trainplane-gpu-health, `config.json`) keeps the gate on
  (`quarantine.waitForGpuPods` not false; absent: on, the controller's default) and retries a skipped run
  (`quarantine.rediagnoseRetries` >= 1);
- it sees every pod: kopf runs cluster-wide (`trainplane-controller gpu-health` does: controllers/__main__.py,
  kopf.run(clusterwide=True); a `kopf run` command needs `--all-namespaces`); with `--namespace` it would
  watch only those, and a team's terminating trainer would be invisible: the gate would open at once), and
  its ServiceAccount may
  list and watch pods cluster-wide (a ClusterRoleBinding; recovery.py's RBAC matching).
Nothing to judge when gpuHealth is off or `quarantine.rediagnose` is false (no rerun at all).
"""

from __future__ import annotations

import json
from typing import Any

from components.incluster.names import GPU_OPERATOR_NAMESPACE
from contract import recovery as R
from infra.verify.checks.recovery_base import _binds, _controller, _grants, _role_rules
from infra.verify.context import Context
from infra.verify.report import CheckResult

# The controller image's command that runs the GPU health operator (controllers/__main__.py).
GPU_HEALTH_COMMAND = "gpu-health"
RULE = "rediagnose-gate"


def _config(ctx: Context, res: CheckResult, ref: str) -> dict[str, Any] | None:
    cm = ctx.object("ConfigMap", GPU_OPERATOR_NAMESPACE, R.CONTROLLER_NAME)
    text = ((cm.body.get("data") or {}).get("config.json")) if cm is not None else None
    if not isinstance(text, str):
        res.note(f"{RULE}: {ref} has no config.json known before deploy: its re-diagnosis gate is not judged")
        return None
    try:
        config = json.loads(text)
    except ValueError:
        res.fail(f"{RULE}: {ref} config.json is not JSON: the controller cannot start", ref)
        return None
    return config if isinstance(config, dict) else None


def _pods_everywhere(ctx: Context) -> list[str]:
    """The pod verbs the controller's ServiceAccount lacks cluster-wide, of list and watch."""
    ns, name = GPU_OPERATOR_NAMESPACE, R.CONTROLLER_NAME
    rules: list[Any] = []
    for binding in ctx.platform.objects("ClusterRoleBinding"):
        role_ref = binding.body.get("roleRef") or {}
        if role_ref.get("kind") == "ClusterRole" and _binds(binding, ns, name):
            got = _role_rules(ctx, str(role_ref.get("name")), [])
            if got is None:
                return []  # cluster-admin
            rules += got
    return [v for v in ("list", "watch") if not any(_grants(r, "", "pods", v) for r in rules)]


def check_rediagnose_gate(ctx: Context, res: CheckResult) -> None:
    deployment = _controller(ctx)
    if deployment is None:
        return  # `controller` says so
    ref = f"ConfigMap {GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME}"
    config = _config(ctx, res, ref)
    if config is None:
        return
    quarantine = config.get("quarantine") or {}
    if quarantine.get("rediagnose", True) is False:
        return
    res.examined.append(f"{RULE} {ref}")
    why = "the diagnostic would find the evicted trainers' GPUs busy, end skipped, and the node never return"
    if quarantine.get("waitForGpuPods", True) is not True:
        res.fail(
            f"{RULE}: {ref} sets quarantine.waitForGpuPods {quarantine.get('waitForGpuPods')!r}: the "
            f"re-diagnosis may start while the node's GPU pods are still terminating; {why}",
            ref,
        )
    retries = quarantine.get("rediagnoseRetries", 3)
    if not isinstance(retries, int) or retries < 1:
        res.fail(
            f"{RULE}: {ref} sets quarantine.rediagnoseRetries {retries!r}: a re-diagnosis that still found "
            "the GPUs busy (skipped) is never retried, so the node waits for replacement",
            ref,
        )
    dep_ref = f"Deployment {GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME}"
    pod = (deployment.spec.get("template") or {}).get("spec") or {}
    for c in pod.get("containers") or []:
        argv = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
        one_namespace = any(a in ("-n", "--namespace") or a.startswith("--namespace=") for a in argv)
        if ("kopf" in argv and "--all-namespaces" not in argv) or (
            ("kopf" in argv or GPU_HEALTH_COMMAND in argv) and one_namespace
        ):
            res.fail(
                f"{RULE}: {dep_ref} container {c.get('name')} runs kopf without --all-namespaces (or with "
                "--namespace): it sees only some namespaces' pods, so a team's terminating GPU pod does not "
                "hold the re-diagnosis back",
                dep_ref,
            )
    missing = _pods_everywhere(ctx)
    if missing:
        res.fail(
            f"{RULE}: ServiceAccount {GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME} may not {', '.join(missing)} "
            "pods cluster-wide: the controller cannot see the GPU pods still on a node, so its re-diagnosis "
            "cannot wait for them",
            f"ServiceAccount {GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME}",
        )
