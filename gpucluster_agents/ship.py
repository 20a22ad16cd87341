# pyright: strict
"""What the control plane ships of this package, read in one place: the package as a reproducible zip (with NVIDIA's
NVML binding), its hash, and the text of the few files that a node's user data carries as they are (the boot helper,
the usage program, the users script). The control plane reads this package's files only through here
(tests/tools/test_package.py); it never opens a module's ``__file__`` itself."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
"""This package's folder: what :func:`bundle` zips."""
ZIP_DATE = (2020, 1, 1, 0, 0, 0)
SUFFIXES = (".py", ".md", ".sh")
"""The files a node needs (code, its README, the users script); nothing else goes into the zip."""

HELPER = "boot/helper.py"
"""The boot helper ``gpucluster-aws``: one self-contained file, written by the user data (it installs the package)."""
USAGE_PROGRAM = "usage/show.py"
"""``gpucluster-usage`` on the login nodes: one self-contained file, written by the user data."""
USERS_SCRIPT = "boot/users.sh"
"""``gpucluster-users``: the users file as local accounts, run from the installed package."""


def source(relative: str) -> str:
    """The text of one of the package's shippable files, by its path inside the package (:data:`HELPER`, ...)."""
    path = (PACKAGE / relative).resolve()
    if PACKAGE not in path.parents or path.suffix not in SUFFIXES or not path.is_file():
        raise ValueError(f"{relative!r} is not a file of the node package ({', '.join(SUFFIXES)})")
    return path.read_text()


@functools.lru_cache(maxsize=4)
def nvml_binding() -> Path:
    """NVIDIA's NVML binding (nvidia-ml-py, one pure-Python module, BSD), as installed with gpucluster: it goes
    into the node package next to ``gpucluster_agents`` so the health program reads NVML on nodes whose image
    has no binding of its own (nothing is fetched by the node)."""
    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None:
        raise RuntimeError("nvidia-ml-py is not installed (it is in requirements.txt): pip install -r requirements.txt")
    return Path(spec.origin)


def bundle(package: Path = PACKAGE) -> bytes:
    """The ``gpucluster_agents`` package (and :func:`nvml_binding`) as a zip: sorted entries, fixed dates, so the
    same sources always give the same bytes (and the same sha256 in the plan)."""
    entries = [
        (f"{package.name}/{path.relative_to(package).as_posix()}", path)
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in SUFFIXES
    ]
    entries.append(("pynvml.py", nvml_binding()))
    # A plan zips the package for every node group: the same files (same size and time) give the same zip.
    return _zipped(tuple((name, str(path), path.stat().st_mtime_ns, path.stat().st_size) for name, path in entries))


@functools.lru_cache(maxsize=8)
def _zipped(entries: tuple[tuple[str, str, int, int], ...]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, path, _, _ in entries:
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, Path(path).read_bytes())
    return buf.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
