"""`trainplane plan` as a user runs it: its exit code and what it prints, run in-process off a terminal
(tests/helpers/cli.py); tests/integration/infra/test_cli.py runs each command once as a real process."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import cli
from tests.helpers.plans import FLEET_STACKS, ROOT, stack_files

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


def test_plan_prints_a_readable_summary():
    proc = cli("plan", "onprem-dev", env={"COLUMNS": "160"})
    assert proc.returncode == 0, proc.stderr
    for heading in ("Resources by type", "Node pools and cost", "At scale", "Critical path"):
        assert heading in proc.stdout


def test_invalid_stack_exits_2_with_one_line_per_problem(tmp_path):
    bad = tmp_path / "Pulumi.bad.yaml"
    text = (ROOT / "stacks" / "Pulumi.aws-dev.yaml").read_text()
    bad.write_text(
        text.replace("gpu: H100", "gpu: H1000").replace(
            "maxNodes: 4\n      - name: h100", "maxNodez: 4\n      - name: h100"
        )
    )
    proc = cli("plan", str(bad), env={"COLUMNS": "160"})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == f"{bad}: 2 problem(s)"
    assert "platform.nodePools[0].maxNodez: unknown key; did you mean 'maxNodes'?" in lines
    assert any(line.startswith("platform.nodePools[1].gpu: 'H1000' is not a known GPU") for line in lines)
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("config: [unclosed", "not valid YAML"),
        (
            "config:\n  platform: {cloud: aws}\n",
            "config key 'platform' needs a namespace, e.g. trainplane:platform",
        ),
        (
            "config:\n  aws:region: us-east-1\n",
            "no trainplane:platform (or trainplane:job, trainplane:fleet) object in config",
        ),
    ],
)
def test_unreadable_stack_files_are_named(tmp_path, content, expected):
    f = tmp_path / "Pulumi.x.yaml"
    f.write_text(content)
    proc = cli("plan", str(f), env={"COLUMNS": "160"})
    assert proc.returncode == 2
    assert expected in proc.stderr and str(f) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_stack_is_a_usage_error():
    proc = cli("plan", "no-such-stack", env={"COLUMNS": "160"})
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(
        f"{ROOT / 'stacks' / 'Pulumi.no-such-stack.yaml'}: no such stack file"
    )


@pytest.mark.parametrize("stack", [p.name[len("Pulumi.") : -len(".yaml")] for p in stack_files()])
def test_every_stack_file_plans(stack):
    proc = cli("plan", stack, "--json", env={"COLUMNS": "160"}, cached=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["resources"] >= 1
    assert data["criticalPath"]["steps"], "a plan always has a critical path"


# ---- exit codes and --debug (issue 22) ------------------------------------------------------------
COMMANDS = ("plan", "render", "verify", "nccl-test", "status")


def test_help_of_every_command_prints_the_one_exit_code_table():
    from infra.cli import EXIT_CODES, build_parser

    parser = build_parser()
    helps = [parser.format_help()] + [
        parser._subparsers._group_actions[0].choices[c].format_help() for c in COMMANDS
    ]
    for text in helps:
        assert EXIT_CODES in text
    for code, meaning in (("0", "ok"), ("1", "a check failed"), ("2", "could not"), ("3", "internal")):
        assert any(
            line.strip().startswith(f"{code}  ") and meaning in line for line in EXIT_CODES.splitlines()
        )


def _boom(*args, **kwargs):
    raise RuntimeError("boom")


@pytest.mark.parametrize("where", ["before", "after"])
def test_internal_errors_exit_3_and_debug_goes_anywhere(monkeypatch, capsys, where):
    from infra import cli, plan

    monkeypatch.setattr(plan, "summarize_platform", _boom)
    assert cli.main(["plan", "onprem-dev"]) == 3
    assert capsys.readouterr().err.strip() == (
        "trainplane: internal error: RuntimeError: boom (rerun with --debug)"
    )
    # `--debug` appended after the command used to be "unrecognized arguments: --debug" (exit 2).
    argv = ["--debug", "plan", "onprem-dev"] if where == "before" else ["plan", "onprem-dev", "--debug"]
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: boom" in err
    assert "rerun with --debug" not in err  # not the advice to do what was just done


@pytest.mark.parametrize("command", COMMANDS)
def test_bad_input_is_exit_2_for_every_command(command, capsys):
    from infra import cli

    argv = [command, "no-such-stack"] + (["--out", "/tmp/x"] if command == "render" else [])
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Pulumi.no-such-stack.yaml: no such stack file" in err[0]


# ---- output that survives a pipe (issue 22) -------------------------------------------------------
STACK_NAMES = [p.name[len("Pulumi.") : -len(".yaml")] for p in stack_files()]


def _pools_and_prices(stack: str) -> tuple[list[str], list[str]]:
    """The pool names and the per-node prices `plan` shows for a stack, worked out in process."""
    from components.spec import JobSpec, PlatformSpec
    from infra import stackfile
    from infra.plan import estimate_cost, job_cost
    from infra.plan_output import money

    sf = stackfile.load(stack, ROOT)
    raw = sf.object("trainplane:platform")
    if sf.object("trainplane:fleet") is not None:
        return [w["name"] for w in sf.object("trainplane:fleet")["workers"]], []  # type: ignore[index]
    if raw is not None:
        cost = estimate_cost(PlatformSpec.load(raw))
    else:
        job = JobSpec.load(sf.object("trainplane:job"))
        if job.on_fleet:  # the workers' table names each worker of the fleet
            fleet = stackfile.load(job.fleet_stack, ROOT).object("trainplane:fleet")
            return [w["name"] for w in fleet["workers"]], []  # type: ignore[index]
        platform = stackfile.load(job.platform_stack.split("/")[-1], ROOT).object("trainplane:platform")
        cost = job_cost(job, PlatformSpec.load(platform))
    prices = [money(v) for p in cost.pools for v in (p.on_demand_hourly, p.spot_hourly) if v is not None]
    prices += [money(v) for v in (cost.min_hourly, cost.max_hourly) if v is not None]
    return [p.pool for p in cost.pools], prices


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_piped_plan_and_verify_never_cut_a_name_or_a_price(stack):
    # Off a terminal rich used to lay out 80 columns: `h100-b…`, `$24.77…`, `capaci…`. COLUMNS stays
    # unset here, as in CI and `make demo > file`.
    plan = cli("plan", stack, cached=True)
    assert plan.returncode == 0, plan.stderr
    assert "…" not in plan.stdout
    pools, prices = _pools_and_prices(stack)
    cells = {c.strip() for line in plan.stdout.splitlines() for c in line.split("│")}
    for name in pools:
        assert name in cells, f"pool {name} not printed whole"
    for price in prices:
        assert price in cells, f"price {price} not printed whole"
    if stack in FLEET_STACKS:
        assert "best capacity" in plan.stdout
    else:
        for header in ("capacity", "on-demand/node", "spot/node", "reserved/node", "GPUs/node"):
            assert header in plan.stdout
    verify = cli("verify", stack, cached=True)
    assert verify.returncode in (0, 1), verify.stderr
    assert "…" not in verify.stdout
    from infra.verify.registry import default_checks

    # A fleet stack runs the fleet checks, any other stack the cluster checks.
    for check in default_checks("fleet" if stack in FLEET_STACKS else "platform"):
        assert check in {c.strip() for line in verify.stdout.splitlines() for c in line.split("│")}
