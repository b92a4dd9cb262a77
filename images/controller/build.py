"""Build the controller image (controllers/, `trainplane-controller`) as an OCI image layout, without a
container engine: `python images/controller/build.py --out build/images/controller` (`make image`).

Why our own builder: no Docker engine or container registry is reachable where trainplane is built and
tested; an OCI layout is a folder of JSON and tar blobs (opencontainers/image-spec v1.1: image-layout.md,
manifest.md, config.md) that skopeo copies to any registry (docs/in-cluster.md "The controller image").

Two layers:
1. base: Debian 12 (bookworm) minbase with python3-minimal and libpython3.11-stdlib, from debootstrap
   (it checks the suite's signed Release file against debian-archive-keyring and every package against its
   hash). The packages it installed must be those in debian.lock (package=version, dpkg-query); a point
   release of bookworm changes them, and the build stops until the lock is reviewed and rewritten
   (`--write-lock`). Cached by the lock's hash: the first build takes about a minute.
2. app: requirements.txt's wheels (every one pinned and hashed: `pip install --require-hashes
   --only-binary=:all: --no-deps --target`, for CPython 3.11 on manylinux x86_64, the base's Python), the
   controllers package and the contract package it imports (APP_PACKAGES), the `trainplane-controller`
   script; compiled to checked-hash .pyc (the root file system is read-only in the pod). Files are sorted,
   owned by root, dated SOURCE_DATE_EPOCH (default 0), gzip without a timestamp: the same tree gives the
   same layer digest.

The config runs as nobody (65534, as the pods' securityContext does) with `trainplane-controller` as its
entry point. The manifest's digest is printed and written to <out>/DIGEST: the platform names the image
as <registry>/trainplane-controller@sha256:<it> (`platform.images.controller`).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
PACKAGES = ("python3-minimal", "libpython3.11-stdlib")
LOCK, REQUIREMENTS = HERE / "debian.lock", HERE / "requirements.txt"
# The wheels' target: the base's interpreter (Debian bookworm's python3 is 3.11) on x86_64.
PIP_PLATFORM = (
    *("--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"),
    *("--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64"),
)
SITE = "opt/trainplane/site-packages"
# The project's packages the image carries: the controllers and the one they import (contract/: the names
# they share with the library; tests/unit/repo/test_layers.py keeps controllers/ to it).
APP_PACKAGES = ("contract", "controllers")
ENTRY = "usr/local/bin/trainplane-controller"
USER = "65534:65534"
ENV = [
    "PATH=/usr/local/bin:/usr/bin:/bin",
    f"PYTHONPATH=/{SITE}",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
]
# What the base sheds: apt's caches and lists, documentation; /dev, /proc and /sys are the runtime's.
PRUNE = ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info")
RUNTIME_DIRS = ("dev", "proc", "sys")
MEDIA = "application/vnd.oci.image"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---- layers ---------------------------------------------------------------------------------------


def tar_tree(root: Path, epoch: int | None) -> bytes:
    """An uncompressed layer of `root`'s files, sorted; with `epoch`, owned by root and dated `epoch`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted(p for p in root.rglob("*") if p.relative_to(root).parts[0] not in RUNTIME_DIRS)
        for directory in RUNTIME_DIRS:
            if (root / directory).is_dir():
                paths.append(root / directory)  # the mount points themselves, empty
        for path in sorted(paths):
            info = tar.gettarinfo(str(path), path.relative_to(root).as_posix())
            if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
                continue  # device nodes, fifos: the runtime's
            if epoch is not None:
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = min(int(info.mtime), epoch)
                info.mode = (
                    (0o755 if info.isdir() or info.mode & 0o111 else 0o644) if not info.issym() else 0o777
                )
            if info.isfile():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def gzipped(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


def installed(rootfs: Path) -> str:
    query = ["chroot", str(rootfs), "dpkg-query", "-W", "-f", "${Package}=${Version}\\n"]
    return "".join(
        sorted(subprocess.run(query, check=True, capture_output=True, text=True).stdout.splitlines(True))
    )


def _key(lock: str) -> str:
    """The base layer's cache key: what debootstrap is asked for and what it must install."""
    return hashlib.sha256(f"{SUITE} {','.join(PACKAGES)}\n{lock}".encode()).hexdigest()[:16]


def base_layer(cache: Path, mirror: str, write_lock: bool) -> tuple[bytes, str]:
    """(gzipped layer, diff_id) of the Debian base, from the cache when the lock is unchanged."""
    lock = LOCK.read_text() if LOCK.exists() else ""
    blob, diff = (cache / f"base-{_key(lock)}{suffix}" for suffix in (".tar.gz", ".diff_id"))
    if blob.exists() and diff.exists() and not write_lock:
        return blob.read_bytes(), diff.read_text().strip()
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        sys.exit("build: the base layer needs root and debootstrap (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="trainplane-base-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs)]
        subprocess.run([*cmd, mirror], check=True, stdout=subprocess.DEVNULL)
        got = installed(rootfs)
        if write_lock:
            LOCK.write_text(got)
        elif got != lock:
            sys.exit(
                f"build: debootstrap installed other packages than {LOCK.relative_to(ROOT)} (a bookworm point "
                "release?); review the difference and rerun with --write-lock:\n"
                + "\n".join(sorted(set(got.splitlines()) ^ set(lock.splitlines())))
            )
        for sub in PRUNE:
            shutil.rmtree(rootfs / sub, ignore_errors=True)
        (rootfs / "var/lib/apt/lists").mkdir(parents=True)
        raw = tar_tree(rootfs, epoch=None)  # debootstrap's owners, modes and dates as installed
    layer = gzipped(raw)
    cache.mkdir(parents=True, exist_ok=True)
    if write_lock:  # cached under the lock just written
        blob, diff = (cache / f"base-{_key(got)}{suffix}" for suffix in (".tar.gz", ".diff_id"))
    blob.write_bytes(layer)
    diff.write_text(sha256(raw))
    return layer, sha256(raw)


ENTRY_SCRIPT = """#!/usr/bin/python3
# trainplane-controller (controllers/__main__.py), as pip writes a console script.
import sys

from controllers.__main__ import main

sys.exit(main())
"""


def app_layer(epoch: int) -> tuple[bytes, str]:
    """(gzipped layer, diff_id): the hashed wheels, the project's packages (APP_PACKAGES), the entry script."""
    with tempfile.TemporaryDirectory(prefix="trainplane-app-") as tmp:
        tree = Path(tmp)
        site = tree / SITE
        pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
        pip += ["--require-hashes", "--only-binary=:all:", "--no-deps", *PIP_PLATFORM]
        subprocess.run([*pip, "--target", str(site), "-r", str(REQUIREMENTS)], check=True)
        shutil.rmtree(site / "bin", ignore_errors=True)  # pip's scripts point at the build's python
        for package in APP_PACKAGES:
            shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
        entry = tree / ENTRY
        entry.parent.mkdir(parents=True)
        entry.write_text(ENTRY_SCRIPT)
        entry.chmod(0o755)
        # checked-hash: the .pyc carries the source's hash, not its date (reproducible; CPython 3.11's
        # bytecode, the same minor as the base's 3.11.2).
        # -s/-p: the files' paths as the image has them, not this temporary folder's.
        compile_ = [sys.executable, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash"]
        compile_ += ["-s", str(tree), "-p", "/", str(site)]
        subprocess.run(compile_, check=True)
        raw = tar_tree(tree, epoch)
    return gzipped(raw), sha256(raw)


# ---- the layout ------------------------------------------------------------------------------------


def write_blob(out: Path, data: bytes) -> dict[str, object]:
    digest = sha256(data)
    path = out / "blobs" / "sha256" / digest.split(":")[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"digest": digest, "size": len(data)}


def canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_layout(out: Path, layers: list[tuple[bytes, str]], epoch: int, tag: str) -> str:
    """The OCI image layout (oci-layout, index.json, blobs/); returns the manifest's digest."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)),
        "config": {"Entrypoint": ["trainplane-controller"], "Env": ENV, "User": USER, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff for _, diff in layers]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": f"{MEDIA}.manifest.v1+json",
        "config": {"mediaType": f"{MEDIA}.config.v1+json", **write_blob(out, canonical(config))},
        "layers": [
            {"mediaType": f"{MEDIA}.layer.v1.tar+gzip", **write_blob(out, blob)} for blob, _ in layers
        ],
    }
    ref = write_blob(out, canonical(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": f"{MEDIA}.index.v1+json",
        "manifests": [
            {
                "mediaType": f"{MEDIA}.manifest.v1+json",
                **ref,
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }
    (out / "index.json").write_bytes(canonical(index))
    (out / "oci-layout").write_bytes(canonical({"imageLayoutVersion": "1.0.0"}))
    (out / "DIGEST").write_text(str(ref["digest"]) + "\n")
    return str(ref["digest"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "images" / "controller")
    parser.add_argument("--cache", type=Path, default=ROOT / "build" / "images" / "cache")
    parser.add_argument("--mirror", default=MIRROR, help="a Debian mirror (default deb.debian.org)")
    parser.add_argument("--tag", default="latest", help="the layout's ref name (skopeo's oci:<dir>:<tag>)")
    parser.add_argument("--write-lock", action="store_true", help="rewrite debian.lock from this build")
    args = parser.parse_args(argv)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    layers = [base_layer(args.cache, args.mirror, args.write_lock), app_layer(epoch)]
    digest = write_layout(args.out, layers, epoch, args.tag)
    size = sum(len(blob) for blob, _ in layers)
    print(f"{args.out}: trainplane-controller@{digest} ({size / 2**20:.1f} MiB compressed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
