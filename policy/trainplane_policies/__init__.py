"""trainplane's guardrails as a Pulumi CrossGuard policy pack (issue 21): the policies, importable and
testable without the CLI (tests/unit/policy/trainplane_policies/test_policy_pack.py builds ResourceValidationArgs and calls
`validate`, as pulumi-policy's own tests do); ../__main__.py serves them as the pack
`trainplane-guardrails` to `pulumi preview --policy-pack policy/` (docs/policy.md).
"""

from __future__ import annotations

from pulumi_policy import Policy

from . import buckets, capacity, encryption, tags

PACK_NAME = "trainplane-guardrails"

POLICIES: list[Policy] = [
    tags.POLICY,
    buckets.PUBLIC,
    encryption.POLICY,
    capacity.MACHINES_POLICY,
    capacity.REGIONS_POLICY,
    capacity.CAP_POLICY,
    capacity.SPOT_POLICY,
    buckets.PROTECTED,
]
