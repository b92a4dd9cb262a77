"""The trainer image (trainer/Dockerfile) is EFA-capable: read from the Dockerfile (no Docker engine here).

An image without libfabric and aws-ofi-nccl trains over TCP on an EFA pool; these tests pin what the
build must do and that the plugin ends up where NCCL looks for it (trainer/netplugin.py models NCCL's
search and is run against the image's own LD_LIBRARY_PATH, rebased under a temporary directory).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from trainer.netplugin import DEFAULT_PLUGIN, find_plugin

DOCKERFILE = Path(__file__).resolve().parents[3] / "trainer" / "Dockerfile"
PLUGIN_DIR = "/opt/amazon/ofi-nccl/lib"  # aws/aws-ofi-nccl@v1.21.1 contrib/debian-template/rules


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = DOCKERFILE.read_text()
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for ln in joined.splitlines():
        if ln.strip():
            word, _, rest = ln.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _args() -> dict[str, str]:
    return dict(a.split("=", 1) for w, a in _instructions() if w == "ARG" and "=" in a)


def _env() -> dict[str, str]:
    env: dict[str, str] = {}
    for w, a in _instructions():
        if w == "ENV":
            for item in shlex.split(a):
                k, _, v = item.partition("=")
                env[k] = v
    return env


def _runs() -> list[str]:
    return [a for w, a in _instructions() if w == "RUN"]


def test_efa_installer_is_pinned_and_run_as_the_reference_does() -> None:
    args = _args()
    assert re.fullmatch(r"\d+\.\d+\.\d+", args["EFA_INSTALLER_VERSION"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", args["AWS_OFI_NCCL_VERSION"])
    (install,) = [r for r in _runs() if "efa_installer.sh" in r]
    assert "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" in install
    flags = install.split("efa_installer.sh", 1)[1].split("&&", 1)[0].split()
    # awsome-distributed-training nccl-tests.Dockerfile: user space only, no kernel module, no ulimits
    assert set(flags) == {"-y", "-g", "-d", "--skip-kmod", "--skip-limit-conf", "--no-verify"}
    # the bundled aws-ofi-nccl is the pinned one, and its plugin library exists after the install
    assert "libnccl-ofi" in install and "${AWS_OFI_NCCL_VERSION}" in install
    assert f"test -f {PLUGIN_DIR}/{DEFAULT_PLUGIN}" in install


def test_installer_runs_as_root_before_the_user_switch() -> None:
    order = [w if w != "RUN" or "efa_installer.sh" not in a else "EFA" for w, a in _instructions()]
    assert order.index("EFA") < order.index("USER")


def test_plugin_is_where_nccl_looks(tmp_path: Path) -> None:
    env = _env()
    dirs = [d for d in env["LD_LIBRARY_PATH"].split(":") if d.startswith("/")]
    assert PLUGIN_DIR in dirs and "/opt/amazon/efa/lib" in dirs  # libfabric for the plugin
    # NCCL_NET_PLUGIN unset (NCCL then loads libnccl-net.so) or naming the plugin the package ships
    assert env.get("NCCL_NET_PLUGIN") in (None, "ofi", "libnccl-net-ofi.so")
    # the launcher's check, run on the image's path with the plugin file where the package puts it
    (tmp_path / PLUGIN_DIR.lstrip("/")).mkdir(parents=True)
    (tmp_path / PLUGIN_DIR.lstrip("/") / DEFAULT_PLUGIN).write_bytes(b"")
    rebased = ":".join(str(tmp_path / d.lstrip("/")) for d in dirs)
    assert find_plugin({"LD_LIBRARY_PATH": rebased}) == str(
        tmp_path / PLUGIN_DIR.lstrip("/") / DEFAULT_PLUGIN
    )


def test_torch_nccl_is_checked_against_the_plugin_minimum() -> None:
    args = _runs()
    (torch_run,) = [r for r in args if "torch==" in r]
    assert "torch.cuda.nccl.version()" in torch_run and "$NCCL_MIN_VERSION" in torch_run
    # aws/aws-ofi-nccl v1.21.1 release notes: NCCL v2.17.1 and later
    assert tuple(map(int, _args()["NCCL_MIN_VERSION"].split("."))) >= (2, 17, 1)
    # the CUDA base matches the torch wheel index (cu128 <-> CUDA 12.8)
    base = next(a for w, a in _instructions() if w == "FROM")
    index = _args()["TORCH_INDEX"]
    major, minor = re.search(r"cuda:(\d+)\.(\d+)", base).groups()  # type: ignore[union-attr]
    assert index.endswith(f"/cu{major}{minor}")


def test_the_image_copies_every_project_package_the_trainer_imports() -> None:
    """`pip install .` in the image installs what was copied: a package the trainer imports (contract/, the
    names of its metrics) and the build did not copy fails the trainer's first import in the pod."""
    from tests.helpers.imports import imported_names

    root = DOCKERFILE.parents[1]
    project = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    imported = {
        name.split(".")[0]
        for path in (root / "trainer").rglob("*.py")
        for name in imported_names(path.read_text())
    }
    copied = {a.split()[0] for w, a in _instructions() if w == "COPY"}
    assert imported & project == {"contract", "trainer"}
    assert imported & project <= copied
