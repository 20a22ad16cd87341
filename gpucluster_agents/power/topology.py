# pyright: strict
"""topology.conf, written atomically and only when it changed. What goes into it is the contract's
(:func:`gpucluster_agents.contract.topology.render_topology`): the control plane writes the first one the same way."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence


def write_if_changed(path: str, lines: Sequence[str]) -> bool:
    """Write ``lines`` to ``path`` atomically (temp file + rename) unless it already holds them."""
    text = "\n".join(lines) + "\n"
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return False
    except OSError:
        pass
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".topology-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return True
