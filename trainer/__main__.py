"""``python -m trainer``: one training process (under torchrun or alone)."""

import sys

from trainer.train import main

sys.exit(main())
