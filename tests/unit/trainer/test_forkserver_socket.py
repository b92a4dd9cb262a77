"""trainer/forkserver.py: the server's socket (the launcher's zygote, the tests' starter) accepts from the
moment its path exists."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from trainer import forkserver


def test_the_starters_socket_listens_before_it_takes_the_name_clients_wait_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client connects as soon as the path exists (Starter._ensure): at the rename, the socket must
    # already accept. Before the fix it listened after the rename, and a client in between was refused.
    rename = os.rename
    accepted_at_rename: list[bool] = []

    def rename_after_a_connect(src: str, dst: str) -> None:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(src)
            accepted_at_rename.append(True)
        except ConnectionRefusedError:
            accepted_at_rename.append(False)
        finally:
            probe.close()
        rename(src, dst)

    monkeypatch.setattr(forkserver.os, "rename", rename_after_a_connect)
    path = str(tmp_path / "starter.sock")
    srv = forkserver._listen(path)
    try:
        assert accepted_at_rename == [True]
        assert os.path.exists(path) and not os.path.exists(path + ".tmp")
    finally:
        srv.close()
