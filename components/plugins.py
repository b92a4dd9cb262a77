"""`PluginRegistry`: plug-ins by name, declared as entry points of installed distributions (or registered by
a program), imported on first use. The cloud backends (components/backends.py, `trainplane.backends`) and
verify's cloud verifiers (infra/verify/verifiers.py, `trainplane.verifiers`) are two of them.

Entry points are read from metadata only, nothing imported: the entry_points.txt of each dist-info
directory on sys.path (python/cpython@v3.11 Doc/library/importlib.metadata.rst, "Entry points":
`entry_points(group=...)`, Python 3.10+), sorted by name so the order does not depend on sys.path.
"""

from __future__ import annotations

import importlib
from typing import Any, Generic, Protocol, TypeVar


class Named(Protocol):
    name: str


T = TypeVar("T", bound=Named)


class PluginRegistry(Generic[T]):
    """name -> plug-in: "module:attribute" until first asked (imported then), or the object itself."""

    def __init__(self, group: str, kind: str, attribute: str, protocol: type | None = None) -> None:
        self.group = group  # the entry-point group
        self.kind = kind  # what a plug-in is, in messages ("cloud backend")
        self.attribute = attribute  # the module attribute when an entry names none
        # The protocol a plug-in implements: one that lacks a member is refused when it is first asked for,
        # in one line naming what it lacks, not with an AttributeError wherever the member is first read.
        self.protocol = protocol
        # None until first asked; then the installed entries and what programs registered after them.
        self.entries: dict[str, str | T] | None = None

    def installed(self) -> dict[str, str]:
        """name -> "module:attribute" of every plug-in installed distributions declare, sorted by name;
        one name declared with two different targets is refused."""
        from importlib.metadata import entry_points

        found: dict[str, str] = {}
        for ep in sorted(entry_points(group=self.group), key=lambda e: (e.name, e.value)):
            if found.setdefault(ep.name, ep.value) != ep.value:
                raise ValueError(
                    f"{self.kind} {ep.name!r} is declared twice ({found[ep.name]} and {ep.value}, "
                    f"entry points {self.group}); uninstall one of the two distributions"
                )
        return found

    def loaded(self) -> dict[str, str | T]:
        if self.entries is None:
            self.entries = dict(self.installed())
        return self.entries

    def register(self, name: str, plugin: str | T) -> None:
        if not isinstance(plugin, str):
            self._check_members(plugin, name)
        self.loaded()[name] = plugin

    def unregister(self, name: str) -> None:
        self.loaded().pop(name, None)

    def names(self) -> tuple[str, ...]:
        return tuple(self.loaded())

    def get(self, name: str) -> T:
        """The plug-in registered as `name`, imported on first use; KeyError when there is none."""
        entries = self.loaded()
        entry = entries[name]
        if isinstance(entry, str):
            module, _, attribute = entry.partition(":")
            loaded: Any = getattr(importlib.import_module(module), attribute or self.attribute)
            if loaded.name != name:
                raise ValueError(f"{entry} provides {self.kind} {loaded.name!r}, registered as {name!r}")
            self._check_members(loaded, f"{name} ({entry})")
            entries[name] = loaded
            return loaded  # type: ignore[no-any-return]
        return entry

    def _check_members(self, plugin: object, label: str) -> None:
        if self.protocol is None:
            return
        members = {n for n in vars(self.protocol) if not n.startswith("_")} | set(
            getattr(self.protocol, "__annotations__", {})
        )
        missing = sorted(m for m in members if not hasattr(plugin, m))
        if missing:
            raise ValueError(
                f"{self.kind} {label} lacks {', '.join(missing)}: a {self.protocol.__name__} defines them "
                f"({self.protocol.__module__})"
            )
