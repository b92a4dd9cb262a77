"""The controller image's definition (images/controller/): the wheels it installs are pinned and hashed
and are pyproject's pins; the OCI layout it writes is addressed by content
(tests/integration/images/controller/test_controller_image.py builds and runs the image itself)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import tarfile
import tomllib

from tests.helpers.imports import imported_names
from tests.helpers.plans import ROOT

IMAGE = ROOT / "images" / "controller"


def _builder():
    spec = importlib.util.spec_from_file_location("controller_image_build", IMAGE / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _requirements() -> dict[str, str]:
    text = (IMAGE / "requirements.txt").read_text()
    reqs = [r for r in text.replace("\\\n", " ").splitlines() if r.strip() and not r.startswith("#")]
    assert all("==" in r and "--hash=sha256:" in r for r in reqs), reqs
    return {r.split("==")[0]: r.split()[0] for r in reqs}


def test_the_image_installs_pyprojects_pins_every_wheel_hashed():
    pins = _requirements()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [d for d in project["dependencies"] if d.startswith(("kopf==", "kubernetes=="))]
    wanted += [d for d in project["optional-dependencies"]["trainer"] if d.startswith("prometheus-client")]
    assert pins["kopf"] == "kopf==1.45.2" and pins["kubernetes"] == "kubernetes==36.0.3"
    assert pins["kopf"] in wanted and pins["kubernetes"] in wanted
    assert pins["prometheus-client"] == "prometheus-client==0.26.0"  # pyproject: >=0.26,<0.27
    # What kopf and the client need (pip's resolution, the header says how it was made).
    assert {
        "aiohttp",
        "click",
        "iso8601",
        "urllib3",
        "certifi",
        "python-dateutil",
        "websocket-client",
    } <= set(pins)


def test_the_base_is_locked_to_debian_package_versions():
    lock = (IMAGE / "debian.lock").read_text().splitlines()
    versions = dict(line.split("=", 1) for line in lock)
    assert versions["python3.11-minimal"].startswith("3.11.2-6+deb12u") and "libc6" in versions
    assert lock == sorted(lock)


def test_the_layout_is_addressed_by_content(tmp_path):
    build = _builder()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        tar.addfile(tarfile.TarInfo("etc"))
    layer = (build.gzipped(raw.getvalue()), build.sha256(raw.getvalue()))
    digest = build.write_layout(tmp_path / "oci", [layer], 0, "latest")
    out = tmp_path / "oci"

    def blob(d: str) -> bytes:
        data = (out / "blobs" / "sha256" / d.split(":")[1]).read_bytes()
        assert "sha256:" + hashlib.sha256(data).hexdigest() == d
        return data

    (ref,) = json.loads((out / "index.json").read_text())["manifests"]
    assert ref["digest"] == digest == (out / "DIGEST").read_text().strip()
    assert ref["annotations"] == {"org.opencontainers.image.ref.name": "latest"}
    manifest = json.loads(blob(digest))
    config = json.loads(blob(manifest["config"]["digest"]))
    assert config["config"]["User"] == "65534:65534" and config["config"]["Entrypoint"] == [
        "trainplane-controller"
    ]
    assert config["rootfs"]["diff_ids"] == [layer[1]]
    assert gzip.decompress(blob(manifest["layers"][0]["digest"])) == raw.getvalue()
    assert json.loads((out / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    # The same input, the same digest (the timestamp-free gzip and canonical JSON).
    assert build.write_layout(tmp_path / "again", [layer], 0, "latest") == digest


def test_the_app_layer_carries_every_project_package_the_controllers_import(monkeypatch):
    """The controllers import the contract (contract/): the image must carry it next to them, or the entry
    point fails on its first import in the pod. The layer is built here with pip and compileall stubbed."""
    build = _builder()
    project = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    imported = {
        name.split(".")[0]
        for path in (ROOT / "controllers").rglob("*.py")
        for name in imported_names(path.read_text())
    }
    assert imported & project == {"contract", "controllers"} == set(build.APP_PACKAGES)

    monkeypatch.setattr(build.subprocess, "run", lambda *args, **kwargs: None)
    layer, _ = build.app_layer(0)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as tar:
        names = set(tar.getnames())
    site = build.SITE
    for package in build.APP_PACKAGES:
        sources = {f"{site}/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / package).rglob("*.py")}
        assert sources <= names, sorted(sources - names)
    carried = {n.split("/")[3] for n in names if n.startswith(f"{site}/")}
    assert carried & project == set(build.APP_PACKAGES)  # nothing of the library
