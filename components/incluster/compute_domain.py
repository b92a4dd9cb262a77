"""A training job on a rack-scale pool (GB200/GB300 NVL72): its ComputeDomain, its pods' channel claim and
their placement within one NVLink clique. Pulumi-free: the job builder (job_pod.py, training_job.py),
`trainplane plan` and verify (infra/verify/checks/rack_jobs.py) read the same functions.

What a job on a pool with `NodePoolInfo.rack` gets, each value from kubernetes-sigs/dra-driver-nvidia-gpu
at v0.4.1 (the chart the platform installs) unless said otherwise:
- one ComputeDomain in the job's namespace, named after the job (`compute_domain_name`), naming a
  ResourceClaimTemplate of its own (`claim_template_name`). The driver's controller creates that template
  in the ComputeDomain's namespace with the ComputeDomain's `spec.channel.resourceClaimTemplate.name`,
  DeviceClass compute-domain-default-channel.nvidia.com (cmd/compute-domain-controller/computedomain.go,
  `resourceClaimTemplateManager.Create(ctx, cd.Namespace, cd.Spec.Channel.ResourceClaimTemplate.Name, cd)`;
  resourceclaimtemplate.go WorkloadResourceClaimTemplateManager.Create), and deletes it with the
  ComputeDomain (resourceclaimtemplate.go Delete, by the ComputeDomain's UID). The job never creates it.
- `numNodes` 0: api/nvidia.com/resource/v1beta1/computedomain.go ComputeDomainSpec.NumNodes: "With
  featureGates.IMEXDaemonsWithDNSNames=true (the default), this is recommended to be set to zero"; a
  non-zero value only drives the ComputeDomain's status, and the field is deprecated. The gate defaults to
  true since 0.2 (pkg/featuregates/featuregates.go). The CRD allows 0 (minimum 0, default 0:
  deployments/helm/dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomains.yaml).
- `allocationMode` Single (the CRD's default, written out): one IMEX channel per pod, which is what the
  driver's own multi-node examples use (demo/specs/imex/nvbandwidth-test-job-1.yaml); All would hand every
  channel of the IMEX domain to each pod.
- every GPU container claims the channel (`resources.claims: [{name}]`) beside `nvidia.com/gpu`, and the
  pod lists the claim (`resourceClaims: [{name, resourceClaimTemplateName}]`), as in
  demo/specs/imex/nvbandwidth-test-job-1.yaml. Both are core/v1 fields in Kubernetes 1.34
  (kubernetes/api@v0.34.10 core/v1/types.go: PodSpec.ResourceClaims []PodResourceClaim with
  ResourceClaimTemplateName; ResourceRequirements.Claims []ResourceClaim{Name, Request}), and the render is
  validated against the pod template schema of the JobSet CRD (kubernetes-sigs/jobset@v0.12.0). Pod
  Security allows both at every level: none of the baseline or restricted checks reads them
  (kubernetes/pod-security-admission@v0.34.9 policy/check_*.go: no check looks at resourceClaims or
  container resources; restrictedVolumes sees only volumes).
- placement: Kueue TAS `podset-required-topology` at the clique label (contract/rack.py CLIQUE_LABEL)
  when the job's nodes fit one rack (`RackDomain.nodes`), else at the level just above the clique: the job
  spans racks there, and says so (`rack_plan_line`). A pool whose topology has no level above the clique
  cannot hold a larger job (check_job refuses it: components/spec/job_pools.py).
- RDMA NICs through a network DRA driver (`RackDomain.nic_device_class`, e.g. GKE managed DRANET): the job
  also gets a ResourceClaimTemplate of its own in its namespace (`nic_claim_template`), created before its
  pods like the ComputeDomain, with one request of `nics_per_node` devices of that class (allocationMode
  ExactCount: Kueue 0.19.2 refuses All, kubernetes-sigs/kueue@v0.19.2 pkg/dra/claims.go
  countDevicesPerClass), and every GPU container claims it beside the channel, as
  GoogleCloudPlatform/cluster-toolkit@v1.95.0 examples/gke-a4x/nccl-jobset-example.yaml does (pod
  `resourceClaims` [compute-domain-channel, rdma], container `resources.claims` naming both) and
  examples/gke-a4x-max-bm/nccl-jobset-example.yaml (its template: ExactCount, count 8). Without the claim
  the pod gets no RDMA NIC and NCCL falls back to the node's TCP network. Schema: kubernetes/api@v0.34.9
  resource/v1/types.go ResourceClaimTemplateSpec{metadata, spec: ResourceClaimSpec{devices: DeviceClaim{
  requests: []DeviceRequest{name, exactly: ExactDeviceRequest{deviceClassName, allocationMode, count}}}}}.
- NCCL: no environment. NCCL uses multi-node NVLink within one NVLink domain by itself when it is
  available (NCCL user guide, troubleshooting/performance_and_tuning.rst "Multi-node NVLink (MNNVL)
  issues": NCCL_MNNVL_ENABLE only needs setting to turn it off); the pool's fabric env (EFA/RDMA between
  racks) is applied as for any pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from components.incluster.placement import HOSTNAME_LABEL, level_above
from contract.rack import COMPUTE_DOMAIN_API_VERSION, COMPUTE_DOMAIN_KIND

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo, PlatformOutputs, RackDomain
    from components.spec import JobSpec

# The pod's name for its channel claim (the container's `resources.claims[].name` refers to it); the
# driver's example uses this name (demo/specs/imex/nvbandwidth-test-job-1.yaml).
CLAIM_NAME = "compute-domain-channel"
# allocationMode: the CRD's enum All|Single, default Single (see the module docstring).
ALLOCATION_MODE = "Single"
# The pod's name for its RDMA NIC claim, and the request's name in the job's template (the names
# cluster-toolkit@v1.95.0 uses: examples/gke-a4x/nccl-jobset-example.yaml `rdma`,
# modules/compute/gke-node-pool/resource-claim-template.yaml.tftpl `req-mrdma` without the vendor).
NIC_CLAIM_NAME = "rdma"
NIC_REQUEST_NAME = "rdma-nics"
RESOURCE_API_VERSION = "resource.k8s.io/v1"  # DRA GA (Kubernetes 1.34, the rack pools' floor)


def compute_domain_name(job_name: str) -> str:
    """The job's ComputeDomain: one per job, in its namespace (job names are at most 40 characters)."""
    return f"{job_name}-compute-domain"


def claim_template_name(job_name: str) -> str:
    """The ResourceClaimTemplate the driver's controller creates for the job's ComputeDomain."""
    return f"{job_name}-channel"


def job_rack(pools: Sequence[NodePoolInfo]) -> RackDomain | None:
    """The NVLink domain of the job's pools (check_pools makes every pool of a job agree on it)."""
    return next((p.rack for p in pools if p.rack is not None), None)


def compute_domain(job_name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The job's ComputeDomain manifest."""
    return {
        "apiVersion": COMPUTE_DOMAIN_API_VERSION,
        "kind": COMPUTE_DOMAIN_KIND,
        "metadata": {"name": compute_domain_name(job_name), "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "numNodes": 0,
            "channel": {
                "resourceClaimTemplate": {"name": claim_template_name(job_name)},
                "allocationMode": ALLOCATION_MODE,
            },
        },
    }


def nic_claim_template_name(job_name: str) -> str:
    """The job's own ResourceClaimTemplate of its pods' RDMA NICs."""
    return f"{job_name}-rdma"


def nic_claim_template(
    job_name: str, namespace: str, labels: dict[str, str], rack: RackDomain
) -> dict[str, Any] | None:
    """The job's ResourceClaimTemplate for the RDMA NICs of a node (module docstring); None when the rack's
    NICs come without a DRA claim."""
    if rack.nic_device_class is None or rack.nics_per_node <= 0:
        return None
    return {
        "apiVersion": RESOURCE_API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": nic_claim_template_name(job_name),
            "namespace": namespace,
            "labels": dict(labels),
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": NIC_REQUEST_NAME,
                            "exactly": {
                                "deviceClassName": rack.nic_device_class,
                                "allocationMode": "ExactCount",
                                "count": rack.nics_per_node,
                            },
                        }
                    ]
                }
            }
        },
    }


def _claims_nics(rack: RackDomain | None) -> bool:
    return rack is not None and rack.nic_device_class is not None and rack.nics_per_node > 0


def pod_resource_claims(job_name: str, rack: RackDomain | None = None) -> list[dict[str, str]]:
    """PodSpec.resourceClaims of a job pod on a rack pool: the channel, and the RDMA NICs where the rack's
    NICs are claimed."""
    out = [{"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template_name(job_name)}]
    if _claims_nics(rack):
        out.append({"name": NIC_CLAIM_NAME, "resourceClaimTemplateName": nic_claim_template_name(job_name)})
    return out


def container_claims(rack: RackDomain | None = None) -> list[dict[str, str]]:
    """ResourceRequirements.claims of every GPU container of a job pod on a rack pool."""
    return [{"name": CLAIM_NAME}] + ([{"name": NIC_CLAIM_NAME}] if _claims_nics(rack) else [])


def rack_level(levels: Sequence[str], rack: RackDomain, nodes: int) -> str | None:
    """The topology level a job of `nodes` pods must stay within on a rack pool: its clique when it fits one
    rack, else the level above the clique (it spans racks there); None when `levels` have no clique, or no
    level above it for a larger job."""
    if rack.clique_label not in levels:
        return None
    if nodes <= rack.nodes:
        return rack.clique_label
    above = level_above(levels, rack.clique_label)
    return above if above and above != HOSTNAME_LABEL else None


def racks_spanned(rack: RackDomain, nodes: int) -> int:
    return -(-nodes // rack.nodes)


def rack_plan_line(job: JobSpec, rack: RackDomain, level: str | None) -> str:
    """One line for `trainplane plan`: where the job's pods go on the rack pool."""
    nodes = job.nodes.max
    nics = (
        f"; {rack.nics_per_node} RDMA NICs per pod of {rack.nic_device_class} (ResourceClaimTemplate "
        f"{nic_claim_template_name(job.name)})"
        if _claims_nics(rack)
        else ""
    )
    if nodes <= rack.nodes:
        return (
            f"rack: {nodes} pods x {job.gpus_per_node} GPUs within one NVLink clique of {rack.nodes} nodes "
            f"({level or 'no topology level: placement is not enforced'}); ComputeDomain "
            f"{compute_domain_name(job.name)}{nics}"
        )
    return (
        f"rack: {nodes} pods span {racks_spanned(rack, nodes)} NVLink cliques of {rack.nodes} nodes, kept "
        f"within {level or 'no level (none above the clique)'}; NVLink inside each clique, the pool's "
        f"network between them; ComputeDomain {compute_domain_name(job.name)}{nics}"
    )


def rack_note(job: JobSpec, platform: PlatformOutputs) -> str | None:
    """`trainplane plan`'s line for a job on a rack-scale pool, None for any other job."""
    from components.incluster.placement import levels_of_pool_flavor, named_levels

    pools = [p for p in (platform.pool(n) for n in job.pools) if p is not None]
    rack = job_rack(pools)
    if rack is None:
        return None
    levels = levels_of_pool_flavor(pools[0], platform.node_pools)
    if job.topology is not None and job.topology.level:
        level = named_levels(levels).get(job.topology.level)
    else:
        level = rack_level(levels, rack, job.nodes.max)
    if level is None and all(p.max_nodes <= rack.nodes for p in pools):
        level = "no topology level needed: each of its pools is at most one rack"
    return rack_plan_line(job, rack, level)
