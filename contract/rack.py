"""Rack-scale GPUs (GB200/GB300 NVL72): the names the platform, the job builder, verify and the docs share.

A node of an NVL72 rack has 4 GPUs; 18 nodes share one NVLink domain of 72 GPUs. GPUs on different nodes
talk over NVLink only inside a ComputeDomain of the NVIDIA DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu,
chart dra-driver-nvidia-gpu): a job creates one ComputeDomain, the driver's controller creates the
ResourceClaimTemplate the ComputeDomain names, and every GPU container claims a channel from it beside its
`nvidia.com/gpu` request (../shared/FACTS.md, "NVL72").

Sources (each value below): dra-driver-nvidia-gpu@v0.4.1
- deployments/helm/dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomains.yaml: group
  resource.nvidia.com, version v1beta1, kind ComputeDomain; spec.channel.resourceClaimTemplate.name
  (required), spec.channel.allocationMode (Single|All), spec.numNodes; the spec is immutable;
- deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml: the DeviceClasses
  compute-domain-default-channel.nvidia.com (a workload's channel) and compute-domain-daemon.nvidia.com
  (the driver's own IMEX daemon pods);
- GPU Feature Discovery labels each rack node with its NVLink clique: `nvidia.com/gpu.clique`
  (<cluster UUID>.<clique id>), the same value on every node of one NVLink domain.

Standard library only, as all of contract/.
"""

from __future__ import annotations

COMPUTE_DOMAIN_API_VERSION = "resource.nvidia.com/v1beta1"
COMPUTE_DOMAIN_KIND = "ComputeDomain"

# The DeviceClass a training pod's channel claim names, and the one of the driver's IMEX daemons.
CHANNEL_DEVICE_CLASS = "compute-domain-default-channel.nvidia.com"
DAEMON_DEVICE_CLASS = "compute-domain-daemon.nvidia.com"

# The node label whose value names a node's NVLink clique (GPU Feature Discovery).
CLIQUE_LABEL = "nvidia.com/gpu.clique"

# The logical resource Kueue counts a channel claim as: Kueue >= 0.18 maps every DeviceClass a claim names
# through `resources.deviceClassMappings` of its configuration and never admits a workload whose class is
# not mapped (kueue#10504); the ClusterQueues that admit rack jobs need quota for this name.
KUEUE_CHANNEL_RESOURCE = "compute-domain.nvidia.com/channel"

# The logical resource Kueue counts a pool's RDMA NICs as where a network DRA driver hands them to pods
# through a DeviceClass (the backend names the class: components/outputs.py RackDomain.nic_device_class).
# Kueue maps that class to this name (`deviceClassMappings`, several mappings allowed: kueue v0.19.2
# pkg/config/validation.go validateDeviceClassMappings) and counts each ExactCount request as its `count`
# (pkg/dra/claims.go countDevicesPerClass); ClusterQueues admitting such a pool's jobs need quota for it.
KUEUE_RDMA_NIC_RESOURCE = "trainplane.dev/rdma-nic"
