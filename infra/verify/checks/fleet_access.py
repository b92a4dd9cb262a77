"""fleet-access: the manager can reach each worker, with a kubeconfig Kueue accepts and RBAC that covers
what MultiKueue does there.

kueue@v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go: a MultiKueueCluster's
`clusterSource.kubeConfig` of locationType Secret is read from the Secret of that name in Kueue's own
namespace, key `kubeconfig` (getKubeConfigFromSecret; apis/kueue/v1beta2/multikueue_types.go
MultiKueueConfigSecretKey), and validateKubeconfig refuses (InsecureKubeConfig) a user with `tokenFile`,
a cluster with `insecure-skip-tls-verify` or a `certificate-authority` path or no `server`, basic auth,
exec plugins and auth providers. The worker's ClusterRole: site/static/examples/multikueue/
create-multikueue-kubeconfig.sh at v0.19.2, for the kinds trainplane runs (JobSet, batch Job) and the
Workloads MultiKueue mirrors.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from components.incluster.names import KUEUE_NAMESPACE
from infra.verify import facts as F
from infra.verify.checks.provider_kubeconfig import check_providers
from infra.verify.context import Context
from infra.verify.fleet_model import MANAGER, FleetPlan
from infra.verify.model import unsecret
from infra.verify.report import CheckResult

NAME = "fleet-access"
KEY: str = F.facts()["multiKueue"]["secretKey"]
# (apiGroup, resource) -> verbs (infra/verify/facts.yaml multiKueue.workerRules).
REQUIRED_RULES: dict[tuple[str, str], set[str]] = {
    (r["apiGroup"], r["resource"]): set(r["verbs"]) for r in F.facts()["multiKueue"]["workerRules"]
}
READ_VERBS = frozenset({"get", "list", "watch"})


def kubeconfig_problems(text: str) -> list[str]:
    """Why Kueue's validateKubeconfig would refuse this kubeconfig (empty: it accepts it)."""
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        return [f"is not YAML ({str(e).splitlines()[0]})"]
    problems = []
    for c in config.get("clusters") or []:
        cluster, name = c.get("cluster") or {}, c.get("name")
        if cluster.get("insecure-skip-tls-verify"):
            problems.append(f"cluster {name} sets insecure-skip-tls-verify")
        if cluster.get("certificate-authority"):
            problems.append(
                f"cluster {name} names a certificate-authority file (use certificate-authority-data)"
            )
        if not cluster.get("server"):
            problems.append(f"cluster {name} has no server")
    for u in config.get("users") or []:
        user, name = u.get("user") or {}, u.get("name")
        for key, what in (
            ("tokenFile", "a tokenFile"),
            ("exec", "an exec plugin"),
            ("auth-provider", "an auth provider"),
        ):
            if user.get(key):
                problems.append(f"user {name} uses {what}")
        if user.get("username") or user.get("password"):
            problems.append(f"user {name} uses basic auth")
    return problems


def _data(secret: Any, field: str) -> dict[str, Any]:
    return dict(unsecret(secret.body.get(field)) or {})


def secret_kubeconfig(secret: Any) -> str | None:
    """The Secret's `kubeconfig` as text: stringData, or data (base64); None when absent or not known."""
    if isinstance(plain := unsecret(_data(secret, "stringData").get(KEY)), str):
        return plain
    raw = unsecret(_data(secret, "data").get(KEY))
    if isinstance(raw, str):
        try:
            return base64.b64decode(raw).decode()
        except ValueError:
            return raw
    return None


def _has_key(secret: Any) -> bool:
    return KEY in _data(secret, "stringData") or KEY in _data(secret, "data")


def run(ctx: Context) -> CheckResult:
    result = CheckResult(NAME)
    fleet: FleetPlan = ctx.fleet
    # The fleet's own providers reach the manager and each worker (an ambient worker: no kubeconfig).
    check_providers(fleet.plan, result)
    for w in fleet.workers:
        cluster = fleet.find(MANAGER, "MultiKueueCluster", w.name)
        if cluster is None:
            result.fail(
                f"the manager has no MultiKueueCluster {w.name} for worker {w.name} ({w.stack})", w.stack
            )
        else:
            _check_secret(result, fleet, cluster)
        _check_rbac(result, fleet, w.name)
    return result


def _check_secret(result: CheckResult, fleet: FleetPlan, cluster: Any) -> None:
    source = dict((cluster.spec.get("clusterSource") or {}).get("kubeConfig") or {})
    if source.get("locationType", "Secret") != "Secret":
        result.fail(
            f"{cluster.ref}: kubeConfig locationType {source.get('locationType')}, not a Secret", cluster.ref
        )
        return
    name = str(source.get("location", ""))
    secret = fleet.find(MANAGER, "Secret", name, KUEUE_NAMESPACE)
    result.examined.append(cluster.ref)
    if secret is None:
        result.fail(
            f"{cluster.ref} reads Secret {KUEUE_NAMESPACE}/{name}, which the manager lacks", cluster.ref
        )
        return
    if not _has_key(secret):
        result.fail(f"{secret.ref} on the manager has no key {KEY!r}, which MultiKueue reads", secret.ref)
        return
    text = secret_kubeconfig(secret)
    if text is None:
        result.note(f"{secret.ref}: the kubeconfig is known only once deployed; verify --kubeconfig reads it")
        return
    problems = kubeconfig_problems(text)
    if problems:
        result.fail(
            f"{secret.ref}: Kueue refuses its kubeconfig (InsecureKubeConfig): {'; '.join(problems)}",
            secret.ref,
        )


def _rules_cover(rules: list[Any], only: frozenset[str] | None = None) -> list[str]:
    """What of REQUIRED_RULES (its `only` verbs, when given) the rules do not allow."""
    missing = []
    for (group, resource), wanted in REQUIRED_RULES.items():
        verbs = wanted & only if only is not None else wanted
        if not verbs:
            continue
        have: set[str] = set()
        for r in rules:
            if (group in (r.get("apiGroups") or []) or "*" in (r.get("apiGroups") or [])) and (
                resource in (r.get("resources") or []) or "*" in (r.get("resources") or [])
            ):
                have |= set(r.get("verbs") or [])
        lacking = verbs - have if "*" not in have else set()
        if lacking:
            missing.append(f"{group}/{resource} {','.join(sorted(lacking))}")
    return missing


def _subject_is(binding: Any, sa_name: str) -> bool:
    return any(
        s.get("kind") == "ServiceAccount"
        and s.get("name") == sa_name
        and s.get("namespace") == KUEUE_NAMESPACE
        for s in binding.body.get("subjects") or []
    )


def _bound_rules(fleet: FleetPlan, worker: str, bindings: list[Any], namespace: str | None) -> list[Any]:
    """The rules of the roles `bindings` grant (a ClusterRole, or a Role in `namespace`)."""
    rules = []
    for b in bindings:
        ref = b.body.get("roleRef") or {}
        role = (
            fleet.find(worker, "Role", str(ref.get("name")), namespace)
            if ref.get("kind") == "Role"
            else fleet.find(worker, "ClusterRole", str(ref.get("name")))
        )
        rules += list(role.body.get("rules") or []) if role is not None else []
    return rules


def _team_namespaces(fleet: FleetPlan, worker: str) -> list[str]:
    """The namespaces of the fleet's teams on the worker (its platform's `teams` output)."""
    w = fleet.worker(worker)
    teams = {str(t.name) for t in getattr(fleet.spec, "teams", [])}
    outputs = w.plan.teams if w is not None else []
    return sorted(t.namespace for t in outputs if t.name in teams and t.namespace)


def _check_rbac(result: CheckResult, fleet: FleetPlan, worker: str) -> None:
    accounts = fleet.on(worker, "ServiceAccount", KUEUE_NAMESPACE)
    if not accounts:
        result.fail(
            f"worker {worker}: no ServiceAccount in {KUEUE_NAMESPACE} for the manager", f"worker {worker}"
        )
        return
    for sa in accounts:
        result.examined.append(f"{sa.ref} on {worker}")
        cluster_wide = [b for b in fleet.on(worker, "ClusterRoleBinding") if _subject_is(b, sa.name)]
        roles = [str((b.body.get("roleRef") or {}).get("name")) for b in cluster_wide]
        everywhere = _bound_rules(fleet, worker, cluster_wide, None)
        # MultiKueue lists and watches in every namespace (kueue v0.19.2 multikueuecluster.go): reads must
        # be cluster-wide; what it writes may be bound in the fleet teams' namespaces only.
        missing = _rules_cover(everywhere, READ_VERBS)
        if missing:
            result.fail(
                f"worker {worker}: {sa.ref} may not {'; '.join(missing)} in every namespace (ClusterRoles "
                f"{', '.join(roles) or 'none'}), which MultiKueue's watches do there",
                sa.ref,
            )
        for ns in _team_namespaces(fleet, worker):
            local = [b for b in fleet.on(worker, "RoleBinding", ns) if _subject_is(b, sa.name)]
            missing = _rules_cover(everywhere + _bound_rules(fleet, worker, local, ns))
            if missing:
                granted = [str((b.body.get("roleRef") or {}).get("name")) for b in local]
                result.fail(
                    f"worker {worker}: {sa.ref} may not {'; '.join(missing)} in team namespace {ns} (roles "
                    f"{', '.join(roles + granted) or 'none'}), which MultiKueue does there",
                    sa.ref,
                )
        tokens = [
            s
            for s in fleet.on(worker, "Secret", KUEUE_NAMESPACE)
            if s.body.get("type") == "kubernetes.io/service-account-token"
            and s.annotations.get("kubernetes.io/service-account.name") == sa.name
        ]
        if not tokens:
            result.fail(
                f"worker {worker}: no kubernetes.io/service-account-token Secret for {sa.ref}: the manager's "
                "kubeconfig has no token to carry",
                sa.ref,
            )
