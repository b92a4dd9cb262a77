"""The Python snippets of the README and docs/components.md run as written."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pulumi
import pytest

from infra.mockcloud import run_program
from tests.helpers.plans import ROOT, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def _python_block(page: Path, heading: str, index: int = 0) -> str:
    """The `index`-th ```python block of the section under `heading`."""
    section = page.read_text().split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)[index]


def _readme_program(tmp_path: Path) -> Path:
    program = tmp_path / "own" / "__main__.py"
    program.parent.mkdir()
    program.write_text(
        _python_block(ROOT / "README.md", "## Using the components in your own Pulumi program")
    )
    return program


def test_readme_library_snippet_plans_a_platform(tmp_path):
    config = {"trainplane:platform": json.dumps(platform_object("onprem-dev"))}
    result = run_program(config, "dev", program=_readme_program(tmp_path))
    assert result.outputs["cloud"] == "kubernetes"


def test_readme_library_snippet_reports_bad_config_as_one_line_per_problem(tmp_path):
    """The snippet let ConfigError escape: `pulumi up` then printed a Python traceback, not the problems."""
    bad = platform_object("onprem-dev")
    bad["nodePools"][0]["gpusPerNode"] = "many"
    bad["teams"][0]["gpuQuota"] = -1
    with pytest.raises(pulumi.RunError) as caught:
        run_program({"trainplane:platform": json.dumps(bad)}, "dev", program=_readme_program(tmp_path))
    lines = str(caught.value).splitlines()
    assert lines[0] == "invalid stack config:" and len(lines) == 3
    assert any("gpusPerNode" in ln for ln in lines) and any("gpuQuota" in ln for ln in lines)


def test_components_md_test_snippet_runs_and_its_assert_can_fail(monkeypatch):
    """docs/components.md asserted `op.resources.release.name`, an Output: true whatever was planned."""
    code = _python_block(ROOT / "docs" / "components.md", "## One component on its own", index=1)
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    exec(compile(code, "components.md", "exec"), namespace)
    (release,) = namespace["result"].of_type("kubernetes:helm.sh/v3:Release")
    assert release.inputs["chart"] == "gpu-operator"
    # The snippet's assertions fail when what they check is false: run its last line on a wrong release.
    last = [ln for ln in code.splitlines() if ln.startswith("assert ")]
    assert last, "the snippet asserts nothing"
    release.inputs["chart"] = "something-else"
    with pytest.raises(AssertionError):
        exec(last[-1], namespace)
    assert os.getcwd() == str(ROOT)
