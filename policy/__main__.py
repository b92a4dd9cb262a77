"""The policy pack `trainplane-guardrails`: `pulumi preview --policy-pack policy/` runs this file, which
serves the policies of trainplane_policies/ to the engine until it is done (PolicyPack blocks)."""

from pulumi_policy import EnforcementLevel, PolicyPack
from trainplane_policies import PACK_NAME, POLICIES

PolicyPack(
    name=PACK_NAME,
    policies=POLICIES,
    # Each policy says its own level; a pack config (pulumi preview --policy-pack-config) overrides it.
    enforcement_level=EnforcementLevel.MANDATORY,
    description="trainplane guardrails: ownership tags, private and encrypted storage, GPU capacity limits",
)
