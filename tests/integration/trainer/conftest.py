"""Fixtures of the trainer's integration tests: a corpus, cached uninterrupted reference runs, and real
storage services on loopback (moto_server for S3, gcp-storage-emulator for GCS)."""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.trainer import BASE, PY, free_port, launch


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~200 KB of English-like text: real enough that a byte-level model's loss falls."""
    rng = random.Random(7)
    words = (
        "the model learns to predict the next byte of text and the loss falls as training goes on "
        "checkpoints are written to disk and training resumes exactly where it stopped after a "
        "preemption signal arrives from the cloud provider"
    ).split()
    lines = [
        " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))).capitalize() + "." for _ in range(3000)
    ]
    p = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    p.write_text("\n".join(lines))
    return p


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Callable[..., Path]:
    """Uninterrupted runs, cached per (nproc, steps, extra args) for the whole session (per xdist worker)."""
    cache: dict[tuple[Any, ...], Path] = {}

    def get(nproc: int, steps: int, extra: tuple[str, ...] = ()) -> Path:
        key = (nproc, steps, extra)
        if key not in cache:
            d = tmp_path_factory.mktemp("reference")
            p = launch(
                d,
                "ref",
                nproc,
                [
                    *BASE,
                    "--dataset",
                    "bytes",
                    "--data-paths",
                    f"[{corpus}]",
                    "--steps",
                    str(steps),
                    "--checkpoint.uri",
                    str(d / "ckpt"),
                    "--checkpoint.interval-steps",
                    "1000",
                    "--record-samples",
                    str(d / "samples"),
                    *extra,
                ],
            )
            assert p.wait() == 0, p.tail()
            cache[key] = d
        return cache[key]

    return get


@pytest.fixture
def moto_s3(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A real S3 API: moto_server on loopback with a free port, and the env a trainer needs for it."""
    port = free_port()
    exe = Path(PY).with_name("moto_server")
    cmd = [str(exe)] if exe.exists() else [PY, "-m", "moto.server"]
    with open(tmp_path / "moto.log", "wb") as log:
        p = subprocess.Popen([*cmd, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
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
        p.terminate()
        p.wait(10)


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
        p = subprocess.Popen(
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
        p.terminate()
        p.wait(10)
