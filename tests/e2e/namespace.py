"""A private mount namespace for the people tests: temp copies bind-mounted over the host's own files.

The people tests need a node's identity files (``/etc/passwd``, ``/etc/group``, ``/etc/shadow``,
``/etc/pam.d/sshd``, ``/etc/nsswitch.conf``, ``/etc/sssd``, ``/var/lib/sss``, ``/home``, ``/etc/slurm``) to say what the
rendered files say, and must never change the host's. So everything runs in a mount namespace of its own
(``unshare --mount --propagation private``, as root): the binds made there are invisible outside it, and the
host's files are never written.

:class:`MountNamespace` keeps one namespace alive (a holder process that made the binds, then sleeps) so that
daemons (slurmctld, slurmd, slapd, sssd) and the commands of a test all see the same files: each enters it with
``nsenter --mount`` (:meth:`MountNamespace.argv`, a :class:`~tests.e2e.slurm_harness.LocalSlurm` ``wrap``).
:func:`run_in_namespace` is the one-shot form. The holder is ended by its pid; a process that entered the namespace
keeps it alive until it ends, and ends with the harness that started it.

``binds`` maps a path as seen inside the namespace (it must exist on the host: a file over a file, a directory over a
directory, so nothing is created on the host) to the host path whose content it shows.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

UNSHARE = "/usr/bin/unshare"
NSENTER = "/usr/bin/nsenter"


def _bind_script(binds: Mapping[Path, Path]) -> str:
    lines = ["set -e"]
    for target, source in binds.items():
        target, source = Path(target), Path(source)
        if not target.exists() and not target.is_symlink():
            raise ValueError(f"bind target {target} does not exist on the host: bind its directory instead")
        if not source.exists():
            raise ValueError(f"bind source {source} does not exist")
        if target.is_dir() != source.is_dir():
            raise ValueError(f"bind {source} over {target}: one is a directory, the other not")
        lines.append(f"mount --rbind {shlex.quote(str(source))} {shlex.quote(str(target))}")
    return "\n".join(lines)


def pivot_lines(root: Path) -> list[str]:
    """Shell lines that make ``root`` (with the binds made on it) the namespace's own root: ``pivot_root``, the host's
    tree dropped. A process that enters the namespace (``nsenter --mount``) starts at that root. Unlike ``chroot``, it
    may then create user namespaces (the kernel refuses them to a process whose root is not its namespace's: enroot's
    containers need them); ``root`` needs an empty ``/mnt``."""
    r = shlex.quote(str(root))
    return [f"mount --rbind {r} {r}", f"cd {r}", "pivot_root . mnt", "cd /", "umount -l /mnt"]


class MountNamespace:
    """A private mount namespace with ``binds`` made, held open by a sleeping process until :meth:`close`."""

    def __init__(self, binds: Mapping[Path, Path], setup: Sequence[str] = (), after: Sequence[str] = ()) -> None:
        """``setup``: shell lines run in the new namespace before the binds (mounts of its own: an overlay);
        ``after``: lines run after them (:func:`pivot_lines`)."""
        if os.geteuid() != 0:
            raise PermissionError("a mount namespace with bind mounts needs root")
        script = "\n".join(["set -e", *setup, _bind_script(binds), *after, "echo ready", "exec sleep 86400"]) + "\n"
        self.holder = subprocess.Popen(
            [UNSHARE, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()
        if line.strip() != b"ready":
            self.holder.wait(timeout=10)
            err = self.holder.stderr.read().decode() if self.holder.stderr else ""
            raise RuntimeError(f"mount namespace not made: {err.strip()}")
        self.id = os.readlink(f"/proc/{self.holder.pid}/ns/mnt")

    def members(self) -> list[int]:
        """Every process in this namespace but its holder (found by the namespace's id: a daemon that cleared its
        environment, like 24.11's slurmstepd, is found too)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == self.holder.pid:
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/mnt") == self.id:
                    found.append(int(entry))
            except OSError:
                continue
        return found

    def kill_members(self, rounds: int = 5) -> None:
        """SIGKILL every process in the namespace, by pid, until none is left."""
        for _ in range(rounds):
            pids = self.members()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.2)

    @property
    def pid(self) -> int:
        return self.holder.pid

    def argv(self, *argv: str) -> list[str]:
        """``argv`` run inside the namespace."""
        return [NSENTER, f"--target={self.pid}", "--mount", "--", *argv]

    def run(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*argv), env=dict(env) if env is not None else None, capture_output=True, text=True,
            timeout=timeout, input=input, check=False,
        )  # fmt: skip

    def close(self) -> None:
        """End the holder (by its pid)."""
        if self.holder.poll() is None:
            self.holder.send_signal(signal.SIGKILL)
        self.holder.wait(timeout=10)
        for stream in (self.holder.stdout, self.holder.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> MountNamespace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_in_namespace(
    binds: Mapping[Path, Path], argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` once in a new private mount namespace with ``binds`` made; the namespace goes with it."""
    with MountNamespace(binds) as ns:
        return ns.run(argv, env=env, timeout=timeout)
