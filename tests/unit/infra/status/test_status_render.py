"""`trainplane status`: its output for people (whole and the same every time when piped) and --json, and
how JOB names a job (infra/status/render.py, infra/commands/status.py)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from infra.commands.status import resolve_job
from infra.console import PIPE_WIDTH
from infra.stacks import UsageError
from infra.status import Series, build
from infra.status.render import as_json, print_timeline
from tests.helpers.cli import _bad_keys
from tests.helpers.status_cluster import job_state, step_series, unix


def printed(tl) -> str:
    out = io.StringIO()
    print_timeline(tl, Console(file=out, width=PIPE_WIDTH, color_system=None))  # as make_console off a tty
    return out.getvalue()


def test_piped_output_is_whole_and_the_same_every_time():
    tl = build(job_state(), Series(steps=step_series()))
    text = printed(tl)
    assert text == printed(build(job_state(), Series(steps=step_series())))
    assert "…" not in text
    lines = text.splitlines()
    assert lines[0] == "JobSet research/gpt-small: Running; 16 GPUs; 3 restart(s), 1 counted of 20"
    row = next(line for line in lines if line.lstrip().startswith("2 "))
    cells = [c.strip() for c in row.replace("│", "|").split("|")]
    assert cells == [
        "2",
        "2026-11-20T12:00:00Z",
        "JobSet",
        "hang",
        "yes",
        "pod gpt-small-workers-0-0-a1x0 exited 124: hang: the watchdog saw no step in time",
        "50",
        "19.0",
        "5.07",
    ]
    assert "lost in total: 120 steps, 11.20 GPU-hours" in lines


def test_without_prometheus_the_cluster_part_prints_and_the_columns_say_why():
    text = printed(build(job_state(), None, "no --prometheus URL given"))
    assert "restart 2: hang (counted)" in text and "hang" in text
    assert "lost in total: - steps, - GPU-hours" in text
    assert text.splitlines()[-1] == "Prometheus columns empty: no --prometheus URL given"


def test_a_restart_still_being_redone_is_marked():
    # The series ends at 12:07, while the hang's 50 steps are being redone (back at step 900 at 12:09).
    steps = [s for s in step_series() if s[0] <= unix(127)]
    text = printed(build(job_state(), Series(steps=steps)))
    row = next(line for line in text.splitlines() if line.lstrip().startswith("2 "))
    cells = [c.strip() for c in row.replace("│", "|").split("|")]
    assert cells[-3:] == ["50", "17.0", "4.53+"]  # 17 minutes so far, and counting
    assert "where: no trainplane_step sample after the restart" in text  # restart 3


def test_json_keys_are_camel_case_and_carry_the_figures():
    data = as_json(build(job_state(), Series(steps=step_series())))
    assert _bad_keys(data) == []
    assert (data["stepsLost"], data["gpuHoursLost"], data["restartsCounted"]) == (120, 11.2, 1)
    hang = data["restartList"][2]
    assert {
        k: hang[k] for k in ("number", "cause", "counted", "stepsLost", "highWaterStep", "resumedStep")
    } == {
        "number": 2,
        "cause": "hang",
        "counted": True,
        "stepsLost": 50,
        "highWaterStep": 900,
        "resumedStep": 850,
    }


# ---- JOB ------------------------------------------------------------------------------------------


def test_a_job_stack_names_its_teams_namespace_and_its_runtime():
    assert resolve_job("gpt-small-aws-dev", None) == ("research", "gpt-small", "JobSet")
    assert resolve_job("stacks/Pulumi.gpt-small-aws-dev.yaml", "other") == ("other", "gpt-small", "JobSet")


def test_namespace_and_name_without_a_stack():
    assert resolve_job("research/gpt-small", None) == ("research", "gpt-small", None)
    assert resolve_job("gpt-small", "research") == ("research", "gpt-small", None)


@pytest.mark.parametrize(
    ("job", "namespace", "said"),
    [
        ("gpt-smal", None, "Pulumi.gpt-smal.yaml: no such stack file"),
        ("aws-dev", None, "not a job stack"),
        ("research/gpt-small", "other", "another namespace"),
        ("/gpt-small", None, "NAMESPACE/NAME"),
    ],
)
def test_bad_job_arguments_are_one_line(job, namespace, said):
    with pytest.raises(UsageError) as caught:
        resolve_job(job, namespace)
    assert len(caught.value.lines) == 1 and said in caught.value.lines[0]


# ---- docs/cli.md ----------------------------------------------------------------------------------
def _docs_section() -> str:
    from tests.helpers.plans import ROOT

    text = (ROOT / "docs" / "cli.md").read_text()
    return text.split("## `trainplane status`", 1)[1].split("\n## ", 1)[0]


def test_the_sample_in_docs_cli_md_is_what_the_command_prints():
    sample = _docs_section().split("```text\n", 1)[1].split("```", 1)[0]
    out = printed(build(job_state(), Series(steps=step_series())))
    assert sample.rstrip("\n").splitlines() == [line.rstrip() for line in out.rstrip("\n").splitlines()]


def test_docs_cli_md_names_every_json_key():
    data = as_json(build(job_state(), Series(steps=step_series())))
    section = _docs_section()
    keys = [*data, *data["timeline"][0], *data["restartList"][0]]
    assert [k for k in keys if f"`{k}`" not in section] == []


def test_docs_cli_md_gives_the_causes_in_the_order_they_are_tried_and_the_contract_names():
    from contract.recovery import EVENT_EVICTED, EVENT_QUARANTINED, QUARANTINE_CONDITION
    from infra.status.causes import CAUSES

    section = _docs_section()
    table = section.split("| cause | evidence |", 1)[1].split("\n\n", 1)[0]
    assert [row.split("|")[1].strip() for row in table.strip().splitlines()[1:]] == list(CAUSES)
    for name in (EVENT_EVICTED, EVENT_QUARANTINED, QUARANTINE_CONDITION):
        assert f"`{name}`" in section
