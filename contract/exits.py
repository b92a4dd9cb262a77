"""The trainer's exit codes: what `python -m trainer.launch` and its workers exit with.

The trainer writes them (trainer/contract.py re-exports them with their meaning and the platform's action:
its table is the documentation), the job stack builds the pod failure policy from them, and the GPU health
controller (controllers/suspects.py) and `trainplane status` read them back from terminated containers. The
controller image carries contract/ but not the trainer, so the codes live here, once.

Standard library only, as all of contract/.
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_CRASH: Final = 1
EXIT_CONFIG: Final = 2
EXIT_SAVE_FAILED: Final = 74  # sysexits.h EX_IOERR
EXIT_PEER_LOST: Final = 75  # sysexits.h EX_TEMPFAIL: a peer node vanished; trainer/peerloss.py
EXIT_HANG: Final = 124  # as timeout(1)
EXIT_PREEMPTED: Final = 143  # 128 + SIGTERM, what Kubernetes and Lightning read as "terminated"
