"""gs:// checkpoint roots end to end against a GCS API emulator on loopback (issue 14 point 11)."""

from __future__ import annotations

import json
import signal

import pytest

from tests.helpers.trainer import BASE, assert_bitwise, final_state, launch

STEPS = 24


@pytest.mark.slow
def test_gcs_save_resume_and_torn_upload_skipped(tmp_path, corpus, reference, gcs_emulator):
    import gcsfs

    ref = reference(2, STEPS)
    args = [
        *BASE,
        "--dataset",
        "bytes",
        "--data-paths",
        f"[{corpus}]",
        "--steps",
        str(STEPS),
        "--checkpoint.uri",
        "gs://ckpt/run-1",
        "--checkpoint.interval-steps",
        "5",
    ]
    first = launch(tmp_path, "first", 2, args, extra_env=gcs_emulator)
    first.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 12)
    first.signal(signal.SIGTERM)
    assert first.wait() == 143, first.tail()
    stop = first.events("preempted_exit")[0]["ckpt_step"]

    fs = gcsfs.GCSFileSystem(endpoint_url=gcs_emulator["STORAGE_EMULATOR_HOST"], token="anon")
    man = json.loads(fs.cat_file(f"ckpt/run-1/step-{stop}/manifest.json"))
    assert man["world_size"] == 2 and set(man["crc32"]) == set(man["files"])
    # a torn upload: the newest checkpoint lost its manifest PUT (the commit never happened)
    fs.rm_file(f"ckpt/run-1/step-{stop}/manifest.json")
    fs.invalidate_cache()
    older = max(s for s in (5, 10, 15, 20) if s < stop)

    second = launch(tmp_path, "second", 2, args, extra_env=gcs_emulator)
    assert second.wait() == 0, second.tail()
    assert stop in {e["ckpt_step"] for e in second.events("checkpoint_torn_skipped")}
    assert [e["ckpt_step"] for e in second.events("resumed")] == [older, older]
    fs.invalidate_cache()
    local = tmp_path / "download"
    fs.get(f"ckpt/run-1/step-{STEPS}/", str(local / f"step-{STEPS}") + "/", recursive=True)
    assert_bitwise(final_state(local, STEPS), final_state(ref / "ckpt", STEPS))
