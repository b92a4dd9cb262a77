"""The Pod Security Standards as the PodSecurity admission plugin enforces them, on plain manifests.

`violations(metadata, spec, level, minor)` returns one line per refused control, named by the plugin's
check ID (kubernetes/pod-security-admission@v0.33.13:policy/check_<id>.go), the data of each rule from
facts.yaml `admission.podSecurity`. Like the plugin, every control covers init, regular and ephemeral
containers (policy/visitor.go visitContainers); `restricted` includes every `baseline` control, with
restrictedVolumes replacing hostPathVolumes, capabilities_restricted replacing capabilities_baseline and
seccompProfile_restricted replacing seccompProfile_baseline (their OverrideCheckIDs).

    >>> violations({}, {"containers": [{"name": "c"}], "hostNetwork": True}, "baseline", (1, 33))
    ['hostNamespaces: hostNetwork=true']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from infra.verify import facts as F

APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION = "container.seccomp.security.alpha.kubernetes.io/"
# Volume source keys that are not a volume type (the name, and nothing else, in the v1 Volume schema).
_NOT_A_SOURCE = {"name"}


def rules() -> dict[str, Any]:
    return dict(F.facts()["admission"]["podSecurity"])


def _by_minor(table: Mapping[str, list[str]], minor: tuple[int, int]) -> set[str]:
    """Union of the entries of every minor up to `minor` (the plugin's versioned checks add to earlier ones)."""
    out: set[str] = set()
    for version, values in table.items():
        major, mnr = (int(x) for x in str(version).split("."))
        if (major, mnr) <= minor:
            out.update(values)
    return out


def containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Init, regular and ephemeral containers, in the plugin's order."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _sc(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("securityContext") or {}


def _contexts(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """("pod", the pod's securityContext), then (container name, its securityContext) for each container."""
    return [("pod", _sc(spec))] + [(str(c.get("name", "")), _sc(c)) for c in containers(spec)]


def _user_namespace(spec: Mapping[str, Any], minor: tuple[int, int]) -> bool:
    """policy/helpers.go relaxPolicyForUserNamespacePod: a hostUsers=false pod is exempt from procMount,
    runAsNonRoot and runAsUser; through 1.34 only under the API server's UserNamespacesPodSecurityStandards
    gate (alpha, off: pod-security-admission@v0.34.2), always from 1.35 (@v0.35.6)."""
    return spec.get("hostUsers") is False and minor >= (1, 35)


def _names(found: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in found)


def _baseline(meta: Mapping[str, Any], spec: Mapping[str, Any], minor: tuple[int, int], r: dict) -> list[str]:
    out: list[str] = []
    pod_sc = _sc(spec)
    cs = list(containers(spec))
    annotations = meta.get("annotations") or {}
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess") or any(
        (_sc(c).get("windowsOptions") or {}).get("hostProcess") for c in cs
    ):
        out.append("windowsHostProcess: securityContext.windowsOptions.hostProcess=true")
    host = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if host:
        out.append(f"hostNamespaces: {', '.join(host)}")
    bad = [c.get("name", "") for c in cs if _sc(c).get("privileged")]
    if bad:
        out.append(f"privileged: containers {_names(bad)} set securityContext.privileged=true")
    paths = [str((v.get("hostPath") or {}).get("path")) for v in spec.get("volumes") or [] if "hostPath" in v]
    if paths:
        out.append(f"hostPathVolumes: hostPath {', '.join(paths)}")
    ports = [
        f"{c.get('name')}:{p['hostPort']}" for c in cs for p in c.get("ports") or [] if p.get("hostPort")
    ]
    if ports:
        out.append(f"hostPorts: {', '.join(ports)}")
    apparmor = set(r["appArmorTypes"])
    setters = [
        who
        for who, sc in _contexts(spec)
        if (sc.get("appArmorProfile") or {}).get("type", "RuntimeDefault") not in apparmor
    ]
    setters += [
        f"{k}={v}"
        for k, v in annotations.items()
        if k.startswith(APPARMOR_ANNOTATION)
        and v
        and v != "runtime/default"
        and not v.startswith("localhost/")
    ]
    if setters:
        out.append(f"appArmorProfile: {', '.join(setters)} set a profile other than RuntimeDefault/Localhost")
    types = _by_minor(r["seLinuxTypes"], minor)
    selinux = [(who, sc.get("seLinuxOptions")) for who, sc in _contexts(spec)]
    bad = [
        who
        for who, o in selinux
        if o is not None and (o.get("type", "") not in types or o.get("user") or o.get("role"))
    ]
    if bad:
        out.append(f"seLinuxOptions: {', '.join(bad)} set a custom SELinux type, user or role")
    bad = [c.get("name", "") for c in cs if _sc(c).get("procMount", "Default") != "Default"]
    if bad and not _user_namespace(spec, minor):
        out.append(f"procMount: containers {_names(bad)} set securityContext.procMount other than Default")
    out += _host_probes(cs, minor, r)
    sysctls = [
        s.get("name")
        for s in pod_sc.get("sysctls") or []
        if s.get("name") not in _by_minor(r["safeSysctls"], minor)
    ]
    if sysctls:
        out.append(f"sysctls: forbidden sysctls {', '.join(map(str, sysctls))}")
    return out


def _host_probes(cs: list[Mapping[str, Any]], minor: tuple[int, int], r: dict) -> list[str]:
    """hostProbesAndHostLifecycle (Kubernetes 1.34+, pod-security-admission@v0.35.6): probes and lifecycle
    hooks may not name a `host` (they would reach another machine from the node)."""
    major, mnr = (int(x) for x in str(r["hostProbesFrom"]).split("."))
    if minor < (major, mnr):
        return []
    bad: list[str] = []
    for c in cs:
        handlers = [c.get(k) for k in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [(c.get("lifecycle") or {}).get(k) for k in ("postStart", "preStop")]
        for h in handlers:
            for kind in ("httpGet", "tcpSocket"):
                host = ((h or {}).get(kind) or {}).get("host")
                if host:
                    bad.append(f"{c.get('name')}:{host}")
    return [f"hostProbesAndHostLifecycle: probe or lifecycle hosts {', '.join(bad)}"] if bad else []


def _seccomp_baseline(meta: Mapping[str, Any], spec: Mapping[str, Any], r: dict) -> list[str]:
    valid = set(r["seccompTypes"])
    setters = [
        who
        for who, o in _contexts(spec)
        if o.get("seccompProfile") is not None and o["seccompProfile"].get("type") not in valid
    ]
    annotations = meta.get("annotations") or {}
    setters += [
        f"{k}={v}"
        for k, v in annotations.items()
        if (k == SECCOMP_POD_ANNOTATION or k.startswith(SECCOMP_CONTAINER_ANNOTATION))
        and v not in ("runtime/default", "docker/default")
        and not str(v).startswith("localhost/")
    ]
    return [f"seccompProfile: {', '.join(setters)} set seccomp Unconfined"] if setters else []


def _capabilities_baseline(spec: Mapping[str, Any], r: dict) -> list[str]:
    allowed = set(r["baselineCapabilities"])
    bad = {
        c.get("name", ""): [
            cap for cap in (_sc(c).get("capabilities") or {}).get("add") or [] if cap not in allowed
        ]
        for c in containers(spec)
    }
    return [f"capabilities_baseline: container {n} adds {', '.join(caps)}" for n, caps in bad.items() if caps]


def _restricted(spec: Mapping[str, Any], minor: tuple[int, int], r: dict) -> list[str]:
    out: list[str] = []
    cs = list(containers(spec))
    pod_sc = _sc(spec)
    kinds = {k for v in spec.get("volumes") or [] for k in v if k not in _NOT_A_SOURCE}
    bad_volumes = sorted(kinds - set(r["restrictedVolumes"]))
    if bad_volumes:
        out.append(f"restrictedVolumes: volume types {', '.join(bad_volumes)}")
    windows = (spec.get("os") or {}).get("name") == "windows"
    if windows:
        return out  # the 1.25+ versions of the checks below exempt Windows pods
    bad = [c.get("name", "") for c in cs if _sc(c).get("allowPrivilegeEscalation") is not False]
    if bad:
        out.append(f"allowPrivilegeEscalation: containers {_names(bad)} must set it to false")
    pod_nonroot = pod_sc.get("runAsNonRoot")
    bad = [
        c.get("name", "")
        for c in cs
        if not (
            _sc(c).get("runAsNonRoot") is True or (pod_nonroot is True and _sc(c).get("runAsNonRoot") is None)
        )
    ]
    if (bad or pod_nonroot is False) and not _user_namespace(spec, minor):
        out.append(f"runAsNonRoot: pod or containers {_names(bad)} must set runAsNonRoot=true")
    root = ["pod"] * (pod_sc.get("runAsUser") == 0) + [
        c.get("name", "") for c in cs if _sc(c).get("runAsUser") == 0
    ]
    if root and not _user_namespace(spec, minor):
        out.append(f"runAsUser: {', '.join(root)} set runAsUser=0")
    valid = set(r["seccompTypes"])
    pod_type = (pod_sc.get("seccompProfile") or {}).get("type")
    bad = [
        c.get("name", "")
        for c in cs
        if (_sc(c).get("seccompProfile") or {}).get("type", pod_type) not in valid
    ]
    if bad or (pod_type is not None and pod_type not in valid):
        out.append(f"seccompProfile_restricted: containers {_names(bad)} need RuntimeDefault or Localhost")
    allowed = set(r["restrictedCapabilities"])
    for c in cs:
        caps = _sc(c).get("capabilities") or {}
        extra = [cap for cap in caps.get("add") or [] if cap not in allowed]
        if "ALL" not in (caps.get("drop") or []) or extra:
            out.append(
                f"capabilities_restricted: container {c.get('name')} must drop ALL and add at most NET_BIND_SERVICE"
            )
    return out


def violations(
    metadata: Mapping[str, Any], spec: Mapping[str, Any], level: str, minor: tuple[int, int] | None
) -> list[str]:
    """What the PodSecurity plugin refuses in a pod (template) at `level` and Kubernetes `minor`."""
    if level == "privileged":
        return []
    r = rules()
    version = minor or (99, 0)  # unknown: `latest`, the plugin's default enforce-version
    out = _baseline(metadata, spec, version, r)
    if level == "baseline":
        return out + _seccomp_baseline(metadata, spec, r) + _capabilities_baseline(spec, r)
    out = [v for v in out if not v.startswith("hostPathVolumes")]
    return out + _restricted(spec, version, r)
