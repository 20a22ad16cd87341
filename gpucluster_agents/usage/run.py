# pyright: strict
"""Running one of Slurm's read commands (``sacct``, ``sshare``, ``squeue``, ``sinfo``) for its output.

What every reader of Slurm's figures needs the same way: no terminal input, output as text (an undecodable byte
replaced, never a crash on a user's odd job name), a timeout, and one error that names the command and why it
gave nothing (it could not start, it timed out, or it exited non-zero: the last line of its standard error, where
Slurm says "Problem talking to the database").
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence


class SlurmCommandError(RuntimeError):
    """A Slurm command could not be run, timed out or failed (slurmctld or slurmdbd unreachable, no accounting)."""


def run_slurm(
    argv: Sequence[str],
    *,
    timeout: float,
    error: type[SlurmCommandError] = SlurmCommandError,
    env: Mapping[str, str] | None = None,
) -> str:
    """The standard output of ``argv``; ``error`` (a :class:`SlurmCommandError`) naming the command when there is
    none. ``env``: the command's whole environment (default: this process's)."""
    program = argv[0]
    try:
        proc = subprocess.run(
            list(argv),
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"cannot run {program}: {exc}") from exc
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise error(f"{os.path.basename(program)} failed (exit {proc.returncode}): {detail}")
    return proc.stdout
