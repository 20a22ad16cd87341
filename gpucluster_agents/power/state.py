# pyright: strict
"""Local state of the agent in ``state_dir``: the lock, the launch journal and capacity holds.

- ``agent.lock``: every subcommand that reads or changes instances holds this flock for its
  whole run, so two resumes (or a resume and a suspend) never interleave. A launch therefore can
  only be "in flight" while its process holds the lock: whoever holds the lock and finds a
  journal entry knows that launch is finished (crashed or done).
- ``journal/<token>.json``: written before CreateFleet, updated with the instance->node
  assignment right after it, removed once every instance is tagged with its node name. An
  unreadable entry is moved to ``journal/quarantine/`` and replaced by a ``recovered`` one.
- ``holds.json``: nodes (and node groups) set DOWN by the agent, with when and why, so they
  can be handed back to Slurm after the hold time.
- first sightings (``FirstSeen``: ``orphans.json``, ``strays.json``, ``vanished.json``): when the agent first
  saw something it waits on, so a wait is measured on the agent's own clock, never against EC2's.

Time: every call is its own process, so a wait that spans calls cannot use a process's monotonic clock. Waits
are measured on the agent's wall clock (``StateDir.clock``, the ``Agent``'s) and *clamped*: a recorded time in
the future (the clock stepped back) is reset to now, so a wait never lasts longer than its configured length
after a backward step; a forward step can end it early, which is why no wait guards work on its own (orphans are
also checked against the journal and the node maps). Holds, which keep nodes out of service, go further: each
is anchored to the boot clock (:func:`boot_clock`, the kernel's time since boot, which no wall-clock step moves
and every process of one boot shares), and every load moves its wall times by however far the wall clock
stepped since (:func:`follow_boot_clock`), so a hold ends its own length after it began whatever the wall clock
did. A hold from before a reboot falls back to the clamp.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterable
from typing import Any, Callable, cast

log = logging.getLogger("gpucluster_agents")

_TOKEN_RE = re.compile(r"^[0-9a-f]{32}$")  # launch tokens are uuid4().hex


class LockTimeout(RuntimeError):
    pass


def write_json_atomic(path: str, data: Any) -> None:
    """Write ``path`` whole or not at all (temp file, fsync, rename). Run as root (an operator's command
    by hand), the file gets the directory's owner: the agent, run as slurm, must still read and replace it."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        if os.geteuid() == 0:
            owner = os.stat(directory)
            os.chown(tmp, owner.st_uid, owner.st_gid)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_json(path: str) -> Any | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.error("state file %s unreadable (%s); ignoring it", path, exc)
        return None


class FileLock:
    """An exclusive flock on a file, waited for at most ``timeout`` seconds."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.fd: int | None = None

    def __enter__(self) -> FileLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.timeout
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(fd)
                    raise
                if not waited:
                    log.info("lock %s busy, waiting up to %ss", self.path, self.timeout)
                    waited = True
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockTimeout(f"could not lock {self.path} within {self.timeout}s") from None
                time.sleep(0.05)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def clamped(recorded: float, now: float, what: str) -> float:
    """``recorded`` (a time this or an earlier call wrote), or ``now`` if it lies in the future."""
    if recorded > now:
        log.warning("clock stepped back: %s recorded at %.0f, %.0fs after now; counting from now", what, recorded, recorded - now)
        return now
    return recorded


BOOT_ID = "/proc/sys/kernel/random/boot_id"
Boot = tuple[str, float]  # (boot id, seconds since that boot)


def boot_clock() -> Boot | None:
    """This boot's id and the seconds since it, suspend included (``CLOCK_BOOTTIME``); None where unreadable."""
    try:
        with open(BOOT_ID, encoding="ascii") as fh:
            return fh.read().strip(), time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, AttributeError):
        return None


def follow_boot_clock(holds: dict[str, dict[str, dict[str, Any]]], now: float, boot: Boot | None) -> None:
    """Move the wall times (``since``, ``until``) of each hold anchored in this boot by the wall clock's step since
    the anchor: ``since`` becomes ``now`` less the boot-clock seconds since it began. A hold without a usable
    anchor (another boot, none yet, a boot clock behind it) is left to the wall-clock clamp."""
    if boot is None:
        return
    for kind in ("groups", "nodes"):
        for key, h in holds[kind].items():
            at = _anchor(h, boot)
            if at is None:
                continue
            step = now - (boot[1] - at) - float(h.get("since") or 0)
            if abs(step) >= 1:
                log.warning("clock stepped %+.0fs since hold %s=%s began; it keeps its own length", step, kind[:-1], key)
            h["since"] = float(h.get("since") or 0) + step
            h["until"] = float(h.get("until") or 0) + step


def anchor_holds(holds: dict[str, dict[str, dict[str, Any]]], now: float, boot: Boot | None) -> None:
    """Anchor each hold that has no usable anchor (see :func:`follow_boot_clock`): the boot-clock reading of its
    ``since``."""
    if boot is None:
        return
    for kind in ("groups", "nodes"):
        for h in holds[kind].values():
            if _anchor(h, boot) is None:
                h["boot"] = {"id": boot[0], "at": boot[1] - max(0.0, now - float(h.get("since") or now))}


def _anchor(h: dict[str, Any], boot: Boot) -> float | None:
    """The boot-clock reading of the hold's ``since``, if recorded in this boot and not ahead of the boot clock."""
    anchor = h.get("boot")
    doc = cast("dict[str, Any]", anchor) if isinstance(anchor, dict) else {}
    at = doc.get("at")
    if doc.get("id") != boot[0] or not isinstance(at, (int, float)) or boot[1] < at:
        return None
    return float(at)


class FirstSeen:
    """When the agent first saw each key (an instance id, a node), in ``state_dir/<name>``: ``{key: unix time}``.
    ``update`` keeps exactly the keys it is given; change it only under the agent lock."""

    def __init__(self, state_dir: str, name: str) -> None:
        self.path = os.path.join(state_dir, name)
        raw = read_json(self.path)
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        self.seen: dict[str, float] = {k: float(v) for k, v in doc.items() if isinstance(v, (int, float))}

    def update(self, keys: Iterable[str], now: float) -> dict[str, float]:
        """{key: seconds since first seen} for ``keys`` (0 for new ones); forgets every other key."""
        before = dict(self.seen)
        self.seen = {k: clamped(before.get(k, now), now, f"{os.path.basename(self.path)} {k}") for k in sorted(set(keys))}
        if self.seen != before:
            write_json_atomic(self.path, self.seen)
        return {k: now - t for k, t in self.seen.items()}


class StateDir:
    def __init__(self, path: str, clock: Callable[[], float] = time.time, boot: Callable[[], Boot | None] | None = None) -> None:
        """``boot``: the boot clock holds follow; by default the kernel's, or with another wall ``clock`` (a test's)
        that clock itself, so that time passes only as the test says."""
        self.path = path
        self.clock = clock
        self.boot: Callable[[], Boot | None] = boot or (boot_clock if clock is time.time else lambda: ("clock", clock()))
        self.journal_dir = os.path.join(path, "journal")
        os.makedirs(self.journal_dir, mode=0o700, exist_ok=True)

    def lock(self, timeout: float, name: str = "agent") -> FileLock:
        return FileLock(os.path.join(self.path, f"{name}.lock"), timeout)

    # ------------------------------------------------------------------ journal
    def _journal_path(self, token: str) -> str:
        return os.path.join(self.journal_dir, f"{token}.json")

    def journal_begin(self, token: str, group: str, nodes: list[str]) -> None:
        write_json_atomic(
            self._journal_path(token),
            {"token": token, "group": group, "nodes": nodes, "started": self.clock(), "pid": os.getpid(), "assignments": {}},
        )

    def journal_assign(self, token: str, assignments: dict[str, str]) -> None:
        entry: dict[str, Any] = read_json(self._journal_path(token)) or {"token": token}
        entry["assignments"] = dict(assignments)
        write_json_atomic(self._journal_path(token), entry)

    def journal_age(self, entry: dict[str, Any], now: float) -> float:
        """Seconds since the entry's launch started, clamped: an entry from the future restarts now."""
        started = float(entry.get("started") or 0.0)
        if clamped(started, now, f"launch journal {entry.get('token')}") != started:
            entry["started"] = now
            write_json_atomic(self._journal_path(str(entry["token"])), entry)
            return 0.0
        return now - started

    def journal_end(self, token: str) -> None:
        try:
            os.unlink(self._journal_path(token))
        except FileNotFoundError:
            pass

    def journal_assigned(self) -> set[str]:
        """The instance ids the launch journal assigns to nodes."""
        return {str(i) for e in self.journal_entries() for i in dict(e.get("assignments") or {})}

    def journal_entries(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name in sorted(os.listdir(self.journal_dir)):
            if not name.endswith(".json"):
                continue
            raw = read_json(os.path.join(self.journal_dir, name))
            entry = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
            if entry.get("token"):
                out.append(entry)
            else:
                recovered = self._quarantine(name)
                if recovered is not None:
                    out.append(recovered)
        return out

    def _quarantine(self, name: str) -> dict[str, Any] | None:
        """Move an unreadable entry to ``journal/quarantine/`` (kept for a person, with the reason) and
        put a ``recovered`` entry for its token in its place: the token is the file name, so the
        launch's instances are still found by their launch-token tag and adopted by the sweep
        (``sweep.recover_assignments``) instead of being left to the orphan catch-all."""
        src = os.path.join(self.journal_dir, name)
        qdir = os.path.join(self.journal_dir, "quarantine")
        os.makedirs(qdir, mode=0o700, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        dest = os.path.join(qdir, f"{name}.{stamp}")
        try:
            started = os.path.getmtime(src)
            os.replace(src, dest)
            with open(dest + ".reason", "w", encoding="utf-8") as fh:
                fh.write("unreadable launch journal entry (not a JSON object with a token); moved aside by the agent\n")
        except OSError as exc:
            log.error("journal entry %s is unreadable and could not be quarantined (%s)", name, exc)
            return None
        token = name[: -len(".json")]
        if not _TOKEN_RE.match(token):
            log.error("journal entry %s is unreadable; quarantined as %s (no launch token in its name)", name, dest)
            return None
        entry: dict[str, Any] = {
            "token": token,
            "group": None,
            "nodes": [],
            "started": started,
            "assignments": {},
            "recovered": True,
            "quarantined": dest,
        }
        write_json_atomic(src, entry)
        log.error("journal entry %s is unreadable; quarantined as %s, its instances are re-adopted by tag", name, dest)
        return entry

    # ------------------------------------------------------------------ holds
    @property
    def holds_path(self) -> str:
        return os.path.join(self.path, "holds.json")

    def load_holds(self) -> dict[str, dict[str, dict[str, Any]]]:
        raw = read_json(self.holds_path)
        holds: dict[str, dict[str, dict[str, Any]]] = {"nodes": {}, "groups": {}}
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        for kind in ("nodes", "groups"):
            part = doc.get(kind)
            if isinstance(part, dict):
                for key, value in cast("dict[Any, Any]", part).items():
                    if isinstance(key, str) and isinstance(value, dict):
                        holds[kind][key] = cast("dict[str, Any]", value)
        follow_boot_clock(holds, self.clock(), self.boot())
        return holds

    def save_holds(self, holds: dict[str, dict[str, dict[str, Any]]]) -> None:
        anchor_holds(holds, self.clock(), self.boot())
        write_json_atomic(self.holds_path, holds)
