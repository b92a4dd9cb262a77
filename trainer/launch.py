"""``python -m trainer.launch [torchrun options] [-- trainer options]``: torchrun with honest exit codes.

Stock torchrun exits 1 for every failure, preemption included, so a Kubernetes podFailurePolicy cannot
tell a spot reclaim from a bug. This wrapper runs ``torch.distributed.run`` in-process and maps:

* 0   all workers finished;
* 143 preempted (SIGTERM/SIGUSR1 to the launcher or the workers) after a checkpoint was committed;
* 2   configuration error (checked here before any worker starts; workers also exit 2);
* otherwise the exit code of the first failed worker (128 + N for a worker killed by signal N), or 1
  when the launcher was signalled and no checkpoint got committed.

SIGUSR1 (an early warning some schedulers send) is added to the signals torchrun forwards, so the
workers see it. The shutdown timeout (``--shutdown-timeout``, grace before SIGKILL) defaults to
``TRAINPLANE_GRACE_S`` or 60 s rather than torchrun's 30 s, so that a preemption checkpoint can commit.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

from trainer.config import ConfigError, load_config
from trainer.preemption import EXIT_PREEMPTED
from trainer.train import ENV_LAUNCH_DIR, EXIT_CONFIG, EXIT_CRASH, parse_args

FORWARDED = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _has(opts: list[str], *names: str) -> bool:
    return any(o == n or o.startswith(n + "=") for o in opts for n in names)


def _max_world_size(tr_args: object) -> int:
    nnodes = str(getattr(tr_args, "nnodes", "1"))
    max_nodes = int(nnodes.split(":")[-1])
    nproc = str(getattr(tr_args, "nproc_per_node", "1"))
    per = int(nproc) if nproc.isdigit() else 1
    return max_nodes * per


def _patch_second_signal() -> None:
    """Make a repeated termination signal a no-op for the agent while it shuts the workers down.

    torchrun's handler raises on every signal; a second SIGTERM during the graceful shutdown would abort
    the wait for the workers' preemption checkpoint and orphan them. The first signal still raises (and is
    forwarded to the workers); later ones are ignored so the grace period runs its course.
    """
    from torch.distributed.elastic.multiprocessing import api

    original = api._terminate_process_handler
    fired = {"n": 0}

    def handler(signum: int, frame: FrameType | None) -> None:
        fired["n"] += 1
        if fired["n"] == 1:
            original(signum, frame)

    api._terminate_process_handler = handler


def _first_failure_code(failures: dict[int, Any]) -> int:
    """The first failed worker's exit code.

    torchrun stamps failures without an error file with the second they were noticed, so a worker that
    crashed and the peers that died because it vanished (gloo "connection closed" -> exit 1, or abort ->
    SIGABRT) usually tie. Within a tie, prefer codes that are not such knock-on failures.
    """
    knock_on = {1, -int(signal.SIGABRT)}
    best = min(failures.values(), key=lambda f: (f.timestamp, f.exitcode in knock_on))
    return int(best.exitcode)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    run_opts, trainer_opts = _split(argv)
    try:
        path, sets = parse_args(trainer_opts)
        cfg = load_config(path, sets)
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        return EXIT_CONFIG

    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if not _has(run_opts, "--signals-to-handle", "--signals_to_handle"):
        run_opts = [f"--signals-to-handle={FORWARDED}", *run_opts]
    if not _has(run_opts, "--shutdown-timeout", "--shutdown_timeout"):
        run_opts = [f"--shutdown-timeout={int(float(os.environ.get('TRAINPLANE_GRACE_S', '60')))}", *run_opts]
    tr_args = torchrun.parse_args([*run_opts, "-m", "trainer", *trainer_opts])
    ws = _max_world_size(tr_args)
    try:
        cfg.accumulation(ws) if cfg.world_sizes is None else None
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        return EXIT_CONFIG

    _patch_second_signal()
    with tempfile.TemporaryDirectory(prefix="trainplane-launch-") as status:
        os.environ[ENV_LAUNCH_DIR] = status
        preempted = Path(status, "preempted")
        try:
            torchrun.run(tr_args)
            return 0
        except ChildFailedError as e:
            code = _first_failure_code(e.failures)
            if code == EXIT_PREEMPTED and not preempted.exists():
                code = EXIT_CRASH  # 143 is a promise that a checkpoint was committed
            elif code < 0:
                code = 128 - code  # killed by signal N
            return code
        except SignalException as e:
            if preempted.exists():
                return EXIT_PREEMPTED
            print(
                f"trainplane.launch: {signal.Signals(e.sigval).name} received and no preemption "
                "checkpoint was committed",
                file=sys.stderr,
            )
            return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(main())
