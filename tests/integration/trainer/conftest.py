"""Fixtures of the trainer's integration tests: a corpus, cached uninterrupted reference runs, and real
storage services on loopback (moto_server for S3, gcp-storage-emulator for GCS)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import procs
from tests.helpers.session import exclusive, shared_dir
from tests.helpers.trainer import PY, finished, free_port, run_args, single


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's folder for what every xdist worker reads (tests/helpers/session.py)."""
    return shared_dir(tmp_path_factory.getbasetemp(), "trainer")


@pytest.fixture(scope="session")
def corpus(shared: Path) -> Path:
    """~200 KB of English-like text: real enough that a byte-level model's loss falls. One file for the
    session (the same bytes in every worker: a fixed seed), so that every worker's reference runs read it."""
    p = shared / "corpus.txt"
    with exclusive(shared / "corpus.lock"):
        if not p.exists():
            rng = random.Random(7)
            words = (
                "the model learns to predict the next byte of text and the loss falls as training goes on "
                "checkpoints are written to disk and training resumes exactly where it stopped after a "
                "preemption signal arrives from the cloud provider"
            ).split()
            lines = [
                " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))).capitalize() + "."
                for _ in range(3000)
            ]
            tmp = p.with_suffix(".tmp")
            tmp.write_text("\n".join(lines))
            tmp.replace(p)
    return p


@pytest.fixture(scope="session")
def reference(shared: Path, corpus: Path) -> Callable[..., Path]:
    """Uninterrupted runs, made once per (nproc, steps, extra args) for the whole session and shared by the
    xdist workers (read-only: each costs a launcher and its workers, 15 to 30 s of a CPU). Training is
    deterministic (the resume tests compare to them bit for bit), so which worker made it does not matter."""

    def get(nproc: int, steps: int, extra: tuple[str, ...] = ()) -> Path:
        key = hashlib.sha256(json.dumps([nproc, steps, list(extra)]).encode()).hexdigest()[:16]
        d = shared / f"reference-{key}"
        with exclusive(shared / f"reference-{key}.lock"):
            if not (d / "done").exists():  # none yet, or a failed one (its test failed with it)
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir()
                args = run_args(
                    corpus, d, "--checkpoint.interval-steps", "1000", *extra, steps=steps, samples=True
                )
                launched = time.time()
                finished(d, "ref", nproc, args)
                # when the launcher started and returned: bounds for the goodput phases (test_goodput.py)
                (d / "times.json").write_text(json.dumps({"launched": launched, "ended": time.time()}))
                (d / "done").touch()
        return d

    return get


@pytest.fixture(scope="session")
def single_run(shared: Path, corpus: Path) -> Callable[..., Path]:
    """Finished `single` runs (one trainer process, synchronous saves to d/ckpt: tests/helpers/trainer.py),
    made once per argument list for the session like `reference`. Read-only: a test that damages or resumes
    its checkpoints works on a copy (tests/helpers/trainer.py copy_checkpoints)."""

    def get(*extra: str) -> Path:
        key = hashlib.sha256(json.dumps(["single", list(extra)]).encode()).hexdigest()[:16]
        d = shared / f"single-{key}"
        with exclusive(shared / f"single-{key}.lock"):
            if not (d / "done").exists():
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir()
                p = single(d, "run", corpus, *extra)
                assert p.wait() == 0, p.tail()
                (d / "done").touch()
        return d

    return get


@pytest.fixture
def moto_s3(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A real S3 API: moto_server on loopback with a free port, and the env a trainer needs for it."""
    port = free_port()
    exe = Path(PY).with_name("moto_server")
    cmd = [str(exe)] if exe.exists() else [PY, "-m", "moto.server"]
    with open(tmp_path / "moto.log", "wb") as log:
        p = procs.spawn([*cmd, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    e = {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError as err:
                if time.monotonic() > deadline or p.poll() is not None:
                    text = (tmp_path / "moto.log").read_text()
                    raise RuntimeError(f"moto_server did not start: {text}") from err
                time.sleep(0.1)
        import boto3

        boto3.client(
            "s3",
            endpoint_url=url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket="ckpt")
        yield e
    finally:
        procs.stop(p, 10)


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError as err:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{what} did not start: {log.read_text()}") from err
            time.sleep(0.1)


@pytest.fixture
def gcs_emulator(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A GCS JSON API on loopback (gcp-storage-emulator, in memory) with bucket `ckpt`, and the env for it.

    gcsfs reads STORAGE_EMULATOR_HOST (gcsfs/core.py `_location`) and then needs no credentials
    (token "anon" is implied for an emulator). GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false: gcsfs 2026.7 by
    default asks the Storage Control gRPC API for each bucket's layout, which an emulator does not serve
    (60 s timeout per lookup, retried on every call).
    """
    port = free_port()
    exe = Path(PY).with_name("gcp-storage-emulator")
    log_path = tmp_path / "gcs.log"
    with open(log_path, "wb") as log:
        p = procs.spawn(
            [
                str(exe),
                "start",
                "-H",
                "127.0.0.1",
                "--port",
                str(port),
                "--in-memory",
                "--default-bucket",
                "ckpt",
            ],
            stdout=log,
            stderr=log,
        )
    try:
        _wait_port(port, p, log_path, "gcp-storage-emulator")
        yield {
            "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }
    finally:
        procs.stop(p, 10)
