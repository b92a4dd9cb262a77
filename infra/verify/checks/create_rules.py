"""cloud: would the cloud accept our create calls, and in this order?

Create-time requirements are the cloud's: its verifier checks them (`CloudVerifier.verify_create_rules`,
e.g. infra/verify/clouds/aws/create_rules.py; the rules and their sources are data in the cloud's
facts.yaml beside it, each finding starts with the rule's name). A job stack creates no cloud resources of
its own, so only the platform's are checked. Creation order (`createOrder`, any cloud):
infra/verify/checks/create_order.py. Every stack's Kubernetes providers can load a cluster configuration
(provider-kubeconfig: infra/verify/checks/provider_kubeconfig.py).
"""

from __future__ import annotations

from infra.verify.checks.create_order import check_order
from infra.verify.checks.provider_kubeconfig import check_providers
from infra.verify.context import Context
from infra.verify.report import CheckResult


def run(ctx: Context) -> CheckResult:
    res = CheckResult("cloud")
    plan = ctx.plan
    if not ctx.job_only:
        ctx.verifier.verify_create_rules(ctx, res)
    check_order(plan, res)
    check_providers(plan, res)
    return res
