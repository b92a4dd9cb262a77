"""A job program of your own: read a platform stack's typed outputs and run a TrainingJob on it.

`read_platform` parses the platform stack's outputs into PlatformOutputs (pools, teams, storage as
typed models; keys an older platform lacks take defaults), `check_job` refuses a job the platform cannot
run, one line per problem. tests/unit/repo/test_docs_examples.py plans it on ../own_platform's outputs.
"""

import pulumi

from components.fleet.providers import platform_provider
from components.incluster.training_job import TrainingJob, TrainingJobArgs
from components.job_stack import read_platform
from components.spec import JobSpec, check_job

job = JobSpec.load(
    {
        "platformStack": "organization/lab-platform/lab",
        "name": "tiny",
        "team": "research",
        "image": "ghcr.io/example/trainplane-trainer:0.1.0",
        "nodePool": "a100",
        "nodes": {"min": 1, "max": 2},
        "gpusPerNode": 8,
        "trainer": {"model": "tiny", "globalBatchSize": 64, "microBatchSize": 4, "steps": 100},
    }
)
ref = pulumi.StackReference("platform", stack_name=job.platform_stack)
platform = read_platform(ref, job.platform_stack)
pool = platform.pool(job.node_pool)
assert pool is not None  # check_job below names a missing pool; this is for the type checker
problems = check_job(job, platform)
if problems:
    raise pulumi.RunError("invalid job:\n" + "\n".join(problems))

# The platform's kubeconfig output, or, for an existing cluster that exports none (this lab platform without
# trainplane:kubeconfig), the ambient kubeconfig with the platform's context.
cluster = platform_provider("platform-cluster", ref)
training = TrainingJob(
    job.name, TrainingJobArgs(job=job, platform=platform), pulumi.ResourceOptions(provider=cluster)
)
pulumi.export("job", training.resources.job.metadata["name"])
pulumi.export("nodeVcpus", pool.node_vcpus)  # the pool's machine facts travel with its outputs
pulumi.export("grace", platform.preemption_grace_seconds)
