"""The specs of trainplane's Kueue objects (kueue.x-k8s.io/v1beta2, Kueue 0.19.2), built from the pools.

- ResourceFlavor per (GPU kind, capacity kind): the labels every pool of the group carries, tolerations
  for their taints, and `topologyName` when the group can use topology-aware scheduling (placement.py).
- Topology per distinct set of levels of those flavors.
- ProvisioningRequestConfig and AdmissionCheck per ProvisioningRequest class of the pools (GKE queued
  provisioning), checked on the flavors of those pools only (ClusterQueue `admissionChecksStrategy`).
- ClusterQueue per team: the flavors in the platform's capacity order (placement.CAPACITY_ORDER), so Kueue
  falls back from reserved capacity to on-demand to DWS to spot.

Quota split across teams (contract/quota.py): each flavor's GPUs (its pools' maxNodes x GPUs per node) are
apportioned among the teams in proportion to their gpuQuota, so the nominal quotas of one flavor never add
up past the GPUs behind it: Kueue takes the sum of a cohort's nominal quotas as what exists (kueue v0.19.2
apis/kueue/v1beta2/clusterqueue_types.go ResourceQuota.nominalQuota) and re-admits to a flavor while it has
quota (kueue#2560), so an overcommitted flavor holds jobs Pending instead of falling back. A team's unused
share is lent through the cohort; a team borrows up to its own gpuQuota on a flavor (borrowingLimit).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from components.bundle import NodePoolInfo
from components.incluster.placement import common_labels, flavor_groups, flavor_levels, topology_name
from components.incluster.tenancy import TEAM_LABEL, team_quota
from components.spec import QueueingSpec, TeamSpec
from contract.quota import borrowing_limit, gpu_shares

KUEUE_API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
# Kueue's built-in ProvisioningRequest admission check controller (kueue v0.19.2
# pkg/controller/admissionchecks/provisioning/constants.go ControllerName); GA and on by default since 0.14
# (site/content/en/docs/concepts/admission_check/provisioning_request.md), so no feature gate is set.
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


def device_class_mappings(pools: Sequence[NodePoolInfo]) -> list[dict[str, Any]]:
    """Kueue's `resources.deviceClassMappings` for the pools' DRA claims: the ComputeDomain channel class as
    one logical resource when a pool is a rack (NodePoolInfo.rack).

    Kueue >= 0.18 never admits a workload whose claim names an unmapped DeviceClass (kueue#10504). Schema:
    kueue v0.19.2 apis/config/v1beta2/configuration_types.go Resources.DeviceClassMappings (name,
    deviceClassNames); pkg/config/validation.go validateDeviceClassMappings: both names must be qualified
    names (IsLabelKey), at most 16 mappings of at most 8 classes. Kueue counts each request of a claim as its
    `exactly.count` devices of its class (pkg/dra/claims.go countDevicesPerClass; AllocationMode All is
    refused), per pod: a training pod's one channel is 1 of KUEUE_CHANNEL_RESOURCE. Where a rack's RDMA NICs
    come from a network DRA driver (RackDomain.nic_device_class), that class is mapped too, as its own
    logical resource (KUEUE_RDMA_NIC_RESOURCE): a pod's NIC claim counts `nics_per_node`.
    """
    racks = sorted(
        {(p.rack.kueue_resource, p.rack.channel_device_class) for p in pools if p.rack is not None}
        | {
            (p.rack.nic_kueue_resource, p.rack.nic_device_class)
            for p in pools
            if p.rack is not None and p.rack.nic_device_class is not None
        }
    )
    by_name: dict[str, list[str]] = {}
    for name, cls in racks:
        by_name.setdefault(name, []).append(cls)
    return [{"name": n, "deviceClassNames": classes} for n, classes in by_name.items()]


def manager_config(queueing: QueueingSpec | None = None, pools: Sequence[NodePoolInfo] = ()) -> str:
    """Kueue's Configuration (chart value managerConfig.controllerManagerConfigYaml) with waitForPodsReady.

    Topology-aware scheduling (beta, on by default since 0.14) and the ProvisioningRequest admission check
    (GA) need no feature gate in 0.19.2 (pkg/features/kube_features.go).
    """
    queueing = queueing or QueueingSpec()
    ready = queueing.pods_ready
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # A job is admitted whole or not at all: if its pods are not all running within the timeout, Kueue
        # evicts and requeues it, and admits nothing else meanwhile (blockAdmission), so two half-started
        # multi-node jobs cannot deadlock on each other's GPUs. The timeout covers a GPU node from zero
        # (at least Kueue's own 30m default); the recovery timeout, after a running job lost a pod, covers
        # its replacement node from zero (spec.PodsReadySpec).
        "waitForPodsReady": {
            "timeout": f"{ready.timeout_minutes}m",
            "recoveryTimeout": f"{ready.recovery_minutes}m",
            "blockAdmission": block_admission(queueing),
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 3600,
            },
        },
        # Only the job kinds the platform runs: JobSet for fixed-size jobs, batch/v1 Job for elastic ones
        # (framework names from kueue v0.19.2 pkg/controller/jobs/*/..._controller.go FrameworkName).
        # Without `pod` the chart renders its pod webhook with failurePolicy Ignore
        # (templates/webhook/manifests.yaml), so a Kueue outage cannot block pod creation of the GPU
        # operator, monitoring or anything else.
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        # Kueue's job webhooks (failurePolicy Fail) see only the team namespaces, not the operators'
        # (chart: namespaceSelector of every job webhook = managedJobsNamespaceSelector when set).
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
    }
    if queueing.fleet_manager:
        config["multiKueue"] = multikueue_config(queueing.fleet_dispatcher)
    mappings = device_class_mappings(pools)
    if mappings:
        config["resources"] = {"deviceClassMappings": mappings}
    return yaml.safe_dump(config, sort_keys=False)


def block_admission(queueing: QueueingSpec) -> bool:
    """Kueue's waitForPodsReady.blockAdmission (kueue v0.19.2 apis/config/v1beta2/configuration_types.go
    WaitForPodsReady.BlockAdmission: "the cluster queue will block admissions for all subsequent jobs until
    the jobs reach the PodsReady=true condition"): `podsReady.blockAdmission`, else on, except on a fleet
    manager. A manager's pods run on the workers, so there it would hold every team's jobs behind one job
    that no worker admits (or that waits in a worker's queue) until the timeout evicts it."""
    chosen = queueing.pods_ready.block_admission
    return chosen if chosen is not None else not queueing.fleet_manager


# Kueue's MultiKueue dispatchers (kueue v0.19.2 apis/config/v1beta2/configuration_types.go
# MultiKueueDispatcherModeIncremental / MultiKueueDispatcherModeAllAtOnce). Kueue's default is AllAtOnce
# (apis/config/v1beta2/defaults.go), so the name is always written.
MULTIKUEUE_DISPATCHERS = {
    "Incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
    "AllAtOnce": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
}


# Workers the Incremental dispatcher nominates per round (kueue v0.19.2 apis/config/v1beta2/
# configuration_types.go MultiKueue.IncrementalDispatcherConfig.StepSize, "Minimum value is 1. If not set, it
# defaults to 3"; read when the gate MultiKueueIncrementalDispatcherConfig is on, beta and on by default in
# 0.19: pkg/features/kube_features.go). With 3, a fleet of 3 workers or fewer gets its job on all of them in
# the first round and the first to admit wins, whatever the order; with 1, the MultiKueueConfig's order
# (reserved capacity first) is the order the workers are asked, one per round (incrementalDispatcherRoundTimeout,
# 5 minutes, when a worker neither admits nor rejects it).
INCREMENTAL_STEP_SIZE = 1


def multikueue_config(dispatcher: str) -> dict[str, Any]:
    """The Configuration's `multiKueue` block of a fleet manager. The MultiKueue feature gate is beta and on
    by default since 0.9 (kueue v0.19.2 pkg/features/kube_features.go), so no gate is set. The Incremental
    dispatcher nominates INCREMENTAL_STEP_SIZE workers per 5-minute round (Kueue's default is 3:
    workloaddispatcher/incrementaldispatcher.go DefaultStepSize, incrementalDispatcherRoundTimeout) in the
    MultiKueueConfig's order, since the gate MultiKueueIncrementalDispatcherRespectConfigOrder is on by
    default in 0.19 (else it sorts by name)."""
    return {
        # Kueue's defaults, stated (apis/config/v1beta2/defaults.go): a GC pass for orphaned worker copies
        # every minute; the origin label value marking what this manager created on a worker; a workload
        # stays admitted for 15 minutes after its worker is lost before it is dispatched elsewhere.
        "gcInterval": "1m",
        "origin": "multikueue",
        "workerLostTimeout": "15m",
        "dispatcherName": MULTIKUEUE_DISPATCHERS[dispatcher],
        **(
            {"incrementalDispatcherConfig": {"stepSize": INCREMENTAL_STEP_SIZE}}
            if dispatcher == "Incremental"
            else {}
        ),
    }


@dataclass(frozen=True)
class Flavor:
    name: str
    gpus: int  # GPUs in the flavor at maximum scale
    node_labels: dict[str, str]
    tolerations: list[dict[str, str]]
    # Extended resources of the flavor's nodes (bundle NodePoolInfo.extended_resources), by name:
    # the count at maximum scale, and the most any pool of the flavor has per GPU.
    extended: dict[str, int] = field(default_factory=dict)
    extended_per_gpu: dict[str, float] = field(default_factory=dict)
    # Topology levels Kueue places its jobs by (placement.flavor_levels); () without TAS.
    levels: tuple[str, ...] = ()
    # ProvisioningRequest classes of its pools (Kueue asks the autoscaler for nodes before admission).
    provisioning_classes: tuple[str, ...] = ()

    def extended_quota(self, resource: str, gpu_quota: int) -> int:
        """A team's share of `resource`: enough for `gpu_quota` GPUs on the flavor's densest pool, up to
        what the flavor has. A job pod requests all of its node's devices, so the share follows GPUs."""
        if resource not in self.extended:
            return 0
        return min(self.extended[resource], math.ceil(gpu_quota * self.extended_per_gpu[resource]))

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodeLabels": self.node_labels}
        if self.tolerations:
            out["tolerations"] = self.tolerations
        if self.levels:
            out["topologyName"] = topology_name(self.levels)
        return out


def flavors(pools: Sequence[NodePoolInfo]) -> list[Flavor]:
    """The platform's GPU flavors, in the order every ClusterQueue lists them."""
    out = []
    for name, members in flavor_groups(pools):
        taints = {(t.key, t.value, t.effect) for m in members for t in m.taints}
        extended: dict[str, int] = {}
        per_gpu: dict[str, float] = {}
        for m in members:
            assert isinstance(m, NodePoolInfo)
            for res, count in m.extended_resources.items():
                extended[res] = extended.get(res, 0) + count * m.max_nodes
                if m.gpus_per_node:
                    per_gpu[res] = max(per_gpu.get(res, 0.0), count / m.gpus_per_node)
            if m.rack is not None and m.gpus_per_node:
                # One ComputeDomain channel per training pod, one pod per node (device_class_mappings): the
                # flavor holds as many channels as nodes. Quota only: pods claim it, never request it.
                res = m.rack.kueue_resource
                extended[res] = extended.get(res, 0) + m.max_nodes
                per_gpu[res] = max(per_gpu.get(res, 0.0), 1 / m.gpus_per_node)
                if m.rack.nic_device_class is not None and m.rack.nics_per_node:
                    # Each pod's RDMA NIC claim: all of its node's NICs (compute_domain.py nic_claim_template).
                    nic = m.rack.nic_kueue_resource
                    extended[nic] = extended.get(nic, 0) + m.rack.nics_per_node * m.max_nodes
                    per_gpu[nic] = max(per_gpu.get(nic, 0.0), m.rack.nics_per_node / m.gpus_per_node)
        out.append(
            Flavor(
                name=name,
                gpus=sum(getattr(m, "gpus_per_node", 0) * m.max_nodes for m in members),
                # Labels every node of the group carries (pool-specific labels drop out when pools share a
                # flavor); Kueue adds them to the pod's nodeSelector when it admits a job with the flavor.
                node_labels=common_labels(members),
                tolerations=[
                    {"key": k, "operator": "Equal", "value": v, "effect": e} for k, v, e in sorted(taints)
                ],
                extended=extended,
                extended_per_gpu=per_gpu,
                levels=flavor_levels(members),
                provisioning_classes=tuple(
                    sorted({m.provisioning_class for m in members if m.provisioning_class})
                ),
            )
        )
    return out


def topologies(fl: Sequence[Flavor]) -> dict[str, dict[str, Any]]:
    """Topology name -> spec, one per distinct set of levels of the flavors."""
    return {
        topology_name(f.levels): {"levels": [{"nodeLabel": label} for label in f.levels]}
        for f in fl
        if f.levels
    }


# The node label a ProvisioningRequest class puts on the nodes it provisions for one request, and the key of
# ProvisioningRequest.status.provisioningClassDetails that holds its value. Kueue copies that value into the
# workload's nodeSelector once the request is provisioned (ProvisioningRequestConfig podSetUpdates; kueue
# v0.19.2 pkg/controller/admissionchecks/provisioning/controller.go podSetUpdates), so one workload's pods
# land only on the nodes requested for it, not on another's. GKE queued provisioning (the class
# components/gcp/capacity.py QUEUED_PROVISIONING_CLASS names): label autoscaling.gke.io/provisioning-request
# from detail ResizeRequestName (kueue#9048, a Kueue maintainer's GKE workload-isolation example; Google's
# xpk builds its dws-config the same way).
PROVISIONING_NODE_LABELS = {
    "queued-provisioning.gke.io": ("autoscaling.gke.io/provisioning-request", "ResizeRequestName"),
}


def provisioning_check_name(provisioning_class: str) -> str:
    """The AdmissionCheck (and its ProvisioningRequestConfig) of one ProvisioningRequest class."""
    return "provreq-" + re.sub(r"[^a-z0-9-]", "-", provisioning_class.lower())[:50].strip("-")


def provisioning_config_spec(provisioning_class: str) -> dict[str, Any]:
    """ProvisioningRequestConfig: ask the autoscaler for the job's GPU nodes, all at once, before admission."""
    spec: dict[str, Any] = {
        "provisioningClassName": provisioning_class,
        # Only GPU requests go into the ProvisioningRequest: the nodes are sized by their GPUs.
        "managedResources": [GPU],
        # Kueue's defaults, stated (CRD provisioningrequestconfigs retryStrategy): a failed request is
        # retried 3 times, min(60^n s, 30 min) apart; each failure releases the workload's quota and sends
        # it through admission again.
        "retryStrategy": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800},
    }
    if provisioning_class in PROVISIONING_NODE_LABELS:
        label, detail = PROVISIONING_NODE_LABELS[provisioning_class]
        spec["podSetUpdates"] = {"nodeSelector": [{"key": label, "valueFromProvisioningClassDetail": detail}]}
    return spec


def admission_check_spec(provisioning_class: str) -> dict[str, Any]:
    return {
        "controllerName": PROVISIONING_CONTROLLER,
        "parameters": {
            "apiGroup": "kueue.x-k8s.io",
            "kind": "ProvisioningRequestConfig",
            "name": provisioning_check_name(provisioning_class),
        },
    }


def admission_checks_strategy(fl: Sequence[Flavor]) -> dict[str, Any] | None:
    """One ProvisioningRequest check per class, on the flavors of its pools only."""
    by_class: dict[str, list[str]] = {}
    for f in fl:
        for cls in f.provisioning_classes:
            by_class.setdefault(cls, []).append(f.name)
    if not by_class:
        return None
    return {
        "admissionChecks": [
            {"name": provisioning_check_name(cls), "onFlavors": names}
            for cls, names in sorted(by_class.items())
        ]
    }


def cluster_queue_spec(
    queueing: QueueingSpec,
    pools: Sequence[NodePoolInfo],
    team: TeamSpec,
    fl: list[Flavor],
    teams: Sequence[TeamSpec] | None = None,
) -> dict[str, Any]:
    """The team's ClusterQueue; `teams` (all of the cohort's, default: this one alone) share each flavor."""
    quota = team_quota(pools, team)
    cpu, memory = quota["requests.cpu"], quota["requests.memory"]
    everyone = list(teams) if teams is not None else [team]

    def resource(name: str, nominal: str, borrow: int | None = None) -> dict[str, Any]:
        r: dict[str, Any] = {"name": name, "nominalQuota": nominal}
        if not queueing.borrowing:
            r["borrowingLimit"] = "0"
        elif borrow is not None:
            r["borrowingLimit"] = str(borrow)
        return r

    def flavor_resources(f: Flavor) -> list[dict[str, Any]]:
        share = gpu_shares(f.gpus, [(t.name, t.gpu_quota) for t in everyone])[team.name]
        # What the team may hold of the flavor in all, its own share plus what it borrows: its gpuQuota, up
        # to the flavor's GPUs (its namespace ResourceQuota would not let more of its pods start anyway).
        reach = min(team.gpu_quota, f.gpus)
        return [
            resource("cpu", cpu),
            resource("memory", memory),
            resource(GPU, str(share), borrowing_limit(share, reach)),
            *(
                resource(
                    r,
                    str(f.extended_quota(r, share)),
                    borrowing_limit(f.extended_quota(r, share), f.extended_quota(r, reach)),
                )
                for r in extended
            ),
        ]

    # Kueue admits a workload only if its ClusterQueue covers every resource its pods request (kueue
    # flavorassigner), so every extended resource of any flavor is covered; a flavor without it gets 0.
    extended = sorted({r for f in fl for r in f.extended})

    spec: dict[str, Any] = {
        "cohortName": queueing.cohort,
        # Only the team's own namespace feeds its queue.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.name}},
        "queueingStrategy": "BestEffortFIFO",
        # Borrowed GPUs are returned when their owner needs them.
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", GPU, *extended],
                # In the platform's capacity order (placement.CAPACITY_ORDER): Kueue tries the flavors of
                # a resource group in this order and takes the first that fits (flavorFungibility
                # defaults: whenCanBorrow MayStopSearch, whenCanPreempt TryNextFlavor).
                "flavors": [{"name": f.name, "resources": flavor_resources(f)} for f in fl],
            }
        ],
    }
    checks = admission_checks_strategy(fl)
    if checks is not None:
        spec["admissionChecksStrategy"] = checks
    return spec
