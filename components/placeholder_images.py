"""Image references that only stand in for the user's own: the one list of placeholder registries.

trainplane's example job stacks, its `pulumi new` template and its docs name the trainer image as
`ghcr.io/example/trainplane-trainer:0.1.0`, which nobody publishes: a job deployed with it is scheduled
and then never starts (ImagePullBackOff). `trainplane plan` of a job stack and `trainplane verify` (a
scheduling note) say so, naming the key, instead of leaving it to the first `kubectl describe pod`.
A note, not an error: a registry of that name may exist in someone's network.

Example:
    >>> placeholder_registry("ghcr.io/example/trainplane-trainer:0.1.0")
    'ghcr.io/example/'
    >>> placeholder_registry("registry.example/trainer:1"), placeholder_registry("<your-registry>/trainer:1")
    ('.example', '<your-registry>')
    >>> placeholder_registry("123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1") is None
    True
"""

from __future__ import annotations

import re

# The placeholder registries, in one place (extend here; plan and verify both read it):
# - domains reserved for documentation and examples, which never resolve to a registry (RFC 2606
#   "Reserved Top Level DNS Names": the TLDs .example and .invalid, and example.com/.net/.org), matched
#   as the registry host or a parent domain of it (registry.example.com);
PLACEHOLDER_DOMAINS = ("example.com", "example.net", "example.org", "example", "invalid")
# - repositories that trainplane's own examples, template and docs use as the stand-in (stacks/,
#   stacks/templates/training-job, docs/configuration.md);
PLACEHOLDER_PREFIXES = ("ghcr.io/example/",)
# - template markers left unfilled: `<your-registry>/trainer:1`, `ghcr.io/your-org/trainer:1`.
PLACEHOLDER_MARKER = re.compile(r"<[^>]*>|(?:^|/)your[-_][^/:@]*", re.IGNORECASE)


def _host(image: str) -> str | None:
    """The registry host of a reference, without its port; None for a Docker Hub name (no host part:
    docker/distribution reference.ParseNormalizedNamed takes the first part as a host only with a '.' or
    ':', or 'localhost')."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first.split(":")[0].lower()
    return None


def placeholder_registry(image: str) -> str | None:
    """The placeholder `image` is on (a reserved domain as '.example' or 'example.com', a stand-in
    repository prefix, or an unfilled template marker), or None for an image that may exist."""
    lowered = image.lower()
    for prefix in PLACEHOLDER_PREFIXES:
        if lowered.startswith(prefix):
            return prefix
    host = _host(image)
    if host is not None:
        for domain in PLACEHOLDER_DOMAINS:
            if host == domain or host.endswith("." + domain):
                return domain if "." in domain else "." + domain
    marker = PLACEHOLDER_MARKER.search(image)
    return marker.group(0).lstrip("/") if marker else None


def placeholder_note(image: str, key: str) -> str | None:
    """One line naming `key` when `image` is on a placeholder registry, else None."""
    found = placeholder_registry(image)
    if found is None:
        return None
    return (
        f"{key}: {image} is on a placeholder registry ({found}), which no cluster can pull from: its pods "
        "would be scheduled and never start (ImagePullBackOff); build trainer/Dockerfile, push it to your "
        f"registry and set {key}"
    )
