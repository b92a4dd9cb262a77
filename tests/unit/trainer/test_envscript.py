"""A fabric's NCCL script (TRAINPLANE_ENV_SCRIPT, e.g. GKE gIB's set_nccl_env.sh) is sourced before any
worker starts; a missing or failing script is a one-line configuration error (exit 2), not a slow run."""

from __future__ import annotations

import pytest

from trainer.config import ConfigError
from trainer.envscript import apply_env_script


def test_the_scripts_exports_and_changes_are_applied_and_nothing_else(tmp_path):
    script = tmp_path / "set_nccl_env.sh"
    script.write_text('export NCCL_NET=gIB\nexport NCCL_IB_TC=52\nLOCAL_ONLY=1\nexport PATH="/opt/x:$PATH"\n')
    env = {"TRAINPLANE_ENV_SCRIPT": str(script), "PATH": "/usr/bin:/bin", "NCCL_NET": "Socket"}
    changed = apply_env_script(env)
    assert changed == {"NCCL_NET": "gIB", "NCCL_IB_TC": "52", "PATH": "/opt/x:/usr/bin:/bin"}
    assert env["NCCL_NET"] == "gIB" and "LOCAL_ONLY" not in env


def test_a_missing_or_failing_script_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"no such file \(is the fabric's installer running"):
        apply_env_script({"TRAINPLANE_ENV_SCRIPT": str(tmp_path / "absent.sh"), "PATH": "/usr/bin:/bin"})
    bad = tmp_path / "bad.sh"
    bad.write_text("echo 'gib: no RDMA device found' >&2\nfalse\n")
    with pytest.raises(ConfigError, match="sourcing it failed: gib: no RDMA device found"):
        apply_env_script({"TRAINPLANE_ENV_SCRIPT": str(bad), "PATH": "/usr/bin:/bin"})
