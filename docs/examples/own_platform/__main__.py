"""A Pulumi program of your own built from trainplane's components (docs/components.md).

It adopts an existing cluster as a GPU platform (GpuPlatform), adds one component on its own (a
fenced sandbox namespace, TeamTenancy, on the platform's cluster) and exports the platform's typed
outputs, which a job program reads back (../own_job). tests/unit/repo/test_docs_examples.py plans it under
the mock engine; with the Pulumi CLI, `pulumi up` it from a project whose `main` is this directory.
"""

import pulumi

from components.incluster.tenancy import TeamTenancy, TeamTenancyArgs
from components.platform import GpuPlatform, GpuPlatformArgs
from components.spec import PlatformSpec, TeamSpec

config = pulumi.Config("lab")

# The platform's spec: the same object a trainplane stack file holds under `trainplane:platform`.
spec = PlatformSpec.load(
    {
        "cloud": "kubernetes",
        "cluster": {"name": "lab", "context": "lab-admin"},
        "nodePools": [
            {
                "name": "a100",
                "selector": {"node.kubernetes.io/instance-type": "dgx-a100"},
                "gpu": "A100-80GB",
                "gpusPerNode": 8,
                "minNodes": 2,
                "maxNodes": 2,
            }
        ],
        "teams": [{"name": "research", "gpuQuota": 16}],
    }
)
platform = GpuPlatform("lab", GpuPlatformArgs(spec=spec, kubeconfig=config.get_secret("kubeconfig")))

# One component on its own, on the platform's cluster: a namespace for experiments, fenced like a team's
# (quota, limits, RBAC, default-deny NetworkPolicies), without GPUs.
sandbox = TeamTenancy(
    "lab-sandbox",
    TeamTenancyArgs(team=TeamSpec(name="sandbox", gpu_quota=0), bundle=platform.cluster),
    pulumi.ResourceOptions(provider=platform.cluster.provider),
)

# What job stacks read (components.outputs.PlatformOutputs), plus what this program adds.
for key, value in platform.outputs.exports().items():
    pulumi.export(key, value)
pulumi.export("sandboxNamespace", sandbox.resources.namespace.metadata["name"])
