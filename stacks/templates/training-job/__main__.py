"""A trainplane training job: the full `trainplane:job` object if set, else the template's answers
(checked first: components/answers.py)."""

import pulumi

from components.job_stack import deploy_job
from components.quickstart import in_job_answer_terms, job_from_answers
from components.spec import ConfigError, JobSpec
from infra.program import stack_config

config = pulumi.Config("trainplane")
full = config.get_object("job")
try:
    training = deploy_job(JobSpec.load(full or job_from_answers(stack_config())))
except ConfigError as e:
    problems = e.problems if full else in_job_answer_terms(e.problems)
    raise pulumi.RunError("invalid stack config:\n" + "\n".join(problems)) from None

for key, value in training.outputs.items():
    pulumi.export(key, value)
