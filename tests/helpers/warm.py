"""Warm starts: a trainer or launcher process forked from a Python that has already imported torch.

Importing torch, torch.distributed and its checkpoint package costs a process 3 to 4 s of a CPU here, and
the trainer's tests start about a hundred launchers and single trainers, each paying it before its first
line of work (and a launcher's workers pay it again: they are torchrun's, started cold as in production).
A warm start skips that one import and nothing else:

- the starter (`serve`, one per test process, started on first use with procs.spawn so that it ends
  with the session) imports what `PRELOAD` names, then forks one child per request;
- the child is a real process in a session of its own (its pid is its process group, as procs.spawn
  makes them), with the test's stdin/stdout/stderr file descriptors (passed over a Unix socket), its
  environment, working directory and argv, and runs ``python -m MODULE ARGS`` as the interpreter would:
  runpy as ``__main__``, non-daemon threads joined, atexit handlers run, the exit code of SystemExit, 1
  and a traceback for an uncaught exception; the random generators the parent seeded at import are
  seeded again from the OS, as a fresh process's are;
- the starter reaps it and reports its wait status back on the request's connection (`WarmPopen`, the
  subset of subprocess.Popen that the tests and procs.py use: pid, poll, wait, returncode, send_signal).

What a fork cannot give a child is refused, never approximated: a start whose environment differs from
the starter's in a variable read when a process or a library starts (`STARTUP_VARS`: the dynamic loader's,
Python's, OpenMP's, torch's, gloo's...), one that is not ``-m MODULE``, or whose stdout or stderr is a
terminal, is made cold (`eligible`), as is every start in a test that measures the imports themselves.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

# torch._dynamo and torch.nn.parallel: DDP imports dynamo when it wraps the model (0.9 s of a trainer's start)
PRELOAD = (
    "torch",
    "torch.distributed",
    "torch.distributed.run",
    "torch.distributed.checkpoint",
    "torch._dynamo",
    "torch.nn.parallel",
    "fsspec",
)

# Read when a process or a library starts (the loader, the interpreter, OpenMP/MKL, torch's C++ logging,
# gloo/NCCL's first use of a few): a child forked from a starter that read other values cannot honour them.
STARTUP_VARS = (
    "LD_",
    "PYTHON",
    "OMP_",
    "MKL_",
    "KMP_",
    "TORCH_",
    "GLOO_",
    "NCCL_",
    "CUDA_",
    "MALLOC_",
    "GCSFS_",
)
_HEADER = struct.Struct("!I")


def _startup(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_VARS)}


def eligible(
    args: Sequence[str], env: Mapping[str, str], starter_env: Mapping[str, str], fds: Sequence[int]
) -> bool:
    """Whether a start of ``python *args`` with `env` can be a fork of a starter that began with
    `starter_env`: ``-m MODULE ...``, the same start-up variables, no terminal on stdout/stderr."""
    if len(args) < 2 or args[0] != "-m":
        return False
    if _startup(env) != _startup(starter_env):
        return False
    return not any(os.isatty(fd) for fd in fds[1:])


# ---- the starter (its own process) -----------------------------------------------------------------


def serve(path: str, parent: int) -> None:
    """Import PRELOAD, then fork a child per connection on the Unix socket `path` until `parent` is gone."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # a fork keeps only the forking thread: a library's pool would be half there
        sys.exit(f"warm starter: {threads} threads after importing {', '.join(PRELOAD)}; a fork is unsafe")
    srv = _listen(path)
    waiting: dict[int, socket.socket] = {}
    while os.getppid() == parent:
        ready, _, _ = select.select([srv], [], [], 0.05)
        if ready:
            conn, _ = srv.accept()
            _start(srv, conn, waiting)
        _reap(waiting)
    for conn in waiting.values():
        conn.close()


def _listen(path: str) -> socket.socket:
    """A socket that accepts connections at `path` from the moment `path` exists.

    Clients wait for the path to appear and then connect at once: the socket listens under a temporary
    name first, and only then takes its name (a client that connected between the rename and listen()
    was refused: ECONNREFUSED, seen once in CI)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path + ".tmp")
    srv.listen(64)
    os.rename(path + ".tmp", path)
    return srv


def _start(srv: socket.socket, conn: socket.socket, waiting: dict[int, socket.socket]) -> None:
    try:
        req, fds = _receive(conn)
    except (OSError, ValueError):
        conn.close()
        return
    sys.stdout.flush()  # nothing of the starter's may be written again by a child
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        srv.close()
        for other in waiting.values():
            other.close()
        conn.close()
        _child(req, fds)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass  # the client is gone: its child is reaped all the same
    waiting[pid] = conn


def _reap(waiting: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(json.dumps({"status": status}).encode() + b"\n")
            except OSError:
                pass
            conn.close()


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < _HEADER.size:
        more = conn.recv(1 << 16)
        if not more:
            raise ValueError("short request")
        data += more
    (size,) = _HEADER.unpack_from(data)
    while len(data) < _HEADER.size + size:
        more = conn.recv(1 << 16)
        if not more:
            raise ValueError("short request")
        data += more
    return json.loads(data[_HEADER.size : _HEADER.size + size]), list(fds)


def _child(req: dict[str, Any], fds: list[int]) -> None:
    """Become ``python -m MODULE ARGS`` in the request's session, files, environment and directory."""
    code = 1
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        _reseed()
        code = _run_module(req["module"], req["argv"], req["cwd"])
    finally:
        os._exit(code)


def _reseed() -> None:
    """A fresh process seeds `random` and NumPy's global generator from the OS; the starter's copies are
    shared by every child until seeded again."""
    import random

    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()


def _run_module(module: str, argv: list[str], cwd: str) -> int:
    import atexit
    import runpy
    import threading
    import traceback

    sys.argv = [module, *argv]
    sys.path[0] = cwd  # `python -m` puts the working directory first
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_code(e.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    # What the interpreter does on its way out: join the non-daemon threads, run atexit, flush.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


# ---- the client (the test process) ---------------------------------------------------------------


class Starter:
    """This test process's starter: started on first use, a new one if it died."""

    def __init__(self, folder: Path, env: Mapping[str, str], spawn: Any) -> None:
        self.folder = folder
        self.env = dict(env)
        self._spawn = spawn  # procs.spawn: the starter is a group that ends with the session
        self._proc: Any = None
        self.path = ""

    def _ensure(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = str(self.folder / f"starter-{os.getpid()}-{time.monotonic_ns()}.sock")
        code = f"from tests.helpers.warm import serve; serve({self.path!r}, {os.getpid()})"
        log = open(self.folder / f"starter-{os.getpid()}.log", "ab")
        self._proc = self._spawn(
            [sys.executable, "-c", code], env=self.env, stdout=log, stderr=log, stdin=None
        )
        log.close()
        deadline = time.monotonic() + 120
        while not os.path.exists(self.path):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the warm starter did not start: see {log.name}")
            time.sleep(0.05)

    def start(
        self, args: Sequence[str], cwd: Path, env: Mapping[str, str], files: Sequence[IO[bytes] | int]
    ) -> WarmPopen:
        self._ensure()
        fds = [f if isinstance(f, int) else f.fileno() for f in files]
        req = {"module": args[1], "argv": list(args[2:]), "cwd": str(cwd), "env": dict(env)}
        payload = json.dumps(req).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        socket.send_fds(conn, [_HEADER.pack(len(payload)) + payload], fds)
        return WarmPopen(conn, ["python", *args])


class StarterGone(RuntimeError):
    """The starter ended before reporting its child's exit (killed at the session's end)."""


class WarmPopen:
    """What tests and procs.py use of subprocess.Popen, for a child of the starter."""

    def __init__(self, conn: socket.socket, args: list[str]) -> None:
        self.args = args
        self._conn = conn
        self._buf = b""
        self.returncode: int | None = None
        msg = self._message(timeout=60)
        if msg is None or "pid" not in msg:
            raise RuntimeError("the warm starter did not start the process")
        self.pid: int = int(msg["pid"])

    def _message(self, timeout: float | None) -> dict[str, Any] | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._conn], [], [], left)
            if not ready:
                return None
            chunk = self._conn.recv(4096)
            if not chunk:
                raise StarterGone(
                    f"the warm starter is gone; the state of pid {getattr(self, 'pid', '?')} is unknown"
                )
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def poll(self) -> int | None:
        if self.returncode is None:
            msg = self._message(timeout=0)
            if msg is not None:
                self._done(msg)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            msg = self._message(timeout)
            if msg is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._done(msg)
        assert self.returncode is not None
        return self.returncode

    def _done(self, msg: dict[str, Any]) -> None:
        self.returncode = os.waitstatus_to_exitcode(int(msg["status"]))
        self._conn.close()

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
