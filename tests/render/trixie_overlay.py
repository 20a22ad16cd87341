"""A writable, private copy of the trixie root (``slurm_versions.py``) for tests that change files in it: an overlay
mount whose lower layer is the shared root (never written) and whose upper and work dirs lie in the test's tmp dir,
mounted in a private mount namespace (``namespace.MountNamespace``) with its own ``/proc`` and the host's ``/dev``.

Commands run in it with ``chroot`` inside the namespace (:meth:`OverlayRoot.run`); the test reads and writes its files
from outside through the namespace holder's view (:meth:`OverlayRoot.path`: ``/proc/<holder>/root/<merged>/...``).
:meth:`OverlayRoot.close` kills every process left in the namespace (by pid) and ends it: the mounts go with it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.e2e.namespace import MountNamespace
from tests.render.slurm_versions import TRIXIE_ROOT

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def trixie_with(*paths: str) -> Path:
    """The trixie root, holding ``paths`` (relative to it); without root or a path: fails in CI, skips here."""
    missing = [p for p in paths if not (TRIXIE_ROOT / p).exists()]
    reason = ""
    if os.geteuid() != 0:
        reason = "an overlay of the trixie root needs root (mount namespace)"
    elif missing:
        reason = f"the trixie root {TRIXIE_ROOT} lacks {', '.join(missing)} (.ci/run's debootstrap --include)"
    if reason:
        (pytest.fail if IN_CI else pytest.skip)(reason)
    return TRIXIE_ROOT


class OverlayRoot:
    """``lower`` overlaid with an upper layer in ``work``, in a namespace of its own."""

    def __init__(self, lower: Path, work: Path, same_path: Sequence[Path] = ()) -> None:
        """``same_path``: host directories bound into the root at their own path (a run dir both sides name alike)."""
        upper, scratch, self.merged = work / "upper", work / "work", work / "merged"
        for d in (upper, scratch, self.merged):
            d.mkdir(parents=True)
        m = shlex.quote(str(self.merged))
        options = shlex.quote(f"lowerdir={lower},upperdir={upper},workdir={scratch}")
        setup = [
            f"mount -t overlay overlay -o {options} {m}",
            f"mount -t proc proc {m}/proc",  # this namespace's own: the shared root's /proc mount is not touched
            f"mount --rbind /dev {m}/dev",
        ]
        for d in same_path:
            inner = shlex.quote(f"{self.merged}{d}")
            setup += [f"mkdir -p {inner}", f"mount --bind {shlex.quote(str(d))} {inner}"]
        self.ns = MountNamespace({}, setup=setup)

    def path(self, inner: str) -> Path:
        """``inner`` (a path inside the root) as the host reaches it."""
        return Path(f"/proc/{self.ns.pid}/root{self.merged}") / inner.lstrip("/")

    def write(self, inner: str, text: str | bytes, mode: int = 0o644) -> Path:
        path = self.path(inner)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        path.chmod(mode)
        return path

    def argv(self, *argv: str) -> list[str]:
        return self.ns.argv("chroot", str(self.merged), *argv)

    def run(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        environment = {"PATH": PATH, "LANG": "C.UTF-8", **(env or {})}
        return subprocess.run(
            self.argv(*argv), env=environment, capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def close(self) -> None:
        self.ns.kill_members()
        self.ns.close()


@contextmanager
def overlay_root(work: Path, lower: Path = TRIXIE_ROOT, same_path: Sequence[Path] = ()) -> Iterator[OverlayRoot]:
    root = OverlayRoot(lower, work, same_path)
    try:
        yield root
    finally:
        root.close()
