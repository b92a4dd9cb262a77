"""A trainplane GPU platform: the full `trainplane:platform` object if set, else the template's answers."""

import pulumi

from components.platform import GpuPlatform, GpuPlatformArgs
from components.quickstart import platform_from_prompts
from components.spec import ConfigError, PlatformSpec

config = pulumi.Config("trainplane")
raw = config.get_object("platform") or platform_from_prompts(config.get)
try:
    spec = PlatformSpec.load(raw)
except ConfigError as e:
    raise pulumi.RunError("invalid stack config:\n" + "\n".join(e.problems)) from None

platform = GpuPlatform(
    spec.cluster.name, GpuPlatformArgs(spec=spec, kubeconfig=config.get_secret("kubeconfig"))
)
for key, value in platform.outputs.exports().items():
    pulumi.export(key, value)
