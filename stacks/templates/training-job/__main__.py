"""A trainplane training job: the full `trainplane:job` object if set, else the template's answers."""

import pulumi

from components.job_stack import deploy_job
from components.quickstart import job_from_prompts
from components.spec import ConfigError, JobSpec

config = pulumi.Config("trainplane")
try:
    training = deploy_job(JobSpec.load(config.get_object("job") or job_from_prompts(config.get)))
except ConfigError as e:
    raise pulumi.RunError("invalid stack config:\n" + "\n".join(e.problems)) from None

for key, value in training.outputs.items():
    pulumi.export(key, value)
