"""Is NCCL's network plugin there when the pod asks for EFA? Decided before any worker starts.

On an EFA pool the job stack sets ``FI_PROVIDER=efa`` (components/aws/efa.py). NCCL reaches EFA only
through aws-ofi-nccl, a *net plugin* NCCL dlopen()s at start-up; without it NCCL falls back to TCP
sockets without failing, and the job trains at a fraction of the fabric's bandwidth (the NCCL preflight
then fails its floor much later, after the GPU-hours are spent). So when ``FI_PROVIDER=efa`` is set and no
plugin can be found the way NCCL looks for one, the launcher stops with one line and exit 2.

How NCCL finds it (NVIDIA/nccl@v2.27.7-1 src/plugin/net.cc ``initPluginLibsOnceFunc`` and
src/plugin/plugin_open.cc ``openPluginLib``):
- ``NCCL_NET_PLUGIN`` unset: ``dlopen("libnccl-net.so")``;
- set: a comma-separated list; each entry is dlopen()ed as given and, when it holds no ``/`` and is not
  a ``lib*.so`` name, also as ``libnccl-net-<entry>.so`` (``NCCL_NET_PLUGIN=ofi`` ->
  ``libnccl-net-ofi.so``).
A bare name is then found by the dynamic loader: ``LD_LIBRARY_PATH``, the ld cache (``ldconfig -p``), and
the default directories. aws-ofi-nccl installs both ``libnccl-net.so`` and ``libnccl-net-ofi.so``
(aws/aws-ofi-nccl@v1.21.1 src/Makefile.am) under ``/opt/amazon/ofi-nccl/lib`` and registers that
directory with the ld cache (contrib/debian-template/rules: ``/etc/ld.so.conf.d/100_ofinccl.conf``).

Only the file's presence is checked: loading the real plugin here would pull in libfabric and CUDA in
the launcher process, and NCCL itself reports a plugin that is present but broken.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from trainer.config import ConfigError

PLUGIN_ENV = "NCCL_NET_PLUGIN"
DEFAULT_PLUGIN = "libnccl-net.so"
PLUGIN_PREFIX = "libnccl-net"
# glibc's trusted directories, searched after LD_LIBRARY_PATH and the ld cache (ld.so(8)).
DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")


def candidate_names(env: Mapping[str, str]) -> list[str]:
    """The library names NCCL tries, in order, for the environment ``env``.

    >>> candidate_names({})
    ['libnccl-net.so']
    >>> candidate_names({"NCCL_NET_PLUGIN": "ofi"})
    ['ofi', 'libnccl-net-ofi.so']
    >>> candidate_names({"NCCL_NET_PLUGIN": "/opt/p/libnccl-net.so,libnccl-net-ofi.so"})
    ['/opt/p/libnccl-net.so', 'libnccl-net-ofi.so']
    """
    value = env.get(PLUGIN_ENV)
    if value is None:
        return [DEFAULT_PLUGIN]
    names: list[str] = []
    for entry in filter(None, value.split(",")):
        names.append(entry)
        if "/" not in entry and not (entry.startswith("lib") and entry.endswith(".so")):
            names.append(f"{PLUGIN_PREFIX}-{entry}.so")
    return names


def _ld_cache() -> dict[str, str]:
    """Library name -> path from ``ldconfig -p``; empty when there is no ldconfig."""
    for exe in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        cache: dict[str, str] = {}
        for line in out.splitlines()[1:]:
            name, _, path = line.strip().partition(" => ")
            if path:
                cache.setdefault(name.split(" (")[0], path)
        return cache
    return {}


def find_plugin(env: Mapping[str, str]) -> str | None:
    """The path of the first plugin library NCCL would load, or None if there is none."""
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    cache: dict[str, str] | None = None
    for name in candidate_names(env):
        if "/" in name:
            if Path(name).is_file():
                return name
            continue
        for d in dirs:
            if Path(d, name).is_file():
                return str(Path(d, name))
        if cache is None:
            cache = _ld_cache()
        if name in cache and Path(cache[name]).is_file():
            return cache[name]
        for d in DEFAULT_DIRS:
            if Path(d, name).is_file():
                return str(Path(d, name))
    return None


def check_efa_plugin(env: Mapping[str, str] | None = None) -> None:
    """ConfigError (one line) when ``FI_PROVIDER=efa`` asks for EFA and NCCL's net plugin is absent."""
    env = os.environ if env is None else env
    if env.get("FI_PROVIDER") != "efa":
        return
    if find_plugin(env) is not None:
        return
    tried = ", ".join(candidate_names(env))
    where = env.get("LD_LIBRARY_PATH") or "(unset)"
    raise ConfigError(
        f"config error: FI_PROVIDER=efa but NCCL's net plugin is absent ({tried} not found on "
        f"LD_LIBRARY_PATH={where}, in the ld cache or the default directories): NCCL would fall back to "
        "TCP; use an image with aws-ofi-nccl (trainer/Dockerfile installs it with the EFA installer)"
    )
