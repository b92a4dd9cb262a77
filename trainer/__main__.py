"""``python -m trainer``: one training process (under torchrun or alone).

The process ends with `os._exit` once `main()` has returned its exit code. That code is the trainer's contract
with its launcher (0, 75, 124, 143, ...: trainer/contract.py), and by then everything the run writes is
committed and flushed: the checkpointer is closed, the event log's last line written, the process group
destroyed. Interpreter teardown has nothing left to save, but it can still crash in C++: a gloo or TCPStore
thread aborting once its peer's process is gone ("terminate called without an active exception", exit -6). That
happened once in CI to a rank that had logged `finished`, and torchrun then restarted the worker group while the
other node waited at its exit barrier. A raised exception still goes through the interpreter (its traceback).

The configuration is checked before torch is imported (trainer.config and trainer.lifecycle are torch-free):
a configuration error, exit 2, then costs the process well under a second instead of torch's import
(about 4 s of CPU measured on the 2-core CI machine), on every rank of the job.
"""

import os
import sys

from trainer.config import ConfigError, TrainConfig, load_config, parse_args
from trainer.contract import EXIT_CONFIG
from trainer.lifecycle import mark_exit


def _config() -> TrainConfig | ConfigError:
    try:
        return load_config(*parse_args(None))
    except ConfigError as e:
        return e


if isinstance(config := _config(), ConfigError):
    print(str(config), file=sys.stderr)
    code = EXIT_CONFIG
    mark_exit(int(os.environ.get("RANK", 0)), code)
else:
    from trainer.train import main

    code = main(config=config)
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
