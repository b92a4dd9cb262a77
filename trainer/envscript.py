"""Environment a fabric's own shell script sets up, applied before any NCCL communicator exists.

Some fabrics ship their NCCL settings as a script to be sourced by the workload rather than as fixed
values: GKE's GPUDirect RDMA (gIB) installer puts ``/usr/local/gib/scripts/set_nccl_env.sh`` on the node,
and Google's examples run ``source`` on it before the training command (cluster-toolkit v1.95.0
examples/gke-a3-ultragpu/nccl-jobset-example.yaml). The platform names such a script in
``TRAINPLANE_ENV_SCRIPT``; the launcher (and the NCCL preflight) source it here, in a POSIX shell, and take
every variable it sets or changes into its own environment, which the workers inherit. No user edits.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import MutableMapping

from trainer.config import ConfigError
from trainer.contract import ENV_SCRIPT


def sourced_env(script: str, base: MutableMapping[str, str]) -> dict[str, str]:
    """The variables ``script`` sets or changes when sourced with ``base`` as the environment."""
    if not os.path.isfile(script):
        raise ConfigError(
            f"config error: {ENV_SCRIPT}={script}: no such file (is the fabric's installer running on this node?)"
        )
    p = subprocess.run(
        ["/bin/sh", "-c", '. "$0" >&2 && env -0', script],
        env=dict(base),
        capture_output=True,
        timeout=60,
    )
    if p.returncode != 0:
        last = p.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        raise ConfigError(f"config error: {ENV_SCRIPT}={script}: sourcing it failed: {last[0]}")
    after = dict(item.split("=", 1) for item in p.stdout.decode(errors="replace").split("\0") if "=" in item)
    # The shell's own bookkeeping is not the script's doing.
    ignore = {"PWD", "OLDPWD", "SHLVL", "_"}
    return {k: v for k, v in after.items() if k not in ignore and base.get(k) != v}


def apply_env_script(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Source ``$TRAINPLANE_ENV_SCRIPT`` (if set) into ``environ``; returns what changed.

    >>> apply_env_script({})
    {}
    """
    env = os.environ if environ is None else environ
    script = env.get(ENV_SCRIPT)
    if not script:
        return {}
    changes = sourced_env(script, env)
    env.update(changes)
    return changes
