"""What every trainplane policy shares: its config over the defaults, reading nested properties, the links
between resources, and the stack's environment.

A resource policy sees a resource's INPUTS (Analyze), a stack policy every resource's OUTPUTS (AnalyzeStack:
"Unlike Analyze, AnalyzeStack is called on the final outputs of each resource", pulumi v3.259.0
pkg/resource/deploy/step_generator.go AnalyzeResources), also in a preview, where the outputs are the
provider's planned state: what the program set is known, a computed field it left unset is unknown until
the update (a new GKE node pool's `nodeCount`, an S3 bucket's `acl`), and after a first deploy it holds what
the cloud answered (a GKE cluster's `databaseEncryption` is {state: DECRYPTED} when none was set).
Both come as the provider schema's camelCase names (`blockDeviceMappings`, `publicAccessPrevention`),
numbers as floats; an unknown value raises pulumi_policy's UnknownValueError when read (the engine marshals
it as a sentinel string, pulumi sdk/go/common/resource/plugin/rpc.go KeepUnknowns; a policy that lets it
escape is reported as not run, advisory). Nested values are Mapping/Sequence proxies, never plain dict/list
(pulumi-policy v1.21.0 sdk/python/lib/pulumi_policy/proxy.py, policy.py AnalyzeStack).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pulumi_policy import PolicyConfigSchema, PolicyResource, ReportViolation
from pulumi_policy.proxy import UnknownValueError

T = TypeVar("T")


def config_schema(properties: Mapping[str, Mapping[str, Any]]) -> PolicyConfigSchema:
    """The JSON schema of a policy's config; every property carries its `default`."""
    return PolicyConfigSchema(properties={k: dict(v) for k, v in properties.items()})


def settings(args: Any, properties: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The policy's config over the schema's defaults. The CLI fills in schema defaults before it calls
    the pack (pulumi-policy v1.21.0 tests/integration/config/policy-pack-python, scenario 2: "Default
    string value specified in schema used"); a test calling `validate` directly passes none."""
    given = {k: v for k, v in dict(args.get_config() or {}).items() if k != "enforcementLevel"}
    return {**{k: v["default"] for k, v in properties.items()}, **given}


def dig(value: Any, path: str) -> Any:
    """The value at a dotted path of nested inputs (`nodeConfig.resourceLabels`), None where absent."""
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def items(value: Any) -> list[Any]:
    """A list input as a list (None and a missing key: empty)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return []


def truthy(value: Any) -> bool:
    """A boolean input, also where the provider schema types it as a string (aws LaunchTemplate
    `blockDeviceMappings[].ebs.encrypted` is "true"/"false": pulumi_aws ec2 LaunchTemplateBlockDeviceMappingEbsArgs)."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True


def linked(resource: PolicyResource, prop: str, candidates: Iterable[PolicyResource]) -> list[PolicyResource]:
    """The candidates that `resource`'s input `prop` was computed from (e.g. the bucket a public access
    block names by `bucket=bucket.id`). Property dependencies, not values: during a preview a new
    bucket's id is unknown, its dependency is not."""
    urns = {r.urn for r in resource.property_dependencies.get(prop, [])}
    return [c for c in candidates if c.urn in urns]


def environment(stack_tags: Mapping[str, str], tag: str) -> str:
    """The stack's environment: its stack tag `tag` where set, else its stack name's last `-` part
    (aws-dev: dev). The analyzer process gets the stack name as PULUMI_STACK (pulumi-policy v1.21.0
    policy.py _configure_runtime_settings reads it there)."""
    if stack_tags.get(tag):
        return str(stack_tags[tag])
    return os.environ.get("PULUMI_STACK", "").rsplit("-", 1)[-1]


def known(read: Callable[[], T], default: T) -> T:
    """What `read` returns, or `default` where it reads a value unknown in a preview."""
    try:
        return read()
    except UnknownValueError:
        return default


def report_each(
    resources: Iterable[PolicyResource],
    findings: Callable[[PolicyResource], Iterable[str]],
    report_violation: ReportViolation,
) -> None:
    """A stack policy's findings, resource by resource. A resource with a value still unknown in a preview
    (a bucket policy built from the new bucket's ARN, an IAM member naming a new service account) is
    skipped, not the whole stack: reading an unknown raises UnknownValueError, which would otherwise end
    the policy for every resource. It is checked once the value is known (a preview of the deployed stack).
    A policy with several independent checks per resource gives each its own `known`, so that an unknown
    field skips only the check that reads it (buckets.py)."""
    for r in resources:
        try:
            found = list(findings(r))
        except UnknownValueError:
            continue
        for message in found:
            report_violation(message, r.urn)
