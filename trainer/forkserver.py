"""A fork server: a process that has imported torch forks one child per request into ``python -m MODULE``.

The launcher's zygote (trainer/zygote.py) serves torchrun's worker starts with it, and the tests' warm starts
(tests/helpers/warm.py) their trainer and launcher processes. A request (a Unix socket connection) carries
the module, argv, working directory, environment and the stdin/stdout/stderr file descriptors; the child:

- is a real process in a session of its own (its pid is its process group, as torchrun's Popen and the
  tests' procs.spawn make them), with those files, environment and directory, and runs ``python [-u] -m
  MODULE ARGS`` as the interpreter would: runpy as ``__main__``, unbuffered stdio with ``-u``, default
  dispositions for the signals its server ignores, non-daemon threads joined, atexit handlers run, the exit
  code of SystemExit, 1 and a traceback for an uncaught exception; `random` and NumPy seeded again from the OS;
- is reaped by the server, which reports its wait status back on the request's connection (`ForkedProc`,
  the part of subprocess.Popen torchrun and the tests use: pid, poll, wait, returncode, send_signal).

What may be forked (and what must start fresh) is the caller's rule: trainer/zygote.py, tests/helpers/warm.py.
"""

from __future__ import annotations

import contextlib
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
from typing import Any

from trainer.contract import ENV_LAUNCHER_PID

# What a worker imports before its first step and the launcher has not: DCP, and torch._dynamo and
# torch.nn.parallel (DDP imports dynamo when it wraps the model, 0.9 s of a worker's start). Only torch's own
# modules and fsspec: none of them reads the environment when imported. The trainer's modules are not
# preloaded: a module of ours that read a variable at import would see the launcher's, not the worker's.
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
# gloo/NCCL's first use of a few, CUDA): a child forked from a zygote that read other values cannot honour them.
# Signals a launcher's process group gets (a terminal, tini -g, a test's killpg): the launcher forwards them
# to the workers itself; the zygote ignores them and dies only with the launcher.
GROUP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT)
_HEADER = struct.Struct("!I")


def module_args(args: Sequence[str]) -> tuple[str, list[str]] | None:
    """(MODULE, ARGS) of ``[-u] -m MODULE ARGS``; None for any other command line.

    >>> module_args(["-u", "-m", "trainer", "--steps", "3"])
    ('trainer', ['--steps', '3'])
    >>> module_args(["-c", "print(1)"]) is None
    True
    """
    rest = list(args[1:]) if args[:1] == ["-u"] else list(args)
    if len(rest) < 2 or rest[0] != "-m":
        return None
    return rest[1], rest[2:]


# ---- the server --------------------------------------------------


def serve(path: str, parent: int, preload: Sequence[str] = PRELOAD) -> None:
    """Import `preload`, then fork a child per connection on the Unix socket `path` until `parent` is gone."""
    import importlib

    for name in preload:
        importlib.import_module(name)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # a fork keeps only the forking thread: a library's pool would be half there
        sys.exit(f"zygote: {threads} threads after importing {', '.join(preload)}; a fork is unsafe")
    if not _children_can_use_cuda():
        sys.exit("zygote: CUDA was initialized before the fork; a forked worker could not use the GPU")
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


def _children_can_use_cuda() -> bool:
    """Whether a child of this process may still initialize CUDA. Once a process has asked CUDA for its
    devices or initialized it, torch marks every later fork "bad" and refuses CUDA there ("Cannot re-initialize
    CUDA in forked subprocess"; torch/csrc/cuda/Module.cpp registers the fork handler from getDeviceCount
    and lazy init). Nothing the launcher or PRELOAD runs should do so; a probe child says whether it did."""
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    pid = os.fork()
    if pid == 0:
        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


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
    sys.stdout.flush()  # nothing of the server's may be written again by a child
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
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"status": status}).encode() + b"\n")
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
    """Become ``python [-u] -m MODULE ARGS`` in the request's session, files, environment and directory."""
    code = 1
    try:
        os.setsid()
        for sig in GROUP_SIGNALS:  # what the zygote ignores, a fresh process does not
            signal.signal(sig, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        if req.get("launcher_pid_is_parent"):
            os.environ[ENV_LAUNCHER_PID] = str(os.getppid())  # the worker dies with us (we die with it)
        if req.get("unbuffered"):
            _unbuffered()
        _reseed()
        code = _run_module(req["module"], req["argv"], req["cwd"])
    finally:
        os._exit(code)


def _unbuffered() -> None:
    """stdout and stderr as ``python -u`` makes them: every write reaches the file at once."""
    import io

    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = io.TextIOWrapper(
            io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _reseed() -> None:
    """A fresh process seeds `random` and NumPy's global generator from the OS; the server's copies are
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
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


# ---- the client ------------------------------------------------------------------------------------


def request(
    path: str,
    module: str,
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    fds: Sequence[int],
    *,
    unbuffered: bool = False,
    launcher_pid_is_parent: bool = False,
) -> ForkedProc:
    """Ask the server at `path` for ``python -m MODULE ARGV`` with stdin/stdout/stderr `fds`."""
    req = {
        "module": module,
        "argv": list(argv),
        "cwd": cwd,
        "env": dict(env),
        "unbuffered": unbuffered,
        "launcher_pid_is_parent": launcher_pid_is_parent,
    }
    payload = json.dumps(req).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    socket.send_fds(conn, [_HEADER.pack(len(payload)) + payload], list(fds))
    return ForkedProc(conn, ["python", "-m", module, *argv])


class ServerGone(RuntimeError):
    """The server ended before reporting its child's exit."""


class ForkedProc:
    """What torchrun (and the tests) use of subprocess.Popen, for a child of the server."""

    def __init__(self, conn: socket.socket, args: list[str]) -> None:
        self.args = args
        self._conn = conn
        self._buf = b""
        self.returncode: int | None = None
        msg = self._message(timeout=60)
        if msg is None or "pid" not in msg:
            raise RuntimeError("the zygote did not start the process")
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
                raise ServerGone(
                    f"the zygote is gone; the state of pid {getattr(self, 'pid', '?')} is unknown"
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
