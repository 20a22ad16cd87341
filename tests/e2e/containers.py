"""pyxis and enroot built from the vendored release archives (``../shared/vendor``, checked against the sha256 pins of
``gpucluster/facts/containers.py``) for the container tests, and a tiny squashfs image.

The build is done once per machine and kept (``$GPUCLUSTER_CACHE``, default ``~/.cache/gpucluster``) under a key of
the three archives' sha256 and the Slurm headers' version, so another Slurm or another pin builds afresh; a machine
lock keeps two test processes from building at once. What it holds is the tree a node has under ``/usr/local``:
``bin/enroot*``, ``lib/enroot``, ``etc/enroot`` (enroot's sysconfdir), ``share/enroot/hooks.d`` (the optional hooks)
and ``lib/slurm/spank_pyxis.so``; a test binds a copy over ``/usr/local`` in its node's mount namespace.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from gpucluster.facts.containers import ENROOT, MAKESELF, PYXIS, Source
from tests.conftest import IN_CI, ROOT, machine_lock, require_tool

VENDOR = Path(os.environ.get("GPUCLUSTER_VENDOR", ROOT.parent / "shared" / "vendor"))
CACHE = Path(os.environ.get("GPUCLUSTER_CACHE", Path.home() / ".cache" / "gpucluster"))
BUILD_TOOLS = ("make", "gcc", "mksquashfs", "squashfuse", "fuse-overlayfs", "jq", "parallel", "zstd", "pigz", "busybox")


def slurm_headers_version(include: Path = Path("/usr/include/slurm/slurm_version.h")) -> str:
    """The Slurm release whose ``spank.h`` pyxis compiles against (``SLURM_VERSION_NUMBER``, e.g. ``22.5.8``)."""
    if not include.exists():
        (pytest.fail if IN_CI else pytest.skip)(f"{include} is missing: .ci/run installs libslurm-dev")
    found = re.search(r"^#define SLURM_VERSION_NUMBER 0x([0-9a-f]+)$", include.read_text(), re.M)
    assert found, include
    number = int(found.group(1), 16)
    return f"{number >> 16}.{(number >> 8) & 0xFF}.{number & 0xFF}"


def checked_archive(source: Source) -> Path:
    """The vendored archive of ``source``, refused unless its sha256 is the pinned one."""
    path = VENDOR / source.archive
    if not path.exists():
        (pytest.fail if IN_CI else pytest.skip)(f"{path} is missing (the vendored sources, ../shared/vendor)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == source.archive_sha256, f"{path}: sha256 {digest}, pinned {source.archive_sha256}"
    return path


BUILD_VERSION = "2"
"""Bumped when the build itself changes (its key then names a new tree)."""


def build_key() -> str:
    parts = [BUILD_VERSION, *(s.archive_sha256 for s in (PYXIS, ENROOT, MAKESELF)), slurm_headers_version()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _unpack(archive: Path, dest: Path, strip: bool = True) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    tops = list(dest.iterdir())
    return tops[0] if strip and len(tops) == 1 else dest


def _build(stage: Path, work: Path) -> None:
    run = lambda *argv, cwd: subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True)  # noqa: E731
    enroot = _unpack(checked_archive(ENROOT), work / "enroot")
    makeself = _unpack(checked_archive(MAKESELF), work / "makeself")
    shutil.rmtree(enroot / "deps" / "makeself")
    shutil.copytree(makeself, enroot / "deps" / "makeself")
    (enroot / "deps" / "linux-headers" / ".stamp").touch()  # the system's kernel headers serve
    # Debian 12's glibc lacks strlcpy: libbsd's, linked statically (a plain -lbsd finds enroot's partial libbsd.a)
    libbsd = subprocess.run(["gcc", "-print-file-name=libbsd.so"], check=True, capture_output=True, text=True).stdout.strip()
    run("make", "-C", "deps", "FORCE_GLIBC=1", cwd=enroot)  # its own flags: the overrides below are the top's
    flags = ("FORCE_GLIBC=1", "prefix=/usr/local", "sysconfdir=/usr/local/etc")
    # built without DESTDIR (the Makefile writes DESTDIR into the paths enroot reads), installed with it
    run("make", *flags, "CFLAGS=-D_GNU_SOURCE -include bsd/string.h", f"LDLIBS=-l:libbsd.a {libbsd}", cwd=enroot)
    run("make", "install", *flags, f"DESTDIR={stage}", cwd=enroot)
    pyxis = _unpack(checked_archive(PYXIS), work / "pyxis")
    run("make", cwd=pyxis)
    (stage / "usr" / "local" / "lib" / "slurm").mkdir(parents=True, exist_ok=True)
    shutil.copy2(pyxis / "spank_pyxis.so", stage / "usr" / "local" / "lib" / "slurm" / "spank_pyxis.so")


def built_usr_local() -> Path:
    """The cached ``/usr/local`` tree with enroot and pyxis (built now if this key has none)."""
    for tool in BUILD_TOOLS:
        require_tool(tool)
    done = CACHE / "containers" / build_key()
    tree = done / "usr" / "local"
    with machine_lock("containers-build"):
        if not (done / ".done").exists():
            shutil.rmtree(done, ignore_errors=True)
            done.mkdir(parents=True)
            with tempfile.TemporaryDirectory(prefix="gc-containers-") as work:
                _build(done, Path(work))
            (done / ".done").touch()
    return tree


def busybox_image(dest: Path, marker: str) -> Path:
    """A squashfs image of a tiny root (busybox-static) holding ``/etc/os-release`` with ``marker`` (0644), and
    ``PYTORCH_VERSION`` in its environment, as a PyTorch image has."""
    root = dest.with_suffix(".root")
    (root / "bin").mkdir(parents=True)
    shutil.copy2(require_tool("busybox"), root / "bin" / "busybox")
    for applet in ("sh", "id", "cat", "env", "echo", "touch", "stat", "ls", "true", "mkdir", "sleep"):
        (root / "bin" / applet).symlink_to("busybox")
    for d in ("etc", "dev", "proc", "sys", "tmp", "run", "home", "mnt", "root", "usr/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "os-release").write_text(f"ID={marker}\n")
    (root / "etc" / "os-release").chmod(0o644)
    (root / "etc" / "environment").write_text("PYTORCH_VERSION=2.5.0\n")  # what enroot's PyTorch hook looks for
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    subprocess.run(["mksquashfs", str(root), str(dest), "-noappend", "-all-root", "-quiet"], check=True, capture_output=True)
    dest.chmod(0o644)
    shutil.rmtree(root)
    return dest
