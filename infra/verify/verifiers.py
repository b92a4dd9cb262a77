"""Which `CloudVerifier` (infra/verify/verifier.py) verify asks about a cloud: a registry by backend name,
beside the backends' (components/backends.py), and read the same way.

A distribution declares each of its verifiers as an entry point of the group `trainplane.verifiers`
(name = the backend's name, value = "module:VERIFIER"; trainplane's own three are in its pyproject.toml,
and `make venv` reinstalls when it changes). The registry imports a verifier's module on first use, as
the backends' registry does (components/plugins.py, one registry type for both).

A backend with no verifier is verified as a plain Kubernetes cluster (`VerifierDefaults`), and the report
says so in one note (`missing_verifier_note`): nothing falls back silently.

    >>> from infra.verify.verifiers import verifier
    >>> verifier("aws").name
    'aws'
    >>> register_verifier("my-cloud", "my_package.verifier")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from components.plugins import PluginRegistry
from infra.verify.verifier import CloudVerifier, VerifierDefaults

if TYPE_CHECKING:
    from infra.verify.model import Plan

# The entry-point group a distribution declares its verifiers in (pyproject.toml
# [project.entry-points."trainplane.verifiers"]).
VERIFIER_GROUP = "trainplane.verifiers"
DEFAULTS = VerifierDefaults()


# name -> "module:attribute" (imported on first use) or the verifier itself: the installed entry points,
# sorted by name, then what programs registered.
_REGISTRY: PluginRegistry[CloudVerifier] = PluginRegistry(VERIFIER_GROUP, "cloud verifier", "VERIFIER")


def installed_verifiers() -> dict[str, str]:
    """name -> "module:attribute" of every verifier installed distributions declare (entry points of
    VERIFIER_GROUP), sorted by name. One name declared with two different targets is refused."""
    return _REGISTRY.installed()


def register_verifier(name: str, verifier: str | CloudVerifier) -> None:
    """Give backend `name` a verifier: a CloudVerifier, or "module" / "module:attribute" naming one
    (attribute default `VERIFIER`, imported when verify first asks). Re-registering replaces."""
    _REGISTRY.register(name, verifier)


def unregister_verifier(name: str) -> None:
    """Remove a verifier registered with `register_verifier` (tests clean up with it)."""
    _REGISTRY.unregister(name)


def has_verifier(name: str) -> bool:
    """Whether backend `name` has a verifier of its own (else verify asks the defaults)."""
    return name in _REGISTRY.loaded()


def verifier(name: str) -> CloudVerifier:
    """The verifier of backend `name`; `VerifierDefaults` (a plain cluster) when it has none."""
    return _REGISTRY.get(name) if name in _REGISTRY.loaded() else DEFAULTS


def cloud_verifier(plan: Plan) -> CloudVerifier:
    """The verifier of the cloud a plan runs on (a job's: its platform's): what verify asks about it."""
    return verifier(plan.cloud)


def missing_verifier_note(cloud: str) -> str | None:
    """The report's note when verify asked the defaults for a backend with no verifier; None otherwise
    (a cloud with a verifier, or a plan on no backend at all)."""
    from components.backends import backend_names

    if not cloud or has_verifier(cloud) or cloud not in backend_names():
        return None
    return (
        f"cloud {cloud}: no verifier registered (entry points {VERIFIER_GROUP}): verified as a plain "
        "Kubernetes cluster (no add-ons, cloud identity, create rules or cloud API checked)"
    )
