"""cloud, provider-kubeconfig: every Kubernetes provider of the plan can load a cluster configuration.

pulumi-kubernetes reads a provider's `kubeconfig` as a file path or a kubeconfig document; when it is
neither it marks the cluster unreachable and every create through it fails, while preview passes
(pulumi/pulumi-kubernetes@v4.32.0:provider/pkg/provider/provider.go Configure, util.go
parseKubeconfigString). No `kubeconfig` loads the ambient file ($KUBECONFIG, ~/.kube/config) with the
provider's `context`. The trap: an existing-cluster platform on the ambient kubeconfig exports
`(ambient kubeconfig, context NAME)` as its `kubeconfig` output (components/kubernetes/cluster.py), which
a job, fleet or fleet-job stack must not hand on as a kubeconfig (components/fleet/providers.py platform_provider).
"""

from __future__ import annotations

from typing import Any

import yaml

from components.fleet.model import ambient_context
from infra.verify.model import Plan, unsecret
from infra.verify.report import CheckResult

RULE = "provider-kubeconfig"
SOURCE = "pulumi-kubernetes v4.32.0 provider.go Configure: clusterUnreachable"
# An input not known until deploy, as recorded (pulumi/pulumi@v3.272.0 sdk/python/lib/pulumi/runtime/rpc.py UNKNOWN).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def kubeconfig_problem(value: Any) -> str | None:
    """Why pulumi-kubernetes could not load this `kubeconfig` input (None: it can, or it is not known)."""
    value = unsecret(value)
    if not isinstance(value, str) or not value.strip() or value == UNKNOWN:
        return None  # none: the ambient file with the provider's context; or known only once deployed
    text = value.strip()
    if (ctx := ambient_context(text)) is not None:
        return (
            f"its kubeconfig is {text!r}, what a platform on the ambient kubeconfig exports, not a "
            f"kubeconfig: give the provider no kubeconfig and context {ctx!r} (components/fleet/providers.py platform_provider)"
        )
    if "\n" not in text and not any(c.isspace() for c in text) and not text.startswith("{"):
        return None  # a path: only the deployer's machine can say whether it exists
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict) or not doc.get("clusters"):
        return "its kubeconfig is neither a file path nor a kubeconfig document (no clusters)"
    return None


def check_providers(plan: Plan, res: CheckResult) -> None:
    for r in plan.resources:
        if r.type != "pulumi:providers:kubernetes":
            continue
        if (why := kubeconfig_problem(r.inputs.get("kubeconfig"))) is not None:
            res.fail(
                f"{RULE}: provider {r.name}: {why}; the cluster is unreachable at create ({SOURCE})", r.urn
            )
