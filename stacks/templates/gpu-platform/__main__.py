"""A trainplane GPU platform: the full `trainplane:platform` object if set, else the template's answers
(checked first: components/answers.py)."""

import pulumi

from components.platform import GpuPlatform, GpuPlatformArgs
from components.quickstart import platform_from_answers
from components.spec import ConfigError, PlatformSpec
from infra.program import stack_config

config = pulumi.Config("trainplane")
try:
    spec = PlatformSpec.load(config.get_object("platform") or platform_from_answers(stack_config()))
except ConfigError as e:
    raise pulumi.RunError("invalid stack config:\n" + "\n".join(e.problems)) from None

platform = GpuPlatform(
    spec.cluster.name, GpuPlatformArgs(spec=spec, kubeconfig=config.get_secret("kubeconfig"))
)
for key, value in platform.outputs.exports().items():
    pulumi.export(key, value)
