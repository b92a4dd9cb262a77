"""The parts of tests/unit/test_regions.py that run real processes or servers (integration tier)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.plans import ROOT


def test_the_providers_region_must_be_the_platforms(tmp_path):
    text = (ROOT / "stacks" / "Pulumi.aws-dev.yaml").read_text()
    assert "  aws:region: us-east-1" in text
    bad = tmp_path / "Pulumi.two-regions.yaml"
    bad.write_text(text.replace("  aws:region: us-east-1", "  aws:region: us-west-2"))
    proc = subprocess.run(
        [sys.executable, "-m", "infra.cli", "plan", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"{bad}: 1 problem(s)",
        "aws:region: 'us-west-2' differs from platform.region 'us-east-1'; set both to the same region "
        "(or drop aws:region)",
    ]
