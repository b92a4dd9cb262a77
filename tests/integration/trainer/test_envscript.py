"""The launcher refuses a node without the env script before starting workers (a real launcher process;
tests/unit/trainer/test_envscript.py has the rest)."""

from __future__ import annotations

from tests.helpers.trainer import Proc


def test_the_launcher_refuses_a_node_without_the_script_before_starting_workers(tmp_path):
    p = Proc(
        ["-m", "trainer.launch", "--nproc-per-node", "1", "--", "--steps", "1"],
        tmp_path,
        "launch",
        extra_env={"TRAINPLANE_ENV_SCRIPT": "/usr/local/gib/scripts/set_nccl_env.sh"},
    )
    assert p.wait() == 2
    err = p.err.read_text().strip().splitlines()
    assert len(err) == 1 and "TRAINPLANE_ENV_SCRIPT=/usr/local/gib/scripts/set_nccl_env.sh" in err[0]
