"""Each cloud's section of the platform spec, composed with the cloud-neutral models when they load.

A cloud keeps the keys only it understands in its own package: a module `spec_keys` beside its backend
module (components/<cloud>/spec_keys.py), pydantic models named after the section they extend
(`ClusterKeys`, `NetworkKeys`, `NodePoolKeys`, `StorageKeys`, `PlatformKeys`) and the words of its
patterns (`PATTERN_WORDS`). `components.spec.platform` composes each neutral model from its neutral base
and every installed cloud's section, so users' YAML, its keys and its error lines are those of one model.

Why a module found beside the backend, and not an attribute of the backend object: the backend module
imports its rules, which import the composed models, so the models cannot ask the backend for its keys
while they are being built (an import cycle). The section module is found from the entry point's module
name alone (`components.aws.backend:BACKEND` -> `components.aws.spec_keys`), and imports nothing but
pydantic and components.spec.base: composing the models costs no backend, no rules and never pulumi.
A backend registered by a program (`register_backend`, tests) brings its section as the attribute
`spec_keys` of the backend object; `PlatformSpec.load` then composes one more layer on top (`extended`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable, Mapping
from copy import copy
from functools import cache
from typing import Any, TypeVar

from pydantic import create_model

from components.spec.base import Spec, register_pattern_words

SpecT = TypeVar("SpecT", bound=Spec)

# The sections a cloud may extend: the attribute `<section>Keys` of its spec_keys module.
SECTIONS = ("Cluster", "Network", "NodePool", "Storage", "Platform")
MODULE = "spec_keys"


def section_module_name(target: str) -> str:
    """The spec section module of a backend entry point "package.module:ATTR": package.spec_keys."""
    return f"{target.partition(':')[0].rpartition('.')[0]}.{MODULE}"


def installed_sections() -> tuple[Any, ...]:
    """The spec section module of every installed backend that has one, in the registry's order (by name).
    Reads the entry points' names (metadata) and imports only the section modules."""
    from components.backends import installed_backends

    found = []
    for target in installed_backends().values():
        name = section_module_name(target)
        if importlib.util.find_spec(name) is not None:
            found.append(importlib.import_module(name))
    return tuple(found)


def mixins(sections: Iterable[Any], section: str) -> tuple[type[Spec], ...]:
    """The models the sections bring to `section` ("NodePool"), in the sections' order."""
    return tuple(m for s in sections if (m := getattr(s, f"{section}Keys", None)) is not None)


def compose(name: str, base: type[SpecT], extra: tuple[type[Spec], ...]) -> type[SpecT]:
    """`base` with the fields of `extra`: base's fields first, then each section's in order (pydantic
    collects fields along the reversed MRO, so the first section is the last base)."""
    if not extra:
        return base
    model = type(name, (*reversed(extra), base), {"__module__": base.__module__, "__qualname__": name})
    return model  # type: ignore[return-value]


def pattern_words(sections: Iterable[Any]) -> None:
    """The words of the sections' patterns join the neutral ones (components.spec.base.PATTERN_WORDS)."""
    for s in sections:
        register_pattern_words(getattr(s, "PATTERN_WORDS", {}))


@cache
def extended(
    platform: type[Spec], models: tuple[tuple[str, type[Spec]], ...], extra: tuple[Any, ...]
) -> type[Spec]:
    """The platform model with the sections of backends registered by a program on top of the installed
    ones: each section model subclasses the installed composition (so isinstance, the backends' `keys`
    and their rules still hold), and the platform model's fields take the extended ones."""
    pattern_words(extra)
    types = dict(models)
    ext = {s: compose(types[s].__name__, types[s], mixins(extra, s)) for s in types}
    fields: dict[str, Any] = {}
    for field, info in platform.model_fields.items():
        annotation = _swap(info.annotation, types, ext)
        if annotation is not info.annotation:
            copied = copy(info)
            if info.default.__class__ in types.values():
                copied.default = annotation()
            fields[field] = (annotation, copied)
    bases = (*reversed(mixins(extra, "Platform")), platform)
    return create_model(platform.__name__, __base__=bases, __module__=platform.__module__, **fields)


def _swap(annotation: Any, types: Mapping[str, type[Spec]], ext: Mapping[str, type[Spec]]) -> Any:
    """`annotation` with each installed section model replaced by its extended one (also in list[...])."""
    for section, model in types.items():
        if annotation is model:
            return ext[section]
        if getattr(annotation, "__origin__", None) is list and annotation.__args__ == (model,):
            return list[ext[section]]  # type: ignore[valid-type]
    return annotation
