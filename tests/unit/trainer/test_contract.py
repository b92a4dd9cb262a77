"""trainer.contract and trainer.config.validate_trainer_config: what the job stack imports at plan time (exit
codes, env names, config validation)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.trainer import ROOT
from trainer.config import ConfigError, load_config, validate_trainer_config

TRAINER = ROOT / "trainer"


def _definitions(path: Path) -> list[str]:
    """String literals that are a TRAINPLANE_* name, and EXIT_* names bound to a number."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("TRAINPLANE_") and node.value.replace("_", "").isalnum():
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id.startswith("EXIT_") and isinstance(node.value.value, int):
                    found.append(f"{path.name}:{node.lineno}: {t.id}")
    return found


def test_exit_codes_and_env_names_are_defined_in_the_contract_only():
    files = [p for p in TRAINER.rglob("*.py") if p.name != "contract.py"]
    assert len(files) > 10
    assert [d for p in files for d in _definitions(p)] == []
    # The scan does see definitions: the env names in the trainer's contract, the codes in contract/exits.py.
    assert len(_definitions(TRAINER / "contract.py")) >= 10
    assert len(_definitions(TRAINER.parent / "contract" / "exits.py")) == 7


JOB_BLOCK = {  # what the job stack writes: the user's block plus its own decisions
    "model": "gpt-small",
    "globalBatchSize": 512,
    "microBatchSize": 8,
    "steps": 20000,
    "jobName": "gpt-small",
    "worldSizes": [16, 24, 32],
    "numWorkers": 4,
    "checkpoint": {"intervalSteps": 500, "keep": 3, "asyncSave": True},
}


@pytest.mark.parametrize(
    "block",
    [
        JOB_BLOCK,
        {**JOB_BLOCK, "global_batch_size": 256, "watchdog": {"floor_seconds": 60}},
        {**JOB_BLOCK, "globalBatchSise": 8},
        {**JOB_BLOCK, "checkpoint": {"keep": 1, "intervalSteps": 0, "bogus": True}},
        {**JOB_BLOCK, "globalBatchSize": 24, "microBatchSize": 8, "worldSizes": [2, 4]},
        {**JOB_BLOCK, "precision": "fp8", "lr": "fast", "modelArgs": {"n_layer": 2}},
    ],
)
def test_validation_says_what_the_trainer_says_at_start_up(tmp_path, block):
    """The job stack's check at plan time and the pods' own start-up give the same verdict and lines."""
    lines = validate_trainer_config(block, root="job.trainer")
    f = tmp_path / "trainer.yaml"
    f.write_text(yaml.safe_dump({"trainer": block}))
    try:
        load_config(f, env={})
    except ConfigError as e:
        bare = [line.removeprefix("job.trainer").removeprefix(".").removeprefix(": ") for line in lines]
        assert str(e) == "config error: " + "; ".join(bare)
        assert all(line.startswith("job.trainer") for line in lines)
    else:
        assert lines == []


def test_one_line_per_problem_whatever_the_keys_and_messages_hold():
    lines = validate_trainer_config({"bad\nkey": 1, "checkpoint": {"uri": ["x"], "we ird": 2}})
    assert [line.split(";")[0] for line in lines] == [
        "trainer.checkpoint.uri: Input should be a valid string",
        "trainer.checkpoint['we ird']: unknown key",
        "trainer['bad\\nkey']: unknown key",
    ]
    assert lines[1].endswith(
        "; known: asyncSave, intervalSteps, keep, maxConsecutiveFailures, threadCount, uri"
    )
    assert validate_trainer_config([1, 2]) == ["trainer: expected a mapping of trainer keys, got list"]


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.text(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
KEYS = st.sampled_from(["steps", "checkpoint", "modelArgs", "worldSizes", "seq_len", "watchdog", "x"])


@settings(max_examples=120, deadline=None)
@given(st.dictionaries(KEYS | st.text(max_size=6), json_values, max_size=5))
def test_any_block_is_accepted_or_refused_with_path_named_lines(block):
    for line in validate_trainer_config(block):
        assert "\n" not in line and "\r" not in line
        assert line.startswith(("trainer.", "trainer[", "trainer:")), line


def test_a_message_holding_a_newline_stays_on_one_line():
    from pydantic import BaseModel, ValidationError, field_validator

    from trainer.contract import format_validation_error

    class Block(BaseModel):
        name: str

        @field_validator("name")
        @classmethod
        def _known(cls, v: str) -> str:
            raise ValueError(f"unknown name {v}")

    with pytest.raises(ValidationError) as e:
        Block.model_validate({"name": "a\nb"})
    assert format_validation_error(e.value, Block, "") == ["name: unknown name a\\nb"]
