"""Entry point of the Pulumi program (`main: infra/` in Pulumi.yaml)."""

import sys
from pathlib import Path

# `pulumi up` runs this file with infra/ as the working directory; make the project importable even
# when the package is not installed into the virtualenv.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.program import run

run()
