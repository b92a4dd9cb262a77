"""``python -m trainer.launch [torchrun options] [-- trainer options]``: torchrun with honest exit codes.

Stock torchrun exits 1 for every failure, preemption included, so a Kubernetes podFailurePolicy cannot
tell a spot reclaim from a bug. This wrapper runs ``torch.distributed.run`` in-process and maps:

* 0   the run is complete: all workers finished, or the final checkpoint committed (then also when a
      SIGTERM reached the launcher while the workers were shutting down);
* 143 preempted (SIGTERM/SIGUSR1 to the launcher or the workers) after a checkpoint was committed, and
      only then (the workers leave a marker after the commit);
* 2   configuration error, checked here before any worker starts (config, model/dataset references, data
      files, a checkpoint root that cannot be written, a changed training config, ``FI_PROVIDER=efa``
      without NCCL's net plugin: trainer/netplugin.py); workers also exit 2;
* 75  a peer node vanished (a worker's collective broke on a remote end, or the group could not
      rendezvous again) while this node was healthy: retried without counting, at most
      ``TRAINPLANE_MAX_PEER_LOSSES`` times in a row without a new checkpoint, then 1 (trainer/peerloss.py);
      in a fixed-size job torchrun does not restart the group in the pod first (``_patch_peer_loss_stop``);
* otherwise the first real failure's code: 124 hang (watchdog), 74 checkpoint saves kept failing, a
  crashing worker's own code (128 + N for one killed by signal N); 1 when the launcher was signalled
  and nothing got committed.

"First real failure": when one worker fails, torchrun sends SIGTERM to the others and they die of it
(-15) or of the broken connection (exit 1, SIGABRT). Those knock-on codes never win over the failure that
caused them: the launcher notes which workers had failed before torchrun started tearing the group down,
and among those prefers a distinctive code over 1/SIGABRT.

SIGUSR1 (an early warning some schedulers send) is added to the signals torchrun forwards, so the
workers see it. The shutdown timeout (``--shutdown-timeout``, grace before SIGKILL) defaults to
``TRAINPLANE_GRACE_S`` or 60 s rather than torchrun's 30 s, so that a preemption checkpoint can commit.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

from trainer import lifecycle, netplugin, peerloss, preflight
from trainer.config import ConfigError, TrainConfig, load_config, parse_args
from trainer.contract import (
    DEFAULT_GRACE_S,
    ENV_GRACE_S,
    ENV_JOB_NAME,
    ENV_LAUNCH_DIR,
    ENV_LAUNCHER_PID,
    ENV_SCRIPT,
    EXIT_CONFIG,
    EXIT_CRASH,
    EXIT_OK,
    EXIT_PEER_LOST,
    EXIT_PREEMPTED,
    exit_action,
    exit_meaning,
)
from trainer.envscript import apply_env_script
from trainer.metrics import json_line
from trainer.zygote import start_zygote

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


# pids of the workers that had failed on their own before torchrun tore the group down (its latest group)
_PRIMARY: set[int] = set()


def _patch_failure_capture() -> None:
    """Record which workers had failed before torchrun's teardown signalled the rest.

    torchrun polls its workers, and on the first failure closes the whole group (SIGTERM, SIGKILL after the
    grace) and then records the exit codes of the workers it killed too, all in one failure list. The
    close is the boundary: whatever had failed before it failed on its own.
    """
    from torch.distributed.elastic.multiprocessing import api

    original = api.PContext.close

    def close(self: Any, *args: Any, **kwargs: Any) -> None:
        failed = getattr(self, "_failures", None)
        if failed:
            _PRIMARY.clear()
            _PRIMARY.update(f.pid for f in failed.values())
        original(self, *args, **kwargs)

    api.PContext.close = close  # type: ignore[method-assign]


_ABORT = {-int(signal.SIGABRT), 128 + int(signal.SIGABRT)}  # NCCL's watchdog aborting a broken communicator
_TEARDOWN = {-int(signal.SIGTERM), EXIT_PREEMPTED}  # what torchrun's own SIGTERM leaves behind


def _knock_on_rank(code: int) -> int:
    """Which of this node's worker exits names the cause: a worker's own code (7, 74, 124, a signal) first,
    then a plain crash (1: a remote peer's broken collective exits 75 now, so a 1 is this node's own
    failure, and the 75 of its local peers is its knock-on), then a lost peer node (75), then an abort."""
    return 3 if code in _ABORT else 2 if code == EXIT_PEER_LOST else 1 if code == 1 else 0


def failure_code(failures: dict[int, Any], primary: set[int], preempted: bool, finished: bool) -> int:
    """The launcher's exit code for a failed worker group (pure; ``failures`` as in ChildFailedError)."""
    if preempted:
        return EXIT_PREEMPTED  # every rank passed the barrier behind a committed preemption checkpoint
    if finished:
        return EXIT_OK  # the final checkpoint committed; a worker failing in its teardown changes nothing
    own = [f for f in failures.values() if f.pid in primary] or list(failures.values())
    # A worker's own failure (7, 74, 124...) before a lost peer (75) before a broken connection (1, SIGABRT)
    first = min(own, key=lambda f: (f.exitcode in _TEARDOWN, _knock_on_rank(f.exitcode), f.timestamp))
    code = int(first.exitcode)
    code = 128 - code if code < 0 else code  # killed by signal N
    return EXIT_CRASH if code == EXIT_PREEMPTED else code  # 143 is a promise that a checkpoint committed


def signalled_code(sig: int, preempted: bool, finished: bool) -> int:
    """The launcher's exit code when it was signalled itself (pure but for the workers' exit markers)."""
    if preempted:
        return EXIT_PREEMPTED
    if finished:
        return EXIT_OK  # the signal came after the final checkpoint committed
    chosen = lifecycle.worker_exit_code()
    # A worker whose collective broke while this node shut down saw its own node's shutdown, not a lost
    # peer node: 75 here would make an uncommitted preemption an uncounted restart.
    if chosen is not None and chosen != EXIT_PEER_LOST:
        return chosen  # e.g. 74: the preemption checkpoint could not be written
    print(
        f"trainplane.launch: {signal.Signals(sig).name} received and no preemption checkpoint was committed",
        file=sys.stderr,
    )
    return EXIT_CRASH


def _torchrun_args(run_opts: list[str], trainer_opts: list[str]) -> Any:
    from torch.distributed import run as torchrun

    if not _has(run_opts, "--signals-to-handle", "--signals_to_handle"):
        run_opts = [f"--signals-to-handle={FORWARDED}", *run_opts]
    # torchrun gained --shutdown-timeout after torch 2.11; an image with an older torch keeps its 30 s.
    known = torchrun.get_args_parser()._option_string_actions
    if "--shutdown-timeout" in known and not _has(run_opts, "--shutdown-timeout", "--shutdown_timeout"):
        grace = int(float(os.environ.get(ENV_GRACE_S, DEFAULT_GRACE_S)))
        run_opts = [f"--shutdown-timeout={grace}", *run_opts]
    return torchrun.parse_args([*run_opts, "-m", "trainer", *trainer_opts])


def _preflight(cfg: TrainConfig, tr_args: Any) -> None:
    """The global batch at the largest world size, and the preflight checks; ConfigError if not."""
    if cfg.world_sizes is None:
        cfg.accumulation(_max_world_size(tr_args))
    preflight.check(cfg)


# Worker-group restarts torchrun's agent made in this launcher (after a failure, within --max-restarts,
# or to admit nodes that joined an elastic job); the exit summary reports them.
_RESTARTS = [0]


def _patch_restart_count() -> None:
    """Count the agent's worker-group restarts (torch 2.13 SimpleElasticAgent._restart_workers, called
    for both reasons in its monitoring loop, torch/distributed/elastic/agent/server/api.py)."""
    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent

    original = SimpleElasticAgent._restart_workers

    def restart(self: Any, worker_group: Any) -> None:
        _RESTARTS[0] += 1
        original(self, worker_group)

    SimpleElasticAgent._restart_workers = restart  # type: ignore[method-assign]


def is_fixed_size(tr_args: object) -> bool:
    """Whether the job has a fixed number of nodes (``--nnodes=N`` or ``N:N``), as torchrun parses it
    (torch@v2.13.0:torch/distributed/run.py parse_min_max_nnodes).

    >>> from types import SimpleNamespace as Args
    >>> [is_fixed_size(Args(nnodes=n)) for n in ("2", "2:2", "1:4")]
    [True, True, False]
    """
    bounds = str(getattr(tr_args, "nnodes", "1")).split(":")
    return len(bounds) in (1, 2) and bounds[0].strip() == bounds[-1].strip()


# Whether this launcher's job has a fixed number of nodes (set per run; the patch below reads it).
_FIXED_SIZE = [False]


def _patch_peer_loss_stop() -> None:
    """In a fixed-size job, a worker group that failed because a peer node vanished (75) ends the agent's
    run: no in-pod restart.

    torch@v2.13.0:torch/distributed/elastic/agent/server/api.py, SimpleElasticAgent._invoke_run: after
    ``_monitor_workers`` returns FAILED it restarts the group while ``_remaining_restarts > 0`` (the
    restart stops the workers and enters the rendezvous again), else stops the workers and returns the
    failed result (which torchrun raises as ChildFailedError). A fixed-size group cannot form again
    without the lost node, so that restart waits in the rendezvous until its timeout (over 150 s in a
    trial on the surviving master, which hosts the store), and no pod fails until Kubernetes marks the
    lost node's pod failed. Setting ``_remaining_restarts`` to 0 when the failure's code (as the launcher
    would report it) is 75 makes the agent stop at once, so the pod exits 75 and the JobSet's
    PeerLossRestartsWithoutCounting rule restarts the whole gang. (The torchelastic events then report
    the restarts as used up, which only their metadata reads.)

    Elastic jobs (``--nnodes=MIN:MAX``, c10d) keep the in-pod restart: re-forming with the nodes that are
    left, at a smaller world size, is what they are for. Other failures (124 hang, 74 saves failed, a
    crash) keep torchrun's in-pod restarts too. If torch's internals differ (no ``_monitor_workers`` on
    the local agent, no ``_remaining_restarts``), nothing changes: the old behaviour, no crash.
    """
    try:
        from torch.distributed.elastic.agent.server.api import WorkerState
        from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    except ImportError:
        return
    original = getattr(LocalElasticAgent, "_monitor_workers", None)
    if original is None or getattr(original, "_trainplane_peer_loss", False):
        return  # not torch 2.13's agent, or patched already (main() run twice in one process)

    def monitor(self: Any, worker_group: Any) -> Any:
        result = original(self, worker_group)
        try:
            if (
                _FIXED_SIZE[0]
                and result.state == WorkerState.FAILED
                and result.failures
                and getattr(self, "_remaining_restarts", 0) > 0
                and failure_code(result.failures, _PRIMARY, False, False) == EXIT_PEER_LOST
            ):
                self._remaining_restarts = 0
                print(
                    "trainplane.launch: a peer node is gone (worker exit 75): no in-pod restart of a "
                    "fixed-size group; the job restarts all nodes",
                    file=sys.stderr,
                    flush=True,
                )
        except Exception:  # torch's internals changed: keep its own restart decision
            pass
        return result

    monitor._trainplane_peer_loss = True  # type: ignore[attr-defined]
    LocalElasticAgent._monitor_workers = monitor  # type: ignore[method-assign]


def summary_line(code: int, job: str | None, restarts: int, seconds: float) -> str:
    """The launcher's last stdout line: one JSON object saying how it ended (the workers' events come
    before it, one per line, in the same format).

    >>> import json
    >>> json.loads(summary_line(143, "gpt", 1, 12.345))["meaning"]
    'preempted after a committed checkpoint'
    """
    rec = {
        "ts": round(time.time(), 3),
        "event": "launcher_exit",
        "job": job,
        "exit_code": code,
        "meaning": exit_meaning(code),
        "action": exit_action(code),
        "restarts": restarts,
        "duration_s": round(seconds, 3),
    }
    return json_line(rec)


def _run(cfg: TrainConfig, tr_args: Any) -> int:
    code, cause = _run_group(tr_args)
    if code != EXIT_PEER_LOST:
        return code
    # uncounted only a few times in a row without progress (trainer/peerloss.py)
    verdict = peerloss.settle(
        cfg.checkpoint.uri, peerloss.node_id(getattr(tr_args, "node_rank", None)), keep=cfg.checkpoint.keep
    )
    return peerloss.report(verdict, cause)


def _run_group(tr_args: Any) -> tuple[int, str]:
    """torchrun's run of the worker group: the exit code, and for a peer loss what showed it."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    _patch_second_signal()
    _patch_failure_capture()
    _patch_restart_count()
    _FIXED_SIZE[0] = is_fixed_size(tr_args)
    _patch_peer_loss_stop()
    with tempfile.TemporaryDirectory(prefix="trainplane-launch-") as status:
        os.environ[ENV_LAUNCH_DIR] = status
        os.environ[ENV_LAUNCHER_PID] = str(os.getpid())
        preempted, finished = Path(status, lifecycle.PREEMPTED), Path(status, lifecycle.FINISHED)
        zygote = start_zygote()
        try:
            torchrun.run(tr_args)
            return EXIT_OK, ""
        except ChildFailedError as e:
            code = failure_code(e.failures, _PRIMARY, preempted.exists(), finished.exists())
            return code, "a worker's collective broke"
        except SignalException as e:
            return signalled_code(
                e.sigval, preempted.exists(), finished.exists()
            ), "a worker's collective broke"
        except Exception as e:
            # torchrun's agent could not form the group again after a worker failure: the store or the
            # other nodes are gone (measured: DistNetworkError "Broken pipe" when the master node vanished)
            if not peerloss.is_rendezvous_failure(e) or finished.exists():
                raise
            first = (str(e).strip().splitlines() or [""])[0][:200]
            return EXIT_PEER_LOST, f"rendezvous failed: {type(e).__name__}: {first}"
        finally:
            if zygote is not None:
                zygote.stop()  # torchrun has stopped every worker it started


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    job: list[str | None] = [os.environ.get(ENV_JOB_NAME)]  # the config's jobName once it is read
    code = _main(argv, job)
    print(summary_line(code, job[0], _RESTARTS[0], time.monotonic() - started), flush=True)
    return code


def _main(argv: list[str] | None, job: list[str | None]) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    run_opts, trainer_opts = _split(argv)
    try:
        # before anything reads the environment: the fabric's script may set what the config reads too
        changed = apply_env_script()
        if changed:
            print(f"trainplane.launch: {ENV_SCRIPT} set {', '.join(sorted(changed))}", file=sys.stderr)
        # after the script (it may set FI_PROVIDER or LD_LIBRARY_PATH): EFA without NCCL's plugin is TCP
        netplugin.check_efa_plugin()
        path, sets = parse_args(trainer_opts)
        cfg = load_config(path, sets)
        job[0] = cfg.job_name
        tr_args = _torchrun_args(run_opts, trainer_opts)
        _preflight(cfg, tr_args)
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        return EXIT_CONFIG
    return _run(cfg, tr_args)


if __name__ == "__main__":
    sys.exit(main())
