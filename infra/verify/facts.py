"""The facts verify relies on, each with its source: chart facts from facts.yaml beside this module, and
each cloud's own facts from its verifier (infra/verify/verifiers.py: `verify_facts()`, the facts.yaml of
infra/verify/clouds/<cloud>/). Loaded once per set of registered backends and verifiers; lookups are
small helpers so the checks read like the facts they use."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from infra.verify.verifier import CloudVerifier


def facts() -> dict[str, Any]:
    """facts.yaml plus `clouds` (backend name -> its verifier's facts) and every cloud's `storagePorts`,
    for the backends and verifiers registered now (a program or test may register one after a first
    verify); parsed once per set of them, as components.catalog.catalog() is."""
    from components.backends import backend_names
    from infra.verify.verifiers import verifier

    return _facts(tuple((n, verifier(n)) for n in backend_names()))


@cache
def _facts(clouds: tuple[tuple[str, CloudVerifier], ...]) -> dict[str, Any]:
    doc = yaml.safe_load(resources.files("infra.verify").joinpath("facts.yaml").read_text())
    doc["clouds"], doc["storagePorts"] = {}, {}
    for name, v in clouds:
        own = dict(v.verify_facts())
        doc["storagePorts"].update(own.pop("storagePorts", None) or {})
        doc["clouds"][name] = own
    return doc


def cloud(name: str) -> dict[str, Any]:
    return facts()["clouds"][name]


def chart(name: str) -> dict[str, Any] | None:
    return facts()["charts"].get(name)


def version_matches(rule: str, minor: tuple[int, int] | None) -> bool:
    """`<1.30`, `>=1.30` ... against a (major, minor) version; unknown versions match nothing."""
    if minor is None:
        return False
    for op in (">=", "<=", "==", "<", ">"):
        if rule.startswith(op):
            major, mnr = (int(x) for x in rule[len(op) :].split("."))
            want = (major, mnr)
            return {
                ">=": minor >= want,
                "<=": minor <= want,
                "==": minor == want,
                "<": minor < want,
                ">": minor > want,
            }[op]
    raise ValueError(f"facts.yaml: bad version rule {rule!r}")


def storage_classes(cloud_name: str, minor: tuple[int, int] | None) -> list[dict[str, Any]] | None:
    """StorageClasses the cloud creates at this version; None when unknown offline (existing clusters)."""
    known = cloud(cloud_name).get("storageClasses")
    if known == "unknown" or known is None:
        return None
    return [c for c in known if version_matches(c["versions"], minor)]


def dig(values: Any, path: str, default: Any = None) -> Any:
    """values["a"]["b"]... for path "a.b"; keys may contain dashes (subchart names)."""
    cur = values
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def chart_value(chart_name: str, values: Any, path: str) -> Any:
    """The value a release of `chart_name` gets at `path`: what was sent, else the chart's default."""
    sent = dig(values, path, _MISSING)
    if sent is not _MISSING:
        return sent
    c = chart(chart_name) or {}
    for key in ("defaults", "subchartDefaults"):
        if path in (c.get(key) or {}):
            return c[key][path]
    return None


_MISSING = object()


def network_policy_agents() -> list[dict[str, Any]]:
    """The kube-system DaemonSets that enforce NetworkPolicy: every backend's own (a brought cluster may
    run any cloud's CNI) before the cloud-neutral ones of facts.yaml."""
    own = [a for c in facts()["clouds"].values() for a in c.get("networkPolicyAgents") or []]
    return [*own, *facts()["networkPolicyAgents"]]
