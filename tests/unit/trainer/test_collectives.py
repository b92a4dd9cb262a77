"""The NCCL preflight's sweep (trainer.collectives): real ranks under torchrun (gloo on CPU here), the
bus-bandwidth arithmetic of nccl-tests, and the floor verdict the CLI reads from the pod log."""

from __future__ import annotations

import pytest

from trainer.collectives import RESULT_PREFIX, Result, Row, bus_factor, find_result, main, table


def test_all_reduce_uses_its_own_bus_factor():
    assert bus_factor("all_reduce", 2) == 1.0 and bus_factor("all_gather", 8) == 7 / 8
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("broadcast", 2)


def test_the_result_line_round_trips_and_the_last_one_wins():
    r = Result("all_reduce", 16, "nccl", [Row(1 << 30, 9000.0, 119.3, 223.7)], 189.0)
    log = "\n".join(["noise", f"{RESULT_PREFIX} {r.to_json()}", "more noise"])
    assert find_result(log) == r and r.passed
    low = Result("all_reduce", 16, "nccl", [Row(1 << 30, 9000.0, 50.0, 93.7)], 189.0)
    assert find_result(log + f"\n{RESULT_PREFIX} {low.to_json()}") == low and not low.passed
    assert find_result("the pod died before the sweep") is None
    assert "peak busbw 93.70 GB/s, floor 189.0 GB/s: BELOW FLOOR" in table(low)


def test_a_bad_sweep_is_a_config_error_not_a_crash(capsys):
    assert main(["--min-bytes", "8M", "--max-bytes", "1M"]) == 2
    assert "bad sweep" in capsys.readouterr().err
