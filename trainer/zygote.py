"""Workers that start without paying for ``import torch``: a zygote the launcher forks before torchrun runs.

torchrun starts each worker as a fresh interpreter (``python -u -m trainer ...``), and every worker, at the
job's start and again at each in-pod restart of the group, spends seconds importing torch, torch.distributed
and its checkpoint package before its first line of work (3 to 4 s of a CPU on the CI machine; on CPU, 12 to
17 s of a 16 to 23 s restart was imports and process-group set-up). The launcher has imported torch already
(torchrun is torch), so it forks a zygote before torchrun's agent starts any thread (`start_zygote`), and
torchrun's subprocess handler asks the zygote for each worker instead of exec'ing a new interpreter
(`_patch_worker_start`). The zygote is a fork server (trainer/forkserver.py: how a child becomes ``python -u
-m trainer ...`` in its own session, and how torchrun polls, waits for and signals it). It:

- dies with the launcher (PR_SET_PDEATHSIG) and ignores the signals meant for the launcher's process group
  (forkserver.GROUP_SIGNALS), so a SIGTERM reaches the workers through torchrun, never by their parent's
  death; each worker dies with the zygote (``TRAINPLANE_LAUNCHER_PID`` names the zygote to the worker:
  trainer/lifecycle.py);
- is stopped by the launcher once torchrun has stopped its workers.

What a fork cannot give is never approximated; torchrun starts the worker itself (a fresh interpreter) when:
- its environment differs from the one the launcher started with (`initial_env`: what the loader, Python and
  the libraries torch loaded have read) in a variable read when a process or a library starts
  (`STARTUP_VARS`): an env script's LD_LIBRARY_PATH, or the OMP_NUM_THREADS=1 torchrun sets for its
  workers when the pod's environment has none (set it in the pod to have the zygote);
- it is not ``python [-u] -m MODULE`` with the launcher's interpreter (a NUMA binding wraps it);
- the launcher had threads at the fork (OpenBLAS starts a pool when it loads without OMP_NUM_THREADS), or the
  zygote could not start or would not serve (CUDA initialized before the fork: forkserver.serve): said on
  stderr;
- ``TRAINPLANE_ZYGOTE=0``.
A forked worker's command line (``ps``) is the launcher's: its parent is the zygote, a child of the launcher.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from trainer.contract import ENV_ZYGOTE
from trainer.forkserver import GROUP_SIGNALS, ForkedProc, module_args, request, serve

# Read when a process or a library starts (the loader, the interpreter, OpenMP/MKL, torch's C++ logging,
# gloo/NCCL's first use of a few, CUDA): a child forked from a zygote that read other values cannot honour them.
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
# Set by torchrun in every worker's environment and read only once the worker runs: ProcessGroupNCCL reads it
# when a process group is made (torch@v2.13.0 torch/distributed/elastic/agent/server/local_elastic_agent.py
# `worker_env["TORCH_NCCL_ASYNC_ERROR_HANDLING"]`), so a zygote without it can honour it.
READ_LATER = frozenset({"TORCH_NCCL_ASYNC_ERROR_HANDLING"})
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def initial_env() -> dict[str, str]:
    """The environment this process was started with (/proc/self/environ): what the loader, the interpreter
    and the libraries torch loaded at import read, before the launcher changed os.environ (its fabric
    script may set LD_LIBRARY_PATH; torchrun sets OMP_NUM_THREADS for its workers when it is unset)."""
    try:
        raw = open("/proc/self/environ", "rb").read()
    except OSError:
        return dict(os.environ)
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="surrogateescape"): v.decode(errors="surrogateescape") for k, v in pairs}


def startup_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` a process reads when it starts (a fork keeps its server's)."""
    return {k: v for k, v in env.items() if k.startswith(STARTUP_VARS) and k not in READ_LATER}


# ---- the launcher's zygote -------------------------------------------------------------------------


class Zygote:
    """A zygote forked from this process (the launcher), serving worker starts until this process ends."""

    def __init__(self, path: str, pid: int, env: Mapping[str, str]) -> None:
        self.path = path
        self.pid = pid
        self.env = dict(env)

    @classmethod
    def fork(cls) -> tuple[Zygote | None, str]:
        """The zygote, or None and why not ("" when it is turned off)."""
        if os.environ.get(ENV_ZYGOTE, "1") in ("0", "false", "no"):
            return None, ""
        threads = len(os.listdir(f"/proc/{os.getpid()}/task")) if os.path.isdir("/proc") else 0
        if threads != 1:
            return None, f"the launcher has {threads or 'unknown'} threads before its workers start"
        folder = tempfile.mkdtemp(prefix="trainplane-zygote-")
        path = os.path.join(folder, "zygote.sock")
        parent = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                for sig in GROUP_SIGNALS:
                    signal.signal(sig, signal.SIG_IGN)
                with contextlib.suppress(OSError, AttributeError):
                    libc = ctypes.CDLL(None, use_errno=True)
                    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
                serve(path, parent)
            except BaseException as e:  # never back into the launcher's code
                print(f"trainplane.launch: the zygote ended: {e}", file=sys.stderr, flush=True)
                code = 1
            finally:
                os._exit(code)
        deadline = time.monotonic() + 120
        while not os.path.exists(path):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done or time.monotonic() > deadline:
                return None, "the zygote did not start"
            time.sleep(0.01)
        return cls(path, pid, initial_env()), ""

    def stop(self) -> None:
        """End the zygote and reap it (its workers are gone: torchrun stopped them)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(os.path.dirname(self.path))

    def start(
        self, args: Sequence[str], env: Mapping[str, str], files: Sequence[IO[Any] | None]
    ) -> ForkedProc | None:
        """A worker for torchrun's command line ``args`` (its executable first) and environment, writing to
        `files` (stdout, stderr; None: the launcher's own); None when a fork cannot honour it."""
        if not args or os.path.realpath(args[0]) != os.path.realpath(sys.executable):
            return None
        parsed = module_args(args[1:])
        if parsed is None or startup_env(env) != startup_env(self.env):
            return None
        fds = [0, *[f.fileno() if f is not None else n for f, n in zip(files, (1, 2), strict=True)]]
        try:
            return request(
                self.path,
                parsed[0],
                parsed[1],
                os.getcwd(),
                env,
                fds,
                unbuffered=args[1:2] == ["-u"],
                launcher_pid_is_parent=True,
            )
        except (OSError, RuntimeError):
            return None  # the zygote is gone: torchrun starts this worker itself


# ---- the launcher's hook into torchrun ---------------------------------------------------------------

# The zygote this launcher's workers are forked from; None: torchrun starts them fresh.
_ZYGOTE: list[Zygote | None] = [None]


def _patch_worker_start() -> None:
    """torchrun's subprocess handler asks the zygote for a worker before it execs a fresh interpreter
    (torch@v2.13.0 torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py
    SubprocessHandler._popen: the Popen the handler keeps as ``proc`` and polls, waits for and signals its
    group through). A start the zygote cannot make (Zygote.start returns None) is torchrun's own."""
    from torch.distributed.elastic.multiprocessing.subprocess_handler.subprocess_handler import (
        SubprocessHandler,
    )

    original = SubprocessHandler._popen
    if getattr(original, "_trainplane_zygote", False):
        return

    def popen(self: Any, args: tuple[Any, ...], env: dict[str, str]) -> Any:
        zygote = _ZYGOTE[0]
        files = (getattr(self, "_stdout", None), getattr(self, "_stderr", None))
        proc = zygote.start([str(a) for a in args], env, files) if zygote is not None else None
        return proc if proc is not None else original(self, args, env)

    popen._trainplane_zygote = True  # type: ignore[attr-defined]
    SubprocessHandler._popen = popen  # type: ignore[method-assign]


def start_zygote() -> Zygote | None:
    """Fork the workers' zygote now, before torchrun's agent starts a thread, and have torchrun use it
    (None: torchrun starts them fresh, and why is said on stderr unless TRAINPLANE_ZYGOTE=0 says so)."""
    zygote, why = Zygote.fork()
    _ZYGOTE[0] = zygote
    if zygote is not None:
        _patch_worker_start()
    elif why:
        print(f"trainplane.launch: workers start as fresh interpreters: {why}", file=sys.stderr, flush=True)
    return zygote
