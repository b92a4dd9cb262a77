"""Warm starts: a trainer or launcher process forked from a Python that has already imported torch.

Importing torch, torch.distributed and its checkpoint package costs a process 3 to 4 s of a CPU here, and
the trainer's tests start about a hundred launchers and single trainers, each paying it before its first
line of work (a launcher's workers do not: its zygote forks them, trainer/zygote.py). A warm start skips
that one import and nothing else:

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

The server, the child's start and the client's handle are trainer/forkserver.py's, which the launcher's zygote
uses to fork torchrun's workers (trainer/zygote.py); this module adds the starter as a process of its own (a pytest
worker has threads and cannot fork one) and the rule for which starts may be warm.

What a fork cannot give a child is refused, never approximated: a start whose environment differs from
the starter's in a variable read when a process or a library starts (`STARTUP_VARS`: the dynamic loader's,
Python's, OpenMP's, torch's, gloo's...), one that is not ``-m MODULE``, or whose stdout or stderr is a
terminal, is made cold (`eligible`), as is every start in a test that measures the imports themselves.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from trainer.forkserver import PRELOAD, ForkedProc, ServerGone, module_args, request
from trainer.zygote import startup_env

__all__ = ["PRELOAD", "Starter", "StarterGone", "WarmPopen", "eligible"]

# The client's handle on a warm child, and what it raises when the starter ends first.
WarmPopen = ForkedProc
StarterGone = ServerGone


def eligible(
    args: Sequence[str], env: Mapping[str, str], starter_env: Mapping[str, str], fds: Sequence[int]
) -> bool:
    """Whether a start of ``python *args`` with `env` can be a fork of a starter that began with
    `starter_env`: ``-m MODULE ...``, the same start-up variables, no terminal on stdout/stderr."""
    if not args or args[0] != "-m" or module_args(args) is None:
        return False
    if startup_env(env) != startup_env(starter_env):
        return False
    return not any(os.isatty(fd) for fd in fds[1:])


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
        code = f"from trainer.forkserver import serve; serve({self.path!r}, {os.getpid()})"
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
        parsed = module_args(args)
        assert parsed is not None, f"not a warm start: {args}"
        return request(self.path, parsed[0], parsed[1], str(cwd), env, fds)
