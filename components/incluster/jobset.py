"""The JobSet controller (kubernetes-sigs/jobset), the runtime of trainplane's fixed-size training jobs.

A JobSet restarts all of a job's pods together when one fails (its failure policy encodes the trainer's
exit contract, components/incluster/job_runtime.py) and gives every pod a stable DNS name through a
headless Service it creates itself. Kueue's `jobset.x-k8s.io/jobset` integration (kueue_objects.py
KUEUE_FRAMEWORKS) queues JobSets; the Kueue release waits for this one (queueing.py), so the JobSet CRD
exists when Kueue sets up its integrations.

Chart jobset 0.12.0 (oci://registry.k8s.io/jobset/charts/jobset; defaults in
../shared/reference/charts/jobset-0.12.0.values.yaml; templates read at kubernetes-sigs/jobset tag v0.12.0):
the CRD comes from the chart's crds/ directory; the controller issues its own webhook certificate
(`internalCertManagement`, certManager.enable false); its webhooks see JobSets and, by objectSelector
`jobset.sigs.k8s.io/jobset-name`, only JobSet pods, so no other workload depends on it. The controller
runs on the system nodes: it neither needs nor gets a toleration for the GPU taint.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.bundle import ClusterBundle
from components.incluster.chart_release import ChartInNamespace, ChartResources, release_in_namespace
from components.incluster.names import JOBSET_NAMESPACE, JOBSET_RELEASE


@dataclass(frozen=True, kw_only=True)
class JobSetControllerArgs:
    bundle: ClusterBundle


class JobSetController(pulumi.ComponentResource):
    """The pinned JobSet release in its own namespace."""

    resources: ChartResources

    def __init__(self, name: str, args: JobSetControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:JobSetController", name, None, opts)
        self.resources = release_in_namespace(
            self,
            name,
            "jobset",
            args.bundle,
            ChartInNamespace(
                chart="jobset",
                namespace=JOBSET_NAMESPACE,
                release=JOBSET_RELEASE,
                # The chart's defaults (one controller replica with leader election, its own certificates),
                # but the image pinned to the release: the chart's values.yaml at v0.12.0 names the staging
                # repository and tag `main` (../shared/reference/charts/jobset-0.12.0.values.yaml); the
                # release's own manifests use registry.k8s.io/jobset/jobset:v0.12.0.
                values={
                    "image": {
                        "repository": "registry.k8s.io/jobset/jobset",
                        "tag": "v0.12.0",
                        "pullPolicy": "IfNotPresent",
                    }
                },
            ),
        )
        self.register_outputs({"release": self.resources.release.name})
