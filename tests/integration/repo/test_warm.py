"""tests/helpers/warm.py: a warm start behaves as `python -m MODULE` would, or is not made."""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest

from tests.helpers import procs
from tests.helpers.trainer import Proc, env, starter
from tests.helpers.warm import WarmPopen, eligible

# A module the child runs from its working directory (`python -m` puts it first on sys.path).
CHILD = textwrap.dedent(
    """
    import atexit, json, os, random, sys, threading, time
    atexit.register(lambda: print("atexit ran", flush=True))
    mode = sys.argv[1]
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "var": os.environ.get("WARM_TEST_VAR"),
                      "random": random.random(), "sid": os.getsid(0) == os.getpid(),
                      "torch": "torch" in sys.modules, "name": __name__}))
    if mode == "thread":  # a non-daemon thread is joined before the exit, as the interpreter does
        threading.Thread(target=lambda: (time.sleep(0.5), print("thread done", flush=True))).start()
    if mode == "exit7":
        sys.exit(7)
    if mode == "raise":
        raise ValueError("boom")
    if mode == "sleep":
        time.sleep(300)
    """
)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "warmchild.py").write_text(CHILD)
    return tmp_path


def _run(workdir: Path, name: str, mode: str) -> Proc:
    p = Proc(["-m", "warmchild", mode], workdir, name, {"WARM_TEST_VAR": name})
    assert isinstance(p.p, WarmPopen), "a start the starter can make was made cold"
    return p


def test_a_warm_child_is_python_dash_m_in_its_own_session_files_and_environment(workdir: Path) -> None:
    import json

    ok, seven, boom, thread = (_run(workdir, m, m) for m in ("ok", "exit7", "raise", "thread"))
    assert [p.wait(60) for p in (ok, seven, boom, thread)] == [0, 7, 1, 0]
    first = json.loads(ok.out.read_text().splitlines()[0])
    assert first["argv"] == ["ok"] and first["cwd"] == str(workdir) and first["var"] == "ok"
    assert first["sid"] and first["torch"] and first["name"] == "__main__"
    assert ok.out.read_text().splitlines()[-1] == "atexit ran"
    assert "ValueError: boom" in boom.err.read_text() and "Traceback" in boom.err.read_text()
    assert thread.out.read_text().splitlines()[1:] == ["thread done", "atexit ran"]
    # random was seeded again in each child, as a fresh interpreter seeds it
    randoms = {json.loads(p.out.read_text().splitlines()[0])["random"] for p in (ok, seven, boom, thread)}
    assert len(randoms) == 4


def test_signals_reach_the_child_and_its_death_is_reported_as_popen_does(workdir: Path) -> None:
    p = _run(workdir, "sleeper", "sleep")
    p.wait_for(lambda e: e.get("argv") == ["sleep"])
    os.killpg(p.p.pid, signal.SIGTERM)  # its own group, as procs.spawn makes them
    assert p.wait(30) == -signal.SIGTERM
    q = _run(workdir, "sleeper2", "sleep")
    q.wait_for(lambda e: e.get("argv") == ["sleep"])
    procs.kill(q.p)  # teardown's way: SIGKILL to the group, reaped, unregistered
    assert q.p.returncode == -signal.SIGKILL and q.p.pid not in procs._live


def test_a_start_a_fork_cannot_honour_is_cold(workdir: Path, tmp_path: Path) -> None:
    base = starter().env
    with open(tmp_path / "f", "wb") as f:
        files = [f.fileno()] * 3
        assert eligible(["-m", "trainer"], env(), base, files)
        # the loader reads LD_LIBRARY_PATH when a process starts: a fork keeps the starter's
        assert not eligible(["-m", "trainer"], env(LD_LIBRARY_PATH="/x"), base, files)
        assert not eligible(["-m", "trainer"], env(OMP_NUM_THREADS="4"), base, files)
        assert not eligible(["-c", "print(1)"], env(), base, files)
    master, slave = os.openpty()
    try:  # a terminal on stdout: Python picks line buffering at start
        assert not eligible(["-m", "trainer"], env(), base, [0, slave, slave])
    finally:
        os.close(master)
        os.close(slave)
    cold = Proc(["-m", "warmchild", "ok"], workdir, "cold", {"LD_LIBRARY_PATH": str(tmp_path)})
    assert not isinstance(cold.p, WarmPopen) and cold.wait(60) == 0
    assert '"torch": false' in cold.out.read_text()  # a fresh interpreter: nothing preloaded
