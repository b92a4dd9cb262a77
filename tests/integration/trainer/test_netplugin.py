"""EFA without NCCL's net plugin: the launcher (and the NCCL preflight) stop with one line and exit 2.

Real processes: the launcher with the environment an EFA pool's pod gets (FI_PROVIDER=efa), once with no
plugin anywhere NCCL would look, once with a (fake) plugin file on LD_LIBRARY_PATH.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.trainer import PLUGIN, Proc, launch
from trainer.config import ConfigError
from trainer.netplugin import candidate_names, check_efa_plugin, find_plugin


def _one_line(p: Proc) -> str:
    err = p.err.read_text().strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


def test_launcher_refuses_efa_without_the_plugin(tmp_path: Path) -> None:
    empty = tmp_path / "lib"
    empty.mkdir()
    p = launch(
        tmp_path,
        "efa",
        1,
        [*PLUGIN, "--steps", "2"],
        extra_env={"FI_PROVIDER": "efa", "LD_LIBRARY_PATH": str(empty)},
    )
    assert p.wait() == 2, p.tail()
    err = _one_line(p)
    assert err.startswith("config error: FI_PROVIDER=efa") and "libnccl-net.so" in err and str(empty) in err
    assert [e["event"] for e in p.events()] == ["launcher_exit"]  # refused before any worker started


def test_launcher_runs_with_a_plugin_on_ld_library_path(tmp_path: Path) -> None:
    lib = tmp_path / "ofi-nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl-net.so").write_bytes(b"\x7fELF fake")  # only its presence is checked
    p = launch(
        tmp_path,
        "efa",
        1,
        [*PLUGIN, "--steps", "2"],
        extra_env={"FI_PROVIDER": "efa", "LD_LIBRARY_PATH": f"/nonexistent:{lib}"},
    )
    assert p.wait() == 0, p.tail()


def test_nccl_preflight_refuses_efa_without_the_plugin(tmp_path: Path) -> None:
    p = Proc(
        ["-m", "trainer.collectives", "--max-bytes", "1M"],
        tmp_path,
        "sweep",
        {"FI_PROVIDER": "efa", "LD_LIBRARY_PATH": str(tmp_path), "NCCL_NET_PLUGIN": "ofi"},
    )
    assert p.wait() == 2, p.tail()
    assert "libnccl-net-ofi.so" in _one_line(p)


def test_plugin_names_follow_nccl(tmp_path: Path) -> None:
    # NCCL_NET_PLUGIN=ofi means libnccl-net-ofi.so; a plain libnccl-net.so does not satisfy it
    (tmp_path / "libnccl-net.so").write_bytes(b"")
    env = {"FI_PROVIDER": "efa", "LD_LIBRARY_PATH": str(tmp_path)}
    assert find_plugin(env) == str(tmp_path / "libnccl-net.so")
    with pytest.raises(ConfigError, match=r"libnccl-net-ofi\.so"):
        check_efa_plugin({**env, "NCCL_NET_PLUGIN": "ofi"})
    (tmp_path / "libnccl-net-ofi.so").write_bytes(b"")
    check_efa_plugin({**env, "NCCL_NET_PLUGIN": "ofi"})
    # an absolute path is taken as is, with no LD_LIBRARY_PATH
    check_efa_plugin({"FI_PROVIDER": "efa", "NCCL_NET_PLUGIN": str(tmp_path / "libnccl-net-ofi.so")})
    # not asked for EFA: nothing to check
    check_efa_plugin({"LD_LIBRARY_PATH": "/nonexistent"})
    assert candidate_names({"NCCL_NET_PLUGIN": "aws-ofi"}) == ["aws-ofi", "libnccl-net-aws-ofi.so"]
