"""A fleet plan for verify's fleet checks: the reference manager and worker platforms as planned, and the
fleet stack's objects as the fleet design places them (tests plant one defect at a time with `edit`)."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import yaml

from components.spec.fleet import FleetSpec
from infra.verify.checks.fleet_access import REQUIRED_RULES
from infra.verify.checks.fleet_queues import nominal, team_queue
from infra.verify.fleet_model import fleet_plan
from infra.verify.model import Plan, build, from_run
from tests.helpers.plans import planned

WORKERS = {"aws-h100": "aws-h100-reserved", "gcp-h100": "gcp-h100-dws", "lab": "onprem-dev"}
SPEC = {
    "name": "research",
    "manager": {"platformStack": "organization/trainplane/aws-fleet-manager"},
    "workers": [{"name": n, "platformStack": f"organization/trainplane/{s}"} for n, s in WORKERS.items()],
    "teams": [{"name": "research"}],
}
STACK = "fleet-research"


def kubeconfig(server: str = "https://10.0.0.1:443", **user: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "w", "cluster": {"server": server, "certificate-authority-data": "Q0E="}}],
            "users": [{"name": "mk", "user": {"token": "t0ken", **user}}],
            "contexts": [{"name": "w", "context": {"cluster": "w", "user": "mk"}}],
            "current-context": "w",
        }
    )


def _objects(workers: dict[str, Plan]) -> dict[str, list[dict[str, Any]]]:
    team = "research"
    ns, lq = team_queue(next(iter(workers.values())), team) or ("", "")
    total: dict[str, Decimal] = {}
    for p in workers.values():
        wlq = next(o for o in p.objects("LocalQueue", ns) if o.name == lq)
        cq = next(o for o in p.objects("ClusterQueue") if o.name == wlq.spec["clusterQueue"])
        for r, v in nominal(cq).items():
            total[r] = total.get(r, Decimal(0)) + v
    manager = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": lq, "namespace": ns},
            "spec": {"clusterQueue": team},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": team},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": sorted(total),
                        "flavors": [
                            {
                                "name": "fleet",
                                "resources": [
                                    {"name": r, "nominalQuota": str(v)} for r, v in sorted(total.items())
                                ],
                            }
                        ],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": "research-multikueue"}]},
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "research-multikueue"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "research"},
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": "research"},
            "spec": {"clusters": list(workers)},
        },
    ]
    out: dict[str, list[dict[str, Any]]] = {"manager": manager}
    rules = [{"apiGroups": [g], "resources": [r], "verbs": sorted(v)} for (g, r), v in REQUIRED_RULES.items()]
    for w in workers:
        secret = f"multikueue-{w}"
        manager.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": w},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}},
            }
        )
        data = {"kubeconfig": base64.b64encode(kubeconfig().encode()).decode()}
        manager.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret, "namespace": "kueue-system"},
                "data": data,
            }
        )
        sa = {"name": "multikueue-research", "namespace": "kueue-system"}
        out[w] = [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": sa},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "multikueue-research"},
                "rules": rules,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "multikueue-research"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "multikueue-research",
                },
                "subjects": [{"kind": "ServiceAccount", **sa}],
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/service-account-token",
                "metadata": {
                    "name": "multikueue-research-1",
                    "namespace": "kueue-system",
                    "annotations": {"kubernetes.io/service-account.name": sa["name"]},
                },
            },
        ]
    return out


def fleet(
    edit: Callable[[dict[str, list[dict[str, Any]]]], None] | None = None,
    spec: dict | None = None,
    manager_config: dict | None = None,
) -> Plan:
    """The fleet's plan for verify; `edit` changes its objects by cluster first."""
    workers = {n: from_run(planned(s)) for n, s in WORKERS.items()}
    mrun = planned("aws-fleet-manager")
    mconfig = (
        copy.deepcopy(manager_config) if manager_config is not None else {"queueing": {"fleetManager": True}}
    )
    manager = from_run(mrun, mconfig)
    objects = _objects(workers)
    if edit is not None:
        edit(objects)
    resources: list[dict[str, Any]] = []
    for cluster, objs in objects.items():
        purn = f"urn:pulumi:{STACK}::trainplane::pulumi:providers:kubernetes::{cluster}"
        resources.append({"urn": purn, "type": "pulumi:providers:kubernetes", "name": cluster, "inputs": {}})
        for i, o in enumerate(objs):
            kind = o["kind"]
            resources.append(
                {
                    "urn": f"urn:pulumi:{STACK}::trainplane::kubernetes:x:{kind}::{cluster}-{kind}-{i}",
                    "type": f"kubernetes:{o['apiVersion'].split('/')[0] if '/' in o['apiVersion'] else 'core'}/{o['apiVersion'].split('/')[-1]}:{kind}",
                    "name": f"{cluster}-{kind}-{i}",
                    "inputs": o,
                    "provider": f"{purn}::id",
                }
            )
    plan = build(STACK, resources, {"workers": [{"name": n, "order": i} for i, n in enumerate(WORKERS)]})
    fspec = FleetSpec.load(copy.deepcopy(spec or SPEC))
    return fleet_plan(
        fspec, plan, manager, {n: (f"organization/trainplane/{s}", workers[n]) for n, s in WORKERS.items()}
    )
