"""The cloud backends of GpuPlatform: one `CloudBackend` protocol and a registry of plug-ins by name.

A backend is everything trainplane knows about one place clusters come from (AWS, GCP, a cluster that
already exists): the stack keys only it understands and its rules for them, the machines its pools are
made of, and how it builds the cloud layer whose `ClusterBundle` (with its `CloudProfile`) the in-cluster
layer runs on. Nothing outside a backend's own package names its cloud.

Backends are plug-ins: a distribution declares each of its backends as an entry point of the group
`trainplane.backends` (name = "module:BACKEND"; trainplane's own three are in its pyproject.toml), the
Python packaging mechanism for plug-ins ("Entry points specification", packaging.python.org). The registry
reads the names from the installed metadata and imports a backend's module on first use, so an AWS stack
never loads the GCP backend (and a backend module itself imports its SDK only in `build`). A new cloud is
a package and one entry point: no edit outside it.

Example: a backend of your own, registered from your program (or a test) before the stack is loaded:

    >>> from components.backends import backend, backend_names, register_backend
    >>> backend_names()[:3]
    ('aws', 'gcp', 'kubernetes')
    >>> backend("aws").name
    'aws'
    >>> register_backend("my-cloud", "my_package.backend")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from components.backend_defaults import EXISTING_GPU_SELECTOR, BackendDefaults
from components.backend_protocol import (
    ENTRY_POINT_GROUP,
    BuildArgs,
    CloudBackend,
    MockAnswer,
    MockAnswers,
    Prompt,
)

# The protocol and its defaults live beside the registry; importing them from here is the public path.
from components.plugins import PluginRegistry

__all__ = [
    "ENTRY_POINT_GROUP",
    "EXISTING_GPU_SELECTOR",
    "BackendDefaults",
    "BuildArgs",
    "CloudBackend",
    "MockAnswer",
    "MockAnswers",
    "Prompt",
    "backend",
    "backend_names",
    "backends",
    "installed_backends",
    "load_data_file",
    "register_backend",
    "unregister_backend",
]


# name -> "module:attribute" (imported on first use) or the backend itself: the installed entry points,
# sorted by name, then what programs registered after them.
_REGISTRY: PluginRegistry[CloudBackend] = PluginRegistry(
    ENTRY_POINT_GROUP, "cloud backend", "BACKEND", CloudBackend
)


def installed_backends() -> dict[str, str]:
    """name -> "module:attribute" of every backend an installed distribution declares, sorted by name.
    Reads metadata only, imports nothing (components/plugins.py)."""
    return _REGISTRY.installed()


def register_backend(name: str, backend: str | CloudBackend) -> None:
    """Make `cloud: <name>` available: `backend` is a CloudBackend, or "module" / "module:attribute"
    naming one (attribute default `BACKEND`, imported when a stack first asks for it). Re-registering
    replaces, an installed backend too."""
    _REGISTRY.register(name, backend)


def unregister_backend(name: str) -> None:
    """Remove a backend registered with `register_backend` (tests clean up with it)."""
    _REGISTRY.unregister(name)


def backend_names() -> tuple[str, ...]:
    """Every registered cloud name: the installed ones by name, then those programs registered."""
    return _REGISTRY.names()


def backend(name: str) -> CloudBackend:
    """The backend registered as `name`; KeyError when there is none."""
    return _REGISTRY.get(name)


def backends() -> tuple[CloudBackend, ...]:
    """Every registered backend (imports the light backend modules, never a cloud SDK)."""
    return tuple(backend(n) for n in backend_names())


def load_data_file(package: str, filename: str) -> dict[str, Any]:
    """A YAML data file shipped in a package (a backend's data; a verifier's facts, infra/verify/clouds)."""
    from importlib import resources

    import yaml

    return yaml.safe_load(resources.files(package).joinpath(filename).read_text()) or {}
