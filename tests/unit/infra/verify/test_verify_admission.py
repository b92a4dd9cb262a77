"""verify admission: every pod template against its namespace's Pod Security level, every JobSet, Job,
ClusterQueue, Cohort and ResourceFlavor against its controller's validating webhook at the pinned tag.
Each rule is planted into a reference plan (or a manifest) and found by name."""

from __future__ import annotations

import functools

import pytest

from infra.verify import plan_from_stack
from infra.verify.checks import admission_webhooks as W
from infra.verify.checks.pod_security import violations
from infra.verify.model import Plan
from tests.helpers.verify_plans import edit, kind, lines, plan, plus, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

ENFORCE = "pod-security.kubernetes.io/enforce"
V133 = (1, 33)


@functools.cache
def job_plan() -> Plan:
    return plan_from_stack("gpt-small-aws-dev")


def admission(plan_: Plan) -> list[str]:
    return lines(run(plan_, "admission"))


# ---- clean stacks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "gcp-h100-mega", "gcp-h100-dws", "aws-h200-efa"])
def test_clean_platforms_pass_with_their_training_jobs_and_nccl_preflights(stack):
    report = run(plan(stack), "admission")
    assert report.ok, lines(report)
    examined = report.check("admission").examined
    assert any("NCCL preflight JobSet" in e for e in examined), examined
    assert any(e.startswith("webhook ClusterQueue") for e in examined), examined


def test_a_clean_job_stack_passes_with_its_preflight():
    report = run(job_plan(), "admission")
    assert report.ok, lines(report)
    assert any("verify" not in e and "nccl" in e for e in report.check("admission").examined)


# ---- Pod Security, in a plan ------------------------------------------------------------------------


def test_a_gpudirect_pod_in_a_baseline_team_namespace_is_refused():
    """Defect 2 as verify sees it: TCPXO pods (and their NCCL preflight) in a namespace enforcing baseline."""

    def baseline(inputs: dict) -> None:
        inputs["metadata"]["labels"] = {**inputs["metadata"]["labels"], ENFORCE: "baseline"}
        for mode in ("warn", "audit"):
            inputs["metadata"]["labels"].pop(f"pod-security.kubernetes.io/{mode}", None)

    found = admission(edit(plan("gcp-h100-mega"), kind("Namespace", "research"), baseline))
    pods = [
        x for x in found if "JobSet research/verify-research" in x and "enforces Pod Security baseline" in x
    ]
    assert any("hostPathVolumes: hostPath /home/kubernetes/bin/nvidia" in x for x in pods), found
    assert any("/dev/aperture_devices" in x for x in pods), found
    assert any("capabilities_baseline: container tcpxo-daemon adds NET_ADMIN" in x for x in pods), found
    assert any(x.startswith("admission: NCCL preflight JobSet research/") for x in pods), found


def _daemonset(namespace: str, **pod: object) -> dict:
    spec = {"containers": [{"name": "agent", "image": "x"}], **pod}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {}, "spec": spec}},
    }


def test_a_host_network_daemonset_in_a_team_namespace_is_refused_but_not_in_kube_system():
    found = admission(plus(plan("aws-dev"), _daemonset("research", hostNetwork=True)))
    assert any(
        "DaemonSet research/agent pod template: namespace research enforces Pod Security baseline" in x
        and "hostNamespaces: hostNetwork=true" in x
        for x in found
    ), found
    # Namespaces the plan does not label get the cluster default, privileged.
    assert not admission(plus(plan("aws-dev"), _daemonset("kube-system", hostNetwork=True)))


# ---- Pod Security rules, one by one ------------------------------------------------------------------


def _pod(**container: object) -> dict:
    return {"containers": [{"name": "c", "image": "x", **container}]}


@pytest.mark.parametrize(
    ("spec", "meta", "rule"),
    [
        ({**_pod(), "hostPID": True}, {}, "hostNamespaces"),
        ({**_pod(), "hostIPC": True}, {}, "hostNamespaces"),
        (_pod(securityContext={"privileged": True}), {}, "privileged"),
        (_pod(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}), {}, "capabilities_baseline"),
        ({**_pod(), "volumes": [{"name": "h", "hostPath": {"path": "/sys"}}]}, {}, "hostPathVolumes"),
        (_pod(ports=[{"containerPort": 80, "hostPort": 80}]), {}, "hostPorts"),
        (_pod(securityContext={"seLinuxOptions": {"type": "spc_t"}}), {}, "seLinuxOptions"),
        (_pod(securityContext={"seLinuxOptions": {"user": "root"}}), {}, "seLinuxOptions"),
        (_pod(securityContext={"procMount": "Unmasked"}), {}, "procMount"),
        (_pod(securityContext={"seccompProfile": {"type": "Unconfined"}}), {}, "seccompProfile"),
        ({**_pod(), "securityContext": {"seccompProfile": {"type": "Unconfined"}}}, {}, "seccompProfile"),
        (
            {**_pod(), "securityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1"}]}},
            {},
            "sysctls",
        ),
        (_pod(securityContext={"appArmorProfile": {"type": "Unconfined"}}), {}, "appArmorProfile"),
        (
            _pod(),
            {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}},
            "appArmor",
        ),
        (_pod(securityContext={"windowsOptions": {"hostProcess": True}}), {}, "windowsHostProcess"),
        # Init (native sidecar) and ephemeral containers are checked like the others.
        (
            {
                **_pod(),
                "initContainers": [
                    {"name": "rxdm", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}
                ],
            },
            {},
            "capabilities_baseline: container rxdm",
        ),
        (
            {**_pod(), "ephemeralContainers": [{"name": "dbg", "securityContext": {"privileged": True}}]},
            {},
            '"dbg"',
        ),
    ],
)
def test_each_baseline_control_refuses_its_field(spec, meta, rule):
    found = violations(meta, spec, "baseline", V133)
    assert any(rule in v for v in found), found
    assert violations(meta, spec, "privileged", V133) == []


def test_baseline_admits_the_plain_training_pod_shape():
    spec = {
        **_pod(securityContext={"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"]}}),
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {"name": "c", "configMap": {"name": "x"}},
        ],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    assert violations({}, spec, "baseline", V133) == []


def test_safe_sysctls_and_selinux_types_follow_the_kubernetes_version():
    spec = {
        **_pod(),
        "securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}]},
    }
    assert violations({}, spec, "baseline", (1, 32)) == []
    assert any(v.startswith("sysctls") for v in violations({}, spec, "baseline", (1, 31)))
    engine = _pod(securityContext={"seLinuxOptions": {"type": "container_engine_t"}})
    assert violations({}, engine, "baseline", (1, 31)) == []
    assert violations({}, engine, "baseline", (1, 30))


def test_restricted_adds_its_own_controls():
    hardened = {
        **_pod(
            securityContext={
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            }
        ),
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumes": [{"name": "c", "configMap": {"name": "x"}}],
    }
    assert violations({}, hardened, "restricted", V133) == []
    found = " ".join(
        violations(
            {},
            {**_pod(), "volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}]},
            "restricted",
            V133,
        )
    )
    for rule in (
        "restrictedVolumes: volume types nfs",
        "allowPrivilegeEscalation",
        "runAsNonRoot",
        "seccompProfile_restricted",
        "capabilities_restricted",
    ):
        assert rule in found, found


# ---- JobSet's webhook -------------------------------------------------------------------------------


def _jobset(change) -> list[str]:
    def apply(inputs: dict) -> None:
        change(inputs)

    return admission(edit(job_plan(), kind("JobSet"), apply))


def test_jobset_rule_names_with_dashes_are_refused():
    """Defect 1 as verify sees it: the old rule names fail JobSet's webhook (it fails closed)."""

    def dashes(js: dict) -> None:
        js["spec"]["failurePolicy"]["rules"][0]["name"] = "config-error-fails-the-jobset"

    found = _jobset(dashes)
    assert any(
        "failure-policy rule name 'config-error-fails-the-jobset' must be 1-128 characters" in x
        and "jobset@v0.12.0:pkg/webhooks/jobset_webhook.go" in x
        for x in found
    ), found


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda js: js["spec"]["failurePolicy"]["rules"][1].update(name="ConfigErrorFailsJobSet"),
            "not unique",
        ),
        (
            lambda js: js["spec"]["failurePolicy"]["rules"][0].update(onJobFailureReasons=["Evicted"]),
            "'Evicted' is not a Job failure reason",
        ),
        (
            lambda js: js["spec"]["failurePolicy"]["rules"][0].update(action="RestartJob"),
            "RestartJob feature gate",
        ),
        (
            lambda js: js["spec"]["failurePolicy"]["rules"][0].update(targetReplicatedJobs=["leaders"]),
            "targets replicatedJob 'leaders'",
        ),
        (
            lambda js: js["spec"]["failurePolicy"].update(restartStrategy="InPlaceRestart"),
            "InPlaceRestart feature gate",
        ),
        (lambda js: js["spec"]["network"].update(subdomain="Gpt_small"), "network.subdomain 'Gpt_small'"),
        (lambda js: js["metadata"].update(name="a" * 50), "pod name"),
        (lambda js: js["metadata"].update(name="1gpt"), "child Job name '1gpt-workers-0'"),
        (lambda js: js["spec"]["replicatedJobs"][0].update(groupName="Group"), "groupName 'Group'"),
        (
            lambda js: js["spec"]["replicatedJobs"][0].update(dependsOn=[{"name": "x", "status": "Ready"}]),
            "sets dependsOn",
        ),
        (
            lambda js: js["spec"].update(successPolicy={"operator": "All", "targetReplicatedJobs": ["x"]}),
            "successPolicy targets",
        ),
        (
            lambda js: js["metadata"]["labels"].update({W.QUEUE_LABEL: "Research_Queue"}),
            "is not a DNS-1123 subdomain",
        ),
        (lambda js: js["metadata"]["labels"].update({W.MAX_EXEC_LABEL: "0"}), "must be a positive integer"),
        (
            lambda js: (
                js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
                .setdefault("annotations", {})
                .update(
                    {
                        "kueue.x-k8s.io/podset-required-topology": "a",
                        "kueue.x-k8s.io/podset-preferred-topology": "b",
                    }
                )
            ),
            "more than one topology annotation",
        ),
    ],
)
def test_each_jobset_and_kueue_job_rule_is_found_by_name(change, expected):
    found = _jobset(change)
    assert any(expected in x for x in found), found


def test_a_40_character_job_with_11_nodes_has_a_preflight_the_jobset_webhook_refuses():
    """`<name>-nccl-workers-0-10-abcde` is 64 characters: the preflight of a maximal job name cannot run."""
    js = {
        "metadata": {"name": "a" * 40 + "-nccl"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {"spec": {"completions": 11, "parallelism": 11}},
                }
            ]
        },
    }
    assert any("pod name" in x and "(64 characters" in x for x in W.jobset(js))
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = 10
    assert W.jobset(js) == []


# ---- Kueue's batch/v1 Job webhook -------------------------------------------------------------------


def _job(annotations: dict, **spec: object) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "elastic", "namespace": "research", "annotations": annotations},
        "spec": {
            "parallelism": 4,
            "completions": 4,
            "completionMode": "Indexed",
            **spec,
            "template": {"metadata": {}, "spec": _pod()},
        },
    }


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (_job({W.MIN_PARALLELISM: "4"}), "job-min-parallelism=4 must be between 1 and 3"),
        (_job({W.MIN_PARALLELISM: "0"}), "job-min-parallelism=0 must be between 1 and 3"),
        (_job({W.COMPLETIONS_EQUAL: "true"}, completionMode="NonIndexed"), "needs an Indexed Job"),
        (_job({W.COMPLETIONS_EQUAL: "true"}, completions=8), "completions equal to parallelism"),
        (_job({W.COMPLETIONS_EQUAL: "yes"}), "is not a bool"),
    ],
)
def test_kueue_refuses_bad_partial_admission_annotations_on_a_team_job(job, expected):
    found = admission(plus(plan("aws-dev"), job))
    assert any(x.startswith("admission: Job research/elastic:") and expected in x for x in found), found
    ok = _job({W.MIN_PARALLELISM: "2", W.COMPLETIONS_EQUAL: "true"})
    assert not admission(plus(plan("aws-dev"), ok))


# ---- Kueue's ClusterQueue, Cohort and ResourceFlavor webhooks ----------------------------------------


def _gpu_quota(spec: dict) -> dict:
    return spec["resourceGroups"][0]["flavors"][0]["resources"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: _gpu_quota(s).reverse(), "must match in order"),
        (
            lambda s: s.pop("cohortName") and _gpu_quota(s)[-1].update(lendingLimit="1"),
            "lendingLimit must be nil without a cohort",
        ),
        (lambda s: _gpu_quota(s)[-1].update(lendingLimit="100000"), "exceeds nominalQuota"),
        (lambda s: _gpu_quota(s)[-1].update(nominalQuota="-1"), "nominalQuota is negative"),
        (
            lambda s: s["resourceGroups"][0]["flavors"].append(dict(s["resourceGroups"][0]["flavors"][0])),
            "appears in more than one place",
        ),
        (
            lambda s: s["resourceGroups"][0]["coveredResources"].append("bad resource"),
            "is not a qualified name",
        ),
        (
            lambda s: s.update(
                preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
            ),
            "validatePreemption",
        ),
        (
            lambda s: s.update(
                flavorFungibility={"preference": "BorrowingOverPreemption", "whenCanBorrow": "MayStopSearch"}
            ),
            "flavorFungibility.preference",
        ),
        (
            lambda s: s.update(
                admissionChecksStrategy={"admissionChecks": [{"name": "prov", "onFlavors": ["nope"]}]}
            ),
            "names flavor nope",
        ),
    ],
)
def test_each_cluster_queue_rule_is_found_by_name(change, expected):
    found = admission(edit(plan("aws-dev"), kind("ClusterQueue"), lambda i: change(i["spec"])))
    assert any(
        x.startswith("admission: ClusterQueue research:") and expected in x and "clusterqueue_webhook.go" in x
        for x in found
    ), found


def test_cohort_limits_need_a_parent_and_flavor_taints_must_be_unique():
    cohort = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "org"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "2"}
                            ],
                        }
                    ],
                }
            ]
        },
    }
    found = admission(plus(plan("aws-dev"), cohort))
    assert any("Cohort org:" in x and "borrowingLimit must be nil without a cohort" in x for x in found), (
        found
    )

    def twice(inputs: dict) -> None:
        taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
        inputs["spec"]["nodeTaints"] = [taint, dict(taint)]
        inputs["spec"].setdefault("nodeLabels", {})["bad key!"] = "x"

    found = admission(edit(plan("aws-dev"), kind("ResourceFlavor"), twice))
    assert any("nodeTaints repeat nvidia.com/gpu:NoSchedule" in x for x in found), found
    assert any("nodeLabels bad key!=x is not a valid label" in x for x in found), found


def test_quantities_compare_across_suffixes():
    assert (
        W.quantity("1Gi") == 1024**3 and W.quantity("500m") * 2 == 1 and W.quantity("1e3") == W.quantity("1k")
    )


def test_the_tenancy_component_and_verify_share_the_baseline_capability_list():
    from components.incluster.tenancy import BASELINE_CAPABILITIES
    from infra.verify import facts as F

    assert set(F.facts()["admission"]["podSecurity"]["baselineCapabilities"]) == BASELINE_CAPABILITIES


def test_a_user_namespace_pod_may_unmask_proc_only_from_kubernetes_1_35():
    spec = {**_pod(securityContext={"procMount": "Unmasked"}), "hostUsers": False}
    assert any(v.startswith("procMount") for v in violations({}, spec, "baseline", (1, 34)))
    assert violations({}, spec, "baseline", (1, 35)) == []


def test_probes_and_hooks_may_not_name_a_host_from_kubernetes_1_34():
    spec = _pod(
        livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}},
        lifecycle={"preStop": {"tcpSocket": {"host": "h", "port": 1}}},
    )
    found = violations({}, spec, "baseline", (1, 34))
    assert found == ["hostProbesAndHostLifecycle: probe or lifecycle hosts c:10.0.0.1, c:h"], found
    assert violations({}, spec, "baseline", (1, 33)) == []
