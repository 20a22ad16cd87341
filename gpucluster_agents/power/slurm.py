# pyright: strict
"""The agent's only way to talk to Slurm: scontrol, called by absolute path.

slurmctld runs ResumeProgram/SuspendProgram without PATH, so nothing here relies on it.
Every call is logged; a failing scontrol is logged and reported, never raised, because the
agent must still exit 0 and leave the rest of its work done.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..contract import hostlist

log = logging.getLogger("gpucluster_agents")

UPDATE_BATCH = 500  # nodes per "scontrol update": one RPC each, argv under ~16 kB (one CreateFleet batch)
REASON_MAX = 200

_REASON_BAD = re.compile(r"[^A-Za-z0-9 _.,:;()/@+#-]")


def clean_reason(text: str) -> str:
    """A reason scontrol stores verbatim: no quotes or brackets, one line, bounded."""
    text = _REASON_BAD.sub(" ", text.replace("\n", " "))
    text = re.sub(r"\s+", " ", text).strip()
    return text[:REASON_MAX] or "gpucluster"


@dataclass(frozen=True)
class NodeState:
    name: str
    flags: tuple[str, ...]  # State=IDLE+CLOUD+POWERED_DOWN -> ("IDLE", "CLOUD", "POWERED_DOWN")
    reason: str | None

    def has(self, flag: str) -> bool:
        return flag in self.flags

    @property
    def powered_down(self) -> bool:
        return self.has("POWERED_DOWN") and not self.has("POWERING_UP")


_STATE_RE = re.compile(r"(?:^| )State=(\S+)")
_NAME_RE = re.compile(r"^NodeName=(\S+)")
_REASON_RE = re.compile(r" Reason=(.*?)(?: \[[^\[\]]*@[^\[\]]*\])?$")


def parse_show_nodes(text: str) -> dict[str, NodeState]:
    """Parse ``scontrol -o show nodes`` (one line per node)."""
    out: dict[str, NodeState] = {}
    for line in text.splitlines():
        line = line.rstrip()
        m = _NAME_RE.match(line)
        if not m:
            continue
        sm = _STATE_RE.search(line)
        flags = tuple(sm.group(1).split("+")) if sm else ()
        rm = _REASON_RE.search(line)
        reason = rm.group(1) if rm and rm.group(1) not in ("", "(null)") else None
        out[m.group(1)] = NodeState(m.group(1), flags, reason)
    return out


class Slurm:
    def __init__(self, scontrol: str, timeout: float = 60.0) -> None:
        self.scontrol_path = scontrol
        self.timeout = timeout
        self.calls = 0
        self.seconds = 0.0  # time spent waiting on scontrol, logged at the end of each agent call

    @property
    def available(self) -> bool:
        return os.path.isfile(self.scontrol_path) and os.access(self.scontrol_path, os.X_OK)

    def run(self, args: Sequence[str], quiet: bool = False) -> tuple[bool, str]:
        """Run scontrol; return (ok, stdout). Logs one line per call."""
        cmd = [self.scontrol_path, *args]
        self.calls += 1
        started = time.monotonic()
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.timeout,
                check=False,
                text=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.error("slurm scontrol %s failed to run: %s", " ".join(args), exc)
            return False, ""
        finally:
            self.seconds += time.monotonic() - started
        if proc.returncode != 0:
            log.error("slurm scontrol %s rc=%d: %s", " ".join(args), proc.returncode, (proc.stderr or proc.stdout).strip())
            return False, proc.stdout
        if not quiet:
            log.info("slurm scontrol %s rc=0", " ".join(args))
        return True, proc.stdout

    # ----------------------------------------------------------------- hostlists
    def expand(self, expr: str) -> list[str]:
        """Expand with ``scontrol show hostnames``; fall back to the pure-Python expander."""
        if self.available:
            ok, out = self.run(["show", "hostnames", expr], quiet=True)
            if ok:
                names = [n.strip() for n in out.split() if n.strip()]
                if names:
                    return names
            log.warning("hostlist %r: scontrol show hostnames failed, using the built-in expander", expr)
        return hostlist.expand(expr)

    # ----------------------------------------------------------------- node state
    def show_nodes(self) -> dict[str, NodeState] | None:
        ok, out = self.run(["-o", "show", "nodes"], quiet=True)
        if not ok:
            return None
        return parse_show_nodes(out)

    # ----------------------------------------------------------------- updates
    def set_addresses(self, pairs: Iterable[tuple[str, str]]) -> list[str]:
        """``scontrol update nodename=a,b nodeaddr=ipa,ipb nodehostname=a,b``; returns nodes that failed."""
        items = sorted(pairs, key=lambda p: hostlist.order_key(p[0]))
        failed: list[str] = []
        for i in range(0, len(items), UPDATE_BATCH):
            chunk = items[i : i + UPDATE_BATCH]
            names = ",".join(n for n, _ in chunk)
            addrs = ",".join(a for _, a in chunk)
            ok, _ = self.run(["update", f"nodename={names}", f"nodeaddr={addrs}", f"nodehostname={names}"])
            if not ok:
                failed.extend(n for n, _ in chunk)
        return failed

    def _update_state(self, nodes: Sequence[str], state: str, reason: str | None) -> bool:
        ok_all = True
        ordered = sorted(set(nodes), key=hostlist.order_key)
        for i in range(0, len(ordered), UPDATE_BATCH):
            chunk = ordered[i : i + UPDATE_BATCH]
            args = ["update", f"nodename={hostlist.compress(chunk)}", f"state={state}"]
            if reason is not None:
                args.append(f"reason={clean_reason(reason)}")
            ok, _ = self.run(args)
            ok_all = ok_all and ok
        return ok_all

    def set_down(self, nodes: Sequence[str], reason: str) -> bool:
        if not nodes:
            return True
        return self._update_state(nodes, "down", reason)

    def power_down_force(self, nodes: Sequence[str], reason: str | None = None) -> bool:
        if not nodes:
            return True
        return self._update_state(nodes, "power_down_force", reason)

    def drain(self, nodes: Sequence[str], reason: str) -> bool:
        """``state=drain``: no new jobs; running ones finish (Slurm requires a reason)."""
        if not nodes:
            return True
        return self._update_state(nodes, "drain", reason)

    def resume(self, nodes: Sequence[str]) -> bool:
        if not nodes:
            return True
        return self._update_state(nodes, "resume", None)

    def reconfigure(self) -> bool:
        ok, _ = self.run(["reconfigure"])
        return ok
