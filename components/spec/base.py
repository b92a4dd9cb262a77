"""The base of every spec model, the one error type of a bad stack file, and the two-pass loader.

Validation happens in two passes: pydantic checks the shape (types, allowed values, unknown keys), then
a `check` function the rules that need the catalog or several keys at once. Every problem becomes one
line naming its key path; pydantic's errors are formatted by the trainer contract's formatter, the one
the trainer uses for its own config too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from trainer.contract import format_validation_error

DNS_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
# Kubernetes object names such as StorageClasses: a DNS subdomain (RFC 1123).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
K8S_MINOR = r"^1\.\d{2}$"
# A cost center as a tag value and a GCP label value (lowercase letters, digits, '_' and '-', at most 63:
# GCP "Labels" requirements), so one value reaches AWS tags, GCP labels and Kubernetes labels unchanged.
COST_CENTER = r"^[a-z0-9]([-_a-z0-9]{0,61}[a-z0-9])?$"
# A stack name (stack, project/stack or org/project/stack); STACK_REF also takes "" (the one of a job's
# platformStack / fleetStack not given).
STACK_NAME = r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$"
STACK_REF = r"^([A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2})?$"
NO_SPACES = r"^[^\s]+$"
# An API server URL as a kubeconfig's `server` takes it and MultiKueue accepts it: https, a host that is an
# IPv4 address or a DNS-1123 subdomain (any case: Kueue lowercases it), an optional port and path, and no
# user:password (kubernetes-sigs/kueue@v0.19.2 pkg/controller/admissionchecks/multikueue/
# multikueuecluster.go validateRestConfig, isValidHostname: "untrusted server endpoint" otherwise).
_DNS_LABEL_ANY_CASE = r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?"
API_SERVER = (
    rf"^https://{_DNS_LABEL_ANY_CASE}(\.{_DNS_LABEL_ANY_CASE})*(:[0-9]{{1,5}})?(/[-A-Za-z0-9._~/]*)?$"
)
# An image pinned by digest: `<repository>@sha256:<64 lowercase hex digits>` (a tag may stand before the
# digest; the runtime then pulls by the digest alone).
DIGEST_IMAGE = r"^[a-z0-9][-a-z0-9._/:]*@sha256:[0-9a-f]{64}$"
ABSOLUTE_PATH = r"^/"
MOUNT_PATH = r"^/[^\s]*$"
# A Prometheus duration in minutes or hours (an alert's `for`, a rule's window).
MINUTES_OR_HOURS = r"^[1-9][0-9]{0,3}[mh]$"
# A label-value-like token (a fleet's token rotation), lowercase and '.', '-' inside.
ROTATION = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
# The words of each pattern, in error lines; a cloud's own patterns bring theirs with its spec section
# (components/spec/sections.py, register_pattern_words).
PATTERN_WORDS = {
    DNS_LABEL: "a lowercase DNS label (a-z, 0-9 and '-', starting with a letter)",
    DNS_SUBDOMAIN: "a Kubernetes object name (lowercase a-z, 0-9, '-' and '.')",
    K8S_MINOR: 'a Kubernetes minor version in quotes, e.g. "1.33"',
    DIGEST_IMAGE: (
        "an image pinned by digest, <repository>@sha256:<64 hex digits>; a tag alone is not pinned (the "
        "registry may serve other content under it)"
    ),
    API_SERVER: "an https URL of an API server, e.g. https://lab-api.example.internal:6443",
    COST_CENTER: "lowercase letters, digits, '-' and '_' (at most 63, starting and ending with a letter or digit)",
    STACK_NAME: "a stack name: stack, project/stack or org/project/stack (letters, digits, '.', '_' and '-')",
    STACK_REF: "a stack name: stack, project/stack or org/project/stack (letters, digits, '.', '_' and '-')",
    NO_SPACES: "a value without spaces",
    ABSOLUTE_PATH: "an absolute path, starting with '/'",
    MOUNT_PATH: "an absolute path without spaces, starting with '/'",
    MINUTES_OR_HOURS: "a duration in minutes or hours, e.g. 30m or 2h",
    ROTATION: "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
}

SpecT = TypeVar("SpecT", bound="Spec")


def register_pattern_words(words: dict[str, str]) -> None:
    """Add a cloud section's pattern words (its spec_keys PATTERN_WORDS) to those every loader uses."""
    PATTERN_WORDS.update(words)


class ConfigError(Exception):
    """A stack file that cannot be deployed; `problems` holds one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Spec(BaseModel):
    """Base of every spec model: camelCase keys in YAML, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, validate_default=True
    )


def load_checked(
    model: type[SpecT], raw: Any, root: str, check: Callable[[SpecT, str], Iterable[str]]
) -> SpecT:
    """Both passes of validation: pydantic's shape, then `check`'s rules; every problem on one line."""
    if not isinstance(raw, dict):
        raise ConfigError([f"{root}: must be a mapping, got {type(raw).__name__}"])
    try:
        obj = model.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, model, root, pattern_words=PATTERN_WORDS)) from None
    problems = list(check(obj, root))
    if problems:
        raise ConfigError(problems)
    return obj


def alias_of(model: type[Spec], field: str) -> str:
    """The YAML key of a model field."""
    info = model.model_fields[field]
    return info.alias or field


def alias_set(obj: Spec, alias: str) -> bool:
    """Whether the stack file set the key `alias` of `obj` (defaults do not count)."""
    return any(alias_of(type(obj), f) == alias for f in obj.model_fields_set)


def duplicates(names: list[str]) -> set[str]:
    return {n for n in names if names.count(n) > 1}
