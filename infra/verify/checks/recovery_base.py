"""What the recovery, idle and re-diagnosis checks share: the platform's spec, the GPU health controller's
Deployment, whether health and observability are on, and RBAC matching (does a role grant a verb, does a
binding name the ServiceAccount). Its own module so those checks import it, not one another."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.incluster.names import GPU_OPERATOR_NAMESPACE
from contract import recovery as R
from infra.verify.context import Context
from infra.verify.model import K8sObject
from infra.verify.netpol import selects
from infra.verify.report import CheckResult

# A built-in ClusterRole every cluster has (Kubernetes' bootstrap policy): it allows everything.
CLUSTER_ADMIN = "cluster-admin"


def _spec(ctx: Context) -> Any:
    """The platform's spec (components.spec.PlatformSpec), None when the plan carries no usable config."""
    from pydantic import ValidationError

    from components.spec.platform import loaded_model

    try:
        # The model a stack loads with: the sections of a backend a program registered included.
        return loaded_model().model_validate(dict(ctx.platform.config or {}))
    except ValidationError:
        return None


def _controller(ctx: Context) -> K8sObject | None:
    return ctx.object("Deployment", GPU_OPERATOR_NAMESPACE, R.CONTROLLER_NAME)


def _health_on(ctx: Context, spec: Any, res: CheckResult) -> bool:
    if spec is not None:
        return bool(spec.gpu_health.enabled)
    # No config (a dump without it): the plan's own objects say whether the loop was meant to be there.
    if _controller(ctx) is None:
        res.note("no platform config in the plan and no GPU health controller: gpuHealth taken as off")
        return False
    return True


def _grants(rule: Mapping[str, Any], group: str, resource: str, verb: str) -> bool:
    """One PolicyRule allows `verb` on every object of `resource` (maybe "res/sub") in `group`."""
    if rule.get("resourceNames"):
        return False  # limited to named objects: no list/watch, no create, not every node
    sub = resource.partition("/")[2]
    verbs, groups, resources = (list(rule.get(k) or []) for k in ("verbs", "apiGroups", "resources"))
    return (
        ("*" in verbs or verb in verbs)
        and ("*" in groups or group in groups)
        and ("*" in resources or resource in resources or bool(sub and f"*/{sub}" in resources))
    )


def _binds(binding: K8sObject, namespace: str, name: str) -> bool:
    """The binding's subjects include the ServiceAccount (by itself, as its user, or by its groups)."""
    for s in binding.body.get("subjects") or []:
        kind, subject = s.get("kind"), s.get("name")
        if kind == "ServiceAccount" and subject == name and s.get("namespace") == namespace:
            return True
        if kind == "User" and subject == f"system:serviceaccount:{namespace}:{name}":
            return True
        if kind == "Group" and subject in ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"):
            return True
    return False


def _role_rules(ctx: Context, role: str, unknown: list[str]) -> list[Mapping[str, Any]] | None:
    """The rules of a ClusterRole, its aggregated roles' included; None: cluster-admin (everything). A role
    the plan does not create is added to `unknown` (its rules cannot be judged offline)."""
    if role == CLUSTER_ADMIN:
        return None
    obj = ctx.object("ClusterRole", None, role)
    if obj is None:
        unknown.append(role)
        return []
    rules = list(obj.body.get("rules") or [])
    # An aggregated ClusterRole's rules are those of the ClusterRoles its selectors pick (the controller
    # manager's clusterrole-aggregation controller fills them in).
    for selector in (obj.body.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
        for other in ctx.platform.objects("ClusterRole"):
            if other.name != role and selects(selector, other.labels):
                rules += list(other.body.get("rules") or [])
    return rules


def _observability(ctx: Context, spec: Any) -> tuple[bool, bool]:
    """(Prometheus is installed, its alert rules are on)."""
    prometheus = bool(ctx.platform.releases("kube-prometheus-stack"))
    if spec is not None:
        return prometheus, prometheus and bool(spec.observability.alerts)
    return prometheus, prometheus and bool(ctx.platform.objects("PrometheusRule"))
