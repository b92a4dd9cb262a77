"""Config loading/validation and the elastic sampler, in-process (fast)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.build import lr_factor
from trainer.config import ConfigError, load_config, parse_args
from trainer.data import ElasticSampler, epoch_permutation
from trainer.model import GPT, gpt_config


def test_job_stack_block_is_accepted_as_is(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("trainer: {model: gpt-small, globalBatchSize: 512, microBatchSize: 8, steps: 20000}\n")
    cfg = load_config(f, env={})
    assert (cfg.model, cfg.global_batch_size, cfg.micro_batch_size, cfg.steps) == ("gpt-small", 512, 8, 20000)
    assert cfg.accumulation(64) == 1 and cfg.accumulation(8) == 8


def test_precedence_defaults_file_env_flags(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("steps: 10\nmetricsPort: 1000\ncheckpoint: {keep: 4}\n")
    env = {
        "TRAINPLANE_CONFIG": str(f),
        "TRAINPLANE_METRICS_PORT": "2000",
        "TRAINPLANE_CHECKPOINT_URI": "s3://b/run",
        "TRAINPLANE_JOB_NAME": "job-a",
    }
    cfg = load_config(None, ["steps=20", "checkpoint.interval_steps=7"], env=env)
    assert cfg.steps == 20 and cfg.metrics_port == 2000 and cfg.job_name == "job-a"
    assert cfg.checkpoint.uri == "s3://b/run" and cfg.checkpoint.keep == 4
    assert cfg.checkpoint.interval_steps == 7


def test_flag_shorthand_and_camel_case():
    path, sets = parse_args(["--steps", "5", "--globalBatchSize=16", "--checkpoint.async-save", "false"])
    cfg = load_config(path, sets, env={})
    assert cfg.steps == 5 and cfg.global_batch_size == 16 and cfg.checkpoint.async_save is False


@pytest.mark.parametrize(
    ("sets", "needle"),
    [
        (["globalBatchSize=8", "microBatchSize=3"], "8 is not a multiple of microBatchSize 3"),
        (["globalBatchSize=24", "microBatchSize=8", "worldSizes=[2, 4]"], "no solution for any allowed"),
        (["checkpoint.keep=1"], "checkpoint.keep"),
        (["nope=1"], "nope: unknown key"),
        (["precision=fp8"], "precision"),
        (["compileBackend=inductr"], "compileBackend"),
    ],
)
def test_errors_name_the_key_on_one_line(sets, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, sets, env={})
    msg = str(e.value)
    assert msg.startswith("config error:") and needle in msg and "\n" not in msg


def test_world_size_that_does_not_divide_is_a_config_error():
    cfg = load_config(None, ["globalBatchSize=8", "microBatchSize=2"], env={})
    assert cfg.accumulation(4) == 1
    with pytest.raises(ConfigError, match="world size 3"):
        cfg.accumulation(3)


def test_bad_yaml_file_is_a_config_error(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("steps: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(f, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml", env={})


def test_gpt_small_is_about_124m_parameters():
    n = sum(p.numel() for p in GPT(gpt_config("gpt-small", 1024, 0.0, {})).parameters())
    assert 120e6 < n < 130e6


def test_lr_schedule_warms_up_and_decays():
    cfg = load_config(None, ["steps=100", "warmupSteps=10", "minLrRatio=0.1"], env={})
    assert lr_factor(cfg, 0) == pytest.approx(0.1) and lr_factor(cfg, 9) == pytest.approx(1.0)
    assert lr_factor(cfg, 99) == pytest.approx(0.1, abs=1e-3)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(5, 300),
    mb=st.sampled_from([1, 2, 3]),
    accum_ws=st.sampled_from([(1, 4), (2, 2), (4, 1)]),
    start=st.integers(0, 20),
    seed=st.integers(0, 5),
)
def test_sampler_steps_are_world_size_independent(n, mb, accum_ws, start, seed):
    """Every step is the same multiset of samples at any world size, and epochs are permutations."""
    gb = mb * 4
    steps = start + 3

    def per_step(ws: int) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(steps - start)]
        per_rank = gb // ws
        for r in range(ws):
            idx = list(ElasticSampler(n, seed, gb, mb, ws, r, start, steps))
            for s in range(steps - start):
                out[s] += idx[s * per_rank : (s + 1) * per_rank]
        return [sorted(x) for x in out]

    one = per_step(1)
    assert per_step(accum_ws[1]) == one
    # positions map through the epoch permutation: the first epoch covers the dataset exactly once
    first = list(ElasticSampler(n, seed, 1, 1, 1, 0, 0, n))
    assert sorted(first) == list(range(n)) and first == epoch_permutation(n, seed, 0).tolist()
