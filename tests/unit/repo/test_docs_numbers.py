"""Numbers and names the docs quote are the product's: each is compared with what it prints or writes.

Plan figures carry a marker right after the number, invisible once rendered:
`137 resources<!-- plan aws-dev resources -->`, `about 27 minutes<!-- plan aws-dev critical-minutes -->`;
inside a code block a line quoting `trainplane plan STACK ... about N min` is read the same way. An
unmarked resource count or critical-path time is a failure too, so new ones cannot drift unnoticed.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.helpers.cli import cached_plans
from tests.helpers.plans import ROOT, planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(
    r"(?P<n>\d+)[^\d<\n]{0,24}<!-- plan (?P<stack>[\w-]+) (?P<what>resources|critical-minutes) -->"
)
COMMAND = re.compile(r"trainplane plan (?P<stack>[\w-]+)\b[^\n]*?about (?P<n>\d+) min")


@functools.cache
def _summary(stack: str):
    from infra.stacks import plan_stack

    with cached_plans():  # the stack's mock-engine run is the one planned() shares in this process
        return plan_stack(stack)[1]


def _printed(stack: str, what: str) -> int:
    """What `trainplane plan STACK` prints: the tree's resource count, the critical path's minutes."""
    s = _summary(stack)
    return s.resource_count if what == "resources" else int(f"{s.critical_seconds / 60:.0f}")


def _claims() -> list[tuple[str, str, str, int]]:
    """(page, stack, what, number) for each plan figure the docs quote."""
    out = []
    for page in MARKDOWN:
        text = page.read_text()
        name = str(page.relative_to(ROOT))
        out += [(name, m["stack"], m["what"], int(m["n"])) for m in MARKER.finditer(text)]
        out += [(name, m["stack"], "critical-minutes", int(m["n"])) for m in COMMAND.finditer(text)]
    return out


def test_the_docs_quote_the_reference_stacks_plan_figures():
    # The figures the issue found stale (117/51/28 and "about a hundred" resources; 17 and 25 minutes).
    claims = {(stack, what) for _, stack, what, _ in _claims()}
    assert {("aws-dev", "resources"), ("gcp-dev", "resources"), ("onprem-dev", "resources")} <= claims
    assert ("aws-dev", "critical-minutes") in claims


def test_every_plan_figure_in_the_docs_is_what_plan_prints():
    wrong = [
        f"{page}: {stack} {what} {n}, plan prints {_printed(stack, what)}"
        for page, stack, what, n in _claims()
        if n != _printed(stack, what)
    ]
    assert wrong == []


def test_no_resource_count_or_critical_path_time_goes_unmarked():
    loose = []
    for page in MARKDOWN:
        for i, line in enumerate(page.read_text().splitlines(), 1):
            if "<!-- plan " in line or COMMAND.search(line):
                continue
            count = re.search(r"\b(\d+|a hundred|hundreds of) resources\b", line)
            minutes = re.search(r"about \d+ min", line)
            if count or (minutes and re.search(r"critical path|trainplane plan|pulumi up", line)):
                loose.append(f"{page.relative_to(ROOT)}:{i}: {line.strip()}")
    assert loose == []


def test_the_job_stacks_checkpoint_prefix_comment_is_what_it_plans():
    """stacks/Pulumi.gpt-small-aws-dev.yaml said `prefix = job name`; s3://auto is <bucket>/<team>/<job>."""
    line = next(
        ln
        for ln in (ROOT / "stacks" / "Pulumi.gpt-small-aws-dev.yaml").read_text().splitlines()
        if "uri:" in ln
    )
    claimed = re.search(r"prefix <team>/<job>: (\S+)", line)
    assert claimed, line
    job = yaml.safe_load((ROOT / "stacks" / "Pulumi.gpt-small-aws-dev.yaml").read_text())["config"][
        "trainplane:job"
    ]
    uri = planned("gpt-small-aws-dev").outputs["checkpointUri"]
    assert uri.endswith("/" + claimed.group(1)) and claimed.group(1) == f"{job['team']}/{job['name']}"


def _trainer_md() -> str:
    return (ROOT / "docs" / "trainer.md").read_text()


def test_trainer_md_names_the_manifests_config_keys_as_the_manifest_writes_them(tmp_path: Path):
    """trainer.md said the manifest's `config` holds `seqLen`; the trainer writes `seq_len`."""
    from trainer.checkpoint.manifest import ManifestFields, build_manifest
    from trainer.config import TrainConfig

    config = TrainConfig().training_config()
    manifest = build_manifest(3, {"__0_0.distcp": 1}, {"__0_0.distcp": 0}, ManifestFields(2, "h", config))
    listed = re.search(r"`config` holds the training keys[^(]*\(([^;]+);", _trainer_md())
    assert listed, "the sentence listing the manifest's training keys moved"
    assert [k.strip() for k in re.sub(r"\s+", " ", listed.group(1)).split(",")] == list(config)
    example = re.search(r"```json\n(\{\"step\".*?)```", _trainer_md(), flags=re.S)
    assert example
    top = re.findall(r'(?:^|[{,]\s*)"(\w+)":', example.group(1).replace("\n", " "))
    inner = re.search(r'"config": \{([^}]*)\}', example.group(1))
    assert inner
    assert set(top) - {"lr", "seq_len"} == set(manifest)
    assert set(re.findall(r'"(\w+)":', inner.group(1))) <= set(config)


@pytest.mark.parametrize("name", ["gpu-platform", "training-job"])
def test_template_readmes_name_what_their_defaults_plan(name, tmp_path):
    """The training-job README said "an Indexed Job"; a fixed-size job is a JobSet."""
    from tests.helpers.templates import instantiate

    readme = (ROOT / "stacks" / "templates" / name / "README.md").read_text()
    template = yaml.safe_load((ROOT / "stacks" / "templates" / name / "Pulumi.yaml").read_text())
    defaults = {k: str(v.get("default", "")) for k, v in template["template"]["config"].items()}
    if name == "training-job":
        fixed = ":" not in defaults["trainplane:nodes"]
        first = readme.split("\n\n")[1]  # the paragraph that says what the job is
        assert first.startswith("A distributed PyTorch training job") and re.search(r"\bJobSet\b", first)
        assert fixed and first.index("JobSet") < first.index("Indexed Job")
        assert (
            f"team `{defaults['trainplane:team']}`" in readme
            and f"pool `{defaults['trainplane:nodePool']}`" in readme
        )
        _org, project, stack = defaults["trainplane:platformStack"].split("/")
        assert f"named `{project}` with stack `{stack}`" in readme
    else:
        assert "us-east-1 on aws, us-central1 on gcp" in readme
        config = instantiate(name, tmp_path / "gpu-platform")
        assert "trainplane:region" not in config


def test_the_manifest_example_is_json_but_for_its_ellipses():
    example = re.search(r"```json\n(\{\"step\".*?)```", _trainer_md(), flags=re.S)
    assert example
    json.loads(example.group(1).replace("…", "x"))


def test_trainer_md_launcher_exit_example_is_what_the_launcher_prints():
    from trainer.launch import summary_line

    example = re.search(r"```json\n(\{\"ts\"[^`]*\"launcher_exit\".*?)```", _trainer_md(), flags=re.S)
    assert example
    shown = json.loads(example.group(1))
    printed = json.loads(
        summary_line(shown["exit_code"], shown["job"], shown["restarts"], shown["duration_s"])
    )
    assert shown.keys() == printed.keys()
    assert {k: shown[k] for k in ("meaning", "action")} == {k: printed[k] for k in ("meaning", "action")}
