"""``python -m trainer``: one training process (under torchrun or alone).

The process ends with `os._exit` once `main()` has returned its exit code. That code is the trainer's contract
with its launcher (0, 75, 124, 143, ...: trainer/contract.py), and by then everything the run writes is
committed and flushed: the checkpointer is closed, the event log's last line written, the process group
destroyed. Interpreter teardown has nothing left to save, but it can still crash in C++: a gloo or TCPStore
thread aborting once its peer's process is gone ("terminate called without an active exception", exit -6). That
happened once in CI to a rank that had logged `finished`, and torchrun then restarted the worker group while the
other node waited at its exit barrier. A raised exception still goes through the interpreter (its traceback).
"""

import os
import sys

from trainer.train import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
