"""The validating webhooks of the controllers the platform installs, as rules on plain manifests.

Each function returns one line per rule the object breaks, each citing the upstream file at the pinned tag
(facts.yaml `admission.webhooks`; the tags are the ones components/charts.py installs). Both webhooks fail
closed (failurePolicy fail), so a broken rule is a refused create, not a warning.

- JobSet v0.12.0 (pkg/webhooks/jobset_webhook.go ValidateCreate, after its Default): failure-policy rule
  names, reasons, targets and feature-gated actions; generated Job, pod and subdomain names as DNS-1035
  labels; groupName; dependsOn; successPolicy targets; replicas x parallelism; managedBy; coordinator.
- Kueue v0.19.2, job side (pkg/controller/jobframework/validation.go ValidateJobOnCreate, tas_validation.go,
  pkg/controller/jobs/job/job_webhook.go): queue-name label, max-exec-time label, partial admission and
  completions-equal-parallelism annotations, topology annotations of each pod set.
- Kueue v0.19.2, objects (pkg/webhooks/clusterqueue_webhook.go, cohort_webhook.go, resourceflavor_webhook.go):
  resource groups, quotas and limits, flavor counts, preemption, fungibility, admission checks on flavors;
  ResourceFlavor labels, taints and tolerations. At that tag LocalQueue's webhook has no validator and
  AdmissionCheck, Topology and ProvisioningRequestConfig have no webhook (pkg/webhooks/webhooks.go Setup);
  the Workload webhook sees what Kueue makes from a job (one pod set per replicated job here, so its
  "at most one podSet with minCount" holds), whose inputs the job rules above cover.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from infra.verify import facts as F

JOBSET = "jobset@v0.12.0:pkg/webhooks/jobset_webhook.go"
KUEUE_CQ = "kueue@v0.19.2:pkg/webhooks/clusterqueue_webhook.go"
KUEUE_RF = "kueue@v0.19.2:pkg/webhooks/resourceflavor_webhook.go"
KUEUE_JOBS = "kueue@v0.19.2:pkg/controller/jobframework/validation.go"
KUEUE_TAS = "kueue@v0.19.2:pkg/controller/jobframework/tas_validation.go"
KUEUE_JOB = "kueue@v0.19.2:pkg/controller/jobs/job/job_webhook.go"
MAX_INT32 = 2**31 - 1

# k8s.io/apimachinery/pkg/util/validation (IsDNS1035Label, IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue).
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL = "kueue.x-k8s.io/job-completions-equal-parallelism"
TOPOLOGY = ("required", "preferred", "unconstrained")


def dns1035(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS1035.match(value))


def dns1123_subdomain(value: str) -> bool:
    return len(value) <= 253 and bool(_DNS1123_SUBDOMAIN.match(value))


def qualified_name(value: str) -> bool:
    prefix, _, name = value.rpartition("/")
    if prefix and not dns1123_subdomain(prefix):
        return False
    return len(name) <= 63 and bool(_NAME_PART.match(name))


def label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and bool(_NAME_PART.match(value)))


_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_SUFFIX.update({"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1, "k": 10**3})  # type: ignore[dict-item]
_SUFFIX.update({"M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18})


def quantity(value: Any) -> Decimal:
    """A Kubernetes resource.Quantity as a number (binary, decimal and exponent suffixes)."""
    text = str(value).strip()
    m = re.fullmatch(r"([+-]?[0-9.]+)([eE][+-]?[0-9]+|[A-Za-z]*)", text)
    if not m or (m.group(2) not in _SUFFIX and m.group(2)[:1] not in "eE"):
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Decimal(m.group(1)), m.group(2)
    if suffix[:1] in ("e", "E"):
        return number * Decimal(10) ** int(suffix[1:])
    return number * Decimal(_SUFFIX[suffix])


def _jobset_facts() -> Mapping[str, Any]:
    return F.facts()["admission"]["webhooks"]["jobset"]


def jobset(body: Mapping[str, Any]) -> list[str]:
    """What JobSet's validating webhook refuses in a JobSet. Its alpha feature gates (RestartJob,
    InPlaceRestart; pkg/features/features.go@v0.12.0) are off: the chart has no value that sets them
    (charts/jobset/values.yaml@v0.12.0)."""
    f = _jobset_facts()
    gates: set[str] = set()
    out: list[str] = []
    spec = body.get("spec") or {}
    name = str((body.get("metadata") or {}).get("name", ""))
    policy = spec.get("failurePolicy")
    rjobs = list(spec.get("replicatedJobs") or [])
    rjob_names = {str(r.get("name")) for r in rjobs}
    if (policy or {}).get("restartStrategy") in f["gatedRestartStrategies"] and "InPlaceRestart" not in gates:
        out.append(
            f"restartStrategy InPlaceRestart needs the InPlaceRestart feature gate (off by default) ({JOBSET})"
        )
    subdomain = str((spec.get("network") or {}).get("subdomain") or "")
    if subdomain and not (dns1123_subdomain(subdomain) and dns1035(subdomain)):
        out.append(
            f"network.subdomain {subdomain!r} is not a DNS-1035 label of at most 63 characters ({JOBSET})"
        )
    if spec.get("managedBy") is not None and len(str(spec["managedBy"])) > 63:
        out.append(f"managedBy is longer than 63 characters ({JOBSET})")
    if rjobs and rjobs[0].get("dependsOn"):
        out.append(f"the first replicatedJob {rjobs[0].get('name')} sets dependsOn ({JOBSET})")
    seen: set[str] = set()
    for rj in rjobs:
        seen.add(str(rj.get("name")))
        out += _replicated_job(name, rj, seen, f)
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in rjob_names:
            out.append(f"successPolicy targets replicatedJob {target!r}, which does not exist ({JOBSET})")
    out += _failure_policy(policy or {}, rjob_names, gates, f)
    coordinator = spec.get("coordinator")
    if coordinator is not None and coordinator.get("replicatedJob") not in rjob_names:
        out.append(f"coordinator replicatedJob {coordinator.get('replicatedJob')} does not exist ({JOBSET})")
    return out


def _replicated_job(name: str, rj: Mapping[str, Any], seen: set[str], f: Mapping) -> list[str]:
    """One replicatedJob's rules (ValidateCreate's loop); `seen`: its name and those before it."""
    out: list[str] = []
    rname, replicas = str(rj.get("name")), int(rj.get("replicas", 1))
    job = rj.get("template", {}).get("spec") or {}
    parallelism = int(job.get("parallelism", 1))
    if parallelism * replicas > MAX_INT32:
        out.append(f"replicatedJob {rname}: replicas x parallelism exceeds {MAX_INT32} ({JOBSET})")
    group = str(rj.get("groupName", "default"))  # CRD default
    if not dns1035(group):
        out.append(f"replicatedJob {rname}: groupName {group!r} is not a DNS-1035 label ({JOBSET})")
    longest_job = f"{name}-{rname}-{replicas - 1}"
    if not dns1035(longest_job):
        out.append(
            f"replicatedJob {rname}: child Job name {longest_job!r} ({len(longest_job)} characters) is not a "
            f"DNS-1035 label of at most 63 ({JOBSET} placement.GenJobName)"
        )
    # The mutating webhook defaults completionMode to Indexed; pod names then carry both indexes.
    if job.get("completionMode", "Indexed") == "Indexed" and job.get("completions") is not None:
        pod = f"{longest_job}-{int(job['completions']) - 1}" + "-abcde"[: f["podNameSuffix"]]
        if not dns1035(pod):
            out.append(
                f"replicatedJob {rname}: pod name {pod!r} ({len(pod)} characters with the 5-character "
                f"suffix) is not a DNS-1035 label of at most 63 ({JOBSET} placement.GenPodName)"
            )
    for dep in rj.get("dependsOn") or []:
        if dep.get("name") not in seen - {rname}:
            out.append(f"replicatedJob {rname} depends on {dep.get('name')}, not an earlier one ({JOBSET})")
    return out


def _failure_policy(
    policy: Mapping[str, Any], rjob_names: set[str], gates: set[str], f: Mapping
) -> list[str]:
    out: list[str] = []
    low, high = f["ruleNameLength"]
    pattern = re.compile(f["ruleNamePattern"])
    names: list[str] = []
    for i, rule in enumerate(policy.get("rules") or []):
        rule_name = str(rule.get("name") or f"failurePolicyRule{i}")  # the mutating webhook's default
        names.append(rule_name)
        if not low <= len(rule_name) <= high or not pattern.match(rule_name):
            out.append(
                f"failure-policy rule name {rule_name!r} must be {low}-{high} characters matching "
                f"{f['ruleNamePattern']} ({JOBSET} validateFailurePolicy)"
            )
        if rule.get("action") in f["gatedRestartActions"] and "RestartJob" not in gates:
            out.append(
                f"rule {rule_name}: action {rule['action']} needs the RestartJob feature gate ({JOBSET})"
            )
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in rjob_names:
                out.append(
                    f"rule {rule_name} targets replicatedJob {target!r}, which does not exist ({JOBSET})"
                )
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in f["jobFailureReasons"]:
                out.append(
                    f"rule {rule_name}: {reason!r} is not a Job failure reason JobSet knows ({JOBSET})"
                )
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        out.append(f"failure-policy rule names are not unique: {', '.join(dupes)} ({JOBSET})")
    return out


def kueue_job(
    metadata: Mapping[str, Any], spec: Mapping[str, Any], pod_sets: list[Mapping[str, Any]], batch_job: bool
) -> list[str]:
    """What Kueue's job webhooks refuse in a job it manages (a JobSet or a batch/v1 Job): its metadata, its
    spec (for a Job) and the metadata of each pod set's template."""
    out: list[str] = []
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    queue = labels.get(QUEUE_LABEL)
    if queue is not None and not dns1123_subdomain(str(queue)):
        out.append(
            f"label {QUEUE_LABEL}={queue!r} is not a DNS-1123 subdomain ({KUEUE_JOBS} ValidateQueueName)"
        )
    if MAX_EXEC_LABEL in labels and not (
        str(labels[MAX_EXEC_LABEL]).isdigit() and int(labels[MAX_EXEC_LABEL]) > 0
    ):
        out.append(f"label {MAX_EXEC_LABEL} must be a positive integer ({KUEUE_JOBS})")
    if batch_job:
        out += _batch_job(spec, annotations)
    out += _topology(pod_sets)
    return out


def _batch_job(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> list[str]:
    """Kueue's batch/v1 Job webhook: partial admission and completions-equal-parallelism annotations."""
    out: list[str] = []
    pods = int(spec.get("parallelism", 1))
    if MIN_PARALLELISM in annotations:
        raw = str(annotations[MIN_PARALLELISM])
        if not raw.lstrip("-").isdigit() or not 0 < int(raw) < pods:
            out.append(
                f"annotation {MIN_PARALLELISM}={raw} must be between 1 and {pods - 1} "
                f"(parallelism {pods}) ({KUEUE_JOB} validatePartialAdmissionCreate)"
            )
    if COMPLETIONS_EQUAL in annotations:
        raw = str(annotations[COMPLETIONS_EQUAL]).lower()
        if raw not in ("true", "false", "1", "0", "t", "f"):
            out.append(f"annotation {COMPLETIONS_EQUAL}={raw!r} is not a bool ({KUEUE_JOB})")
        elif raw in ("true", "1", "t") and (
            spec.get("completionMode", "NonIndexed") != "Indexed"
            or spec.get("completions", 1) != spec.get("parallelism", 1)
        ):
            out.append(
                f"annotation {COMPLETIONS_EQUAL}=true needs an Indexed Job with completions equal to "
                f"parallelism ({KUEUE_JOB} validateSyncCompletionCreate)"
            )
    return out


def _topology(pod_sets: list[Mapping[str, Any]]) -> list[str]:
    """Kueue's TAS annotations on each pod set's template: at most one, naming a label."""
    out: list[str] = []
    for i, meta in enumerate(pod_sets):
        found = {
            k: v
            for k in TOPOLOGY
            if (v := (meta.get("annotations") or {}).get(f"kueue.x-k8s.io/podset-{k}-topology")) is not None
        }
        if len(found) > 1:
            out.append(
                f"pod set {i} carries more than one topology annotation ({KUEUE_TAS} ValidateTASPodSetRequest)"
            )
        for k in ("required", "preferred"):
            if k in found and not qualified_name(str(found[k])):
                out.append(f"pod set {i}: podset-{k}-topology {found[k]!r} is not a label name ({KUEUE_TAS})")
    return out


def _resource_groups(
    groups: list[Mapping[str, Any]], has_parent: bool, nominal_over_lending: bool, where: str
) -> list[str]:
    out: list[str] = []
    resources: list[str] = []
    flavors: list[str] = []
    for g in groups:
        covered = [str(r) for r in g.get("coveredResources") or []]
        for r in covered:
            if not qualified_name(r):
                out.append(f"covered resource {r!r} is not a qualified name ({where})")
            if r in resources:
                out.append(f"resource {r} is covered by more than one resource group ({where})")
            resources.append(r)
        for fq in g.get("flavors") or []:
            fname = str(fq.get("name"))
            if fname in flavors:
                out.append(f"flavor {fname} appears in more than one place ({where})")
            flavors.append(fname)
            for i, rq in enumerate((fq.get("resources") or [])[: len(covered)]):
                if rq.get("name") != covered[i]:
                    out.append(
                        f"flavor {fname}: resources[{i}] is {rq.get('name')}, coveredResources[{i}] is "
                        f"{covered[i]} (must match in order) ({where})"
                    )
                out += _limits(fname, rq, has_parent, nominal_over_lending, where)
    return out


def _limits(
    fname: str, rq: Mapping[str, Any], has_parent: bool, nominal_over_lending: bool, where: str
) -> list[str]:
    out: list[str] = []
    nominal = quantity(rq.get("nominalQuota", 0))
    if nominal < 0:
        out.append(f"flavor {fname}: {rq.get('name')} nominalQuota is negative ({where})")
    for key in ("borrowingLimit", "lendingLimit"):
        if rq.get(key) is None:
            continue
        if not has_parent:
            out.append(
                f"flavor {fname}: {rq.get('name')} {key} must be nil without a cohort ({where} validateLimit)"
            )
        if quantity(rq[key]) < 0:
            out.append(f"flavor {fname}: {rq.get('name')} {key} is negative ({where})")
    if nominal_over_lending and rq.get("lendingLimit") is not None and quantity(rq["lendingLimit"]) > nominal:
        out.append(
            f"flavor {fname}: {rq.get('name')} lendingLimit {rq['lendingLimit']} exceeds nominalQuota "
            f"{rq.get('nominalQuota')} ({where} validateLendingLimit)"
        )
    return out


def cluster_queue(spec: Mapping[str, Any]) -> list[str]:
    """What Kueue's ClusterQueue webhook refuses (clusterqueue_webhook.go ValidateClusterQueue)."""
    k = F.facts()["admission"]["webhooks"]["kueue"]
    groups = list(spec.get("resourceGroups") or [])
    out = _resource_groups(groups, bool(spec.get("cohortName")), True, KUEUE_CQ)
    flavors = [str(fq.get("name")) for g in groups for fq in g.get("flavors") or []]
    if len(flavors) > k["maxFlavors"]:
        out.append(f"{len(flavors)} flavors, at most {k['maxFlavors']} ({KUEUE_CQ} validateTotalFlavors)")
    covered = sum(len(g.get("coveredResources") or []) for g in groups)
    if covered > k["maxCoveredResources"]:
        out.append(f"{covered} covered resources, at most {k['maxCoveredResources']} ({KUEUE_CQ})")
    for i, g in enumerate(groups):
        combos = sum(len(fq.get("resources") or []) for fq in g.get("flavors") or [])
        if combos > k["maxFlavorResources"]:
            out.append(
                f"resource group {i}: {combos} flavor-resource pairs, at most {k['maxFlavorResources']} ({KUEUE_CQ})"
            )
    pre = spec.get("preemption") or {}
    if (
        pre.get("reclaimWithinCohort") == "Never"
        and (pre.get("borrowWithinCohort") or {}).get("policy", "Never") != "Never"
    ):
        out.append(
            f"preemption reclaimWithinCohort=Never with borrowWithinCohort.policy!=Never ({KUEUE_CQ} validatePreemption)"
        )
    fung = spec.get("flavorFungibility") or {}
    if fung.get("preference") is not None and (
        fung.get("whenCanBorrow", "MayStopSearch") != "TryNextFlavor"
        or fung.get("whenCanPreempt", "TryNextFlavor") != "TryNextFlavor"
    ):
        out.append(
            f"flavorFungibility.preference needs whenCanBorrow and whenCanPreempt TryNextFlavor ({KUEUE_CQ})"
        )
    weight = (spec.get("fairSharing") or {}).get("weight")
    if weight is not None and (quantity(weight) < 0 or 0 < quantity(weight) <= Decimal("1e-9")):
        out.append(
            f"fairSharing.weight {weight} must be 0 or above 1e-9 (kueue@v0.19.2:pkg/webhooks/common.go)"
        )
    for check in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []:
        for flavor in check.get("onFlavors") or []:
            if flavor not in flavors:
                out.append(
                    f"admission check {check.get('name')} names flavor {flavor}, not one of the queue's "
                    f"({KUEUE_CQ} validateAdmissionCheckOnFlavors)"
                )
    return out


def cohort(spec: Mapping[str, Any]) -> list[str]:
    """What Kueue's Cohort webhook refuses (cohort_webhook.go validateCohort: no nominal >= lending rule)."""
    where = "kueue@v0.19.2:pkg/webhooks/cohort_webhook.go"
    return _resource_groups(
        list(spec.get("resourceGroups") or []), bool(spec.get("parentName")), False, where
    )


def resource_flavor(spec: Mapping[str, Any]) -> list[str]:
    """What Kueue's ResourceFlavor webhook refuses (resourceflavor_webhook.go ValidateResourceFlavor)."""
    out: list[str] = []
    for key, value in (spec.get("nodeLabels") or {}).items():
        if not qualified_name(str(key)) or not label_value(str(value)):
            out.append(f"nodeLabels {key}={value} is not a valid label ({KUEUE_RF})")
    seen: set[tuple[str, str]] = set()
    for t in spec.get("nodeTaints") or []:
        key, effect = str(t.get("key", "")), str(t.get("effect", ""))
        if not qualified_name(key) or not label_value(str(t.get("value", ""))):
            out.append(f"nodeTaint {key}={t.get('value')} is not a valid taint key/value ({KUEUE_RF})")
        if (key, effect) in seen:
            out.append(
                f"nodeTaints repeat {key}:{effect} (unique by key and effect) ({KUEUE_RF} validateNodeTaints)"
            )
        seen.add((key, effect))
    for t in spec.get("tolerations") or []:
        if t.get("key") and not qualified_name(str(t["key"])):
            out.append(f"toleration key {t['key']!r} is not a label name ({KUEUE_RF} validateTolerations)")
    return out
