# pyright: strict
"""What slurmdbd holds now, read with ``sacctmgr -nP show …`` (one call per entity), and the runner every Slurm
command of the reconcile goes through (injectable: the unit tests give a fake one).

sacctmgr's parsable output as measured on 22.05: ``GrpTRES`` ``gres/gpu=40`` (comma-joined ``name=count``),
``MaxWall`` ``[D-]HH:MM:SS`` (or ``MM:SS``; empty: none), ``QOS`` a comma list, sorted; an apostrophe in a
description comes back as a backtick. A user's association copies its account's limits when it is added, so only
the account rows' limits are compared.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Optional

__all__ = [
    "AssocRow",
    "DbState",
    "QosRow",
    "Result",
    "Runner",
    "SlurmDb",
    "Unreachable",
    "parse_tres",
    "parse_wall",
    "subprocess_runner",
]


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], Optional[str]], Result]
"""``runner(argv, stdin_text)``: runs a command, returns its exit status and output (never raises for a non-zero
status; raises OSError when the program cannot run)."""


def subprocess_runner(timeout: float = 300) -> Runner:
    def run(argv: Sequence[str], stdin: str | None = None) -> Result:
        proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False, timeout=timeout)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


class Unreachable(RuntimeError):
    """slurmdbd (or slurmctld, for squeue) did not answer, or slurmdbd does not know a TRES yet (slurmctld creates
    ``gres/gpu`` from AccountingStorageTRES when it starts): the reconcile stops and exits 75 (systemd retries)."""


class ReadFailed(RuntimeError):
    """A command answered with an error that is not a connection problem (a bad argument, a refused change)."""


_UNREACHABLE = (
    "connection refused",
    "persistent connection",
    "unable to contact",
    "unable to connect",
    "slurmdbd",
    "timed out",
    "socket timed out",
    "problem talking to the database",
    "database is down",
    "slurm_persist_conn_open",
    "no tres known",  # gres/gpu exists once slurmctld (AccountingStorageTRES) has started: a later pass succeeds
)


def is_unreachable(res: Result) -> bool:
    text = (res.stdout + res.stderr).lower()
    return res.rc != 0 and any(word in text for word in _UNREACHABLE)


def parse_tres(text: str) -> dict[str, int]:
    """``gres/gpu=40,cpu=8`` → ``{"gres/gpu": 40, "cpu": 8}`` (empty → ``{}``)."""
    out: dict[str, int] = {}
    for part in text.split(","):
        if "=" in part:
            name, _, count = part.partition("=")
            try:
                out[name.strip()] = int(count)
            except ValueError:
                continue
    return out


def parse_wall(text: str) -> int | None:
    """``7-00:00:00`` / ``01:30:00`` / ``30:00`` → minutes; empty or ``UNLIMITED`` → None."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days = 0
    if "-" in text:
        d, _, text = text.partition("-")
        days = int(d)
    parts = [int(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts
    return days * 1440 + hours * 60 + minutes + (1 if seconds else 0)


def names(text: str) -> tuple[str, ...]:
    return tuple(sorted(n for n in text.split(",") if n))


@dataclass(frozen=True)
class AssocRow:
    account: str
    user: str
    parent: str
    fairshare: str
    grp_tres: dict[str, int]
    max_wall: int | None
    qos: tuple[str, ...]
    default_qos: str


@dataclass(frozen=True)
class QosRow:
    name: str
    description: str
    priority: int
    preempt: tuple[str, ...]
    preempt_mode: str
    grp_tres: dict[str, int]
    max_wall: int | None


@dataclass
class DbState:
    """The cluster's rows in slurmdbd."""

    cluster_exists: bool
    accounts: dict[str, str] = field(default_factory=lambda: {})  # name -> description
    assocs: list[AssocRow] = field(default_factory=lambda: [])  # this cluster's, partition-less
    qos: dict[str, QosRow] = field(default_factory=lambda: {})
    default_account: dict[str, str] = field(default_factory=lambda: {})  # user -> default account

    def account_row(self, name: str) -> AssocRow | None:
        return next((a for a in self.assocs if a.account == name and not a.user), None)

    def users_of(self, account: str) -> list[str]:
        return [a.user for a in self.assocs if a.account == account and a.user]


ASSOC_FIELDS = ("account", "user", "partition", "parentname", "fairshare", "grptres", "maxwall", "qos", "defaultqos")
QOS_FIELDS = ("name", "description", "priority", "preempt", "preemptmode", "grptres", "maxwall")


class SlurmDb:
    """sacctmgr and squeue through ``runner``; counts its calls and logs every command line to ``trace``."""

    def __init__(self, runner: Runner, bin_dir: str = "/usr/bin", trace: Callable[[str], None] | None = None) -> None:
        self.runner = runner
        self.sacctmgr_path = f"{bin_dir}/sacctmgr"
        self.squeue_path = f"{bin_dir}/squeue"
        self.trace = trace
        self.calls = 0
        self._lock = threading.Lock()

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> Result:
        with self._lock:
            self.calls += 1
        if self.trace is not None:
            self.trace(" ".join(argv))
        try:
            res = self.runner(argv, stdin)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unreachable(f"{argv[0]}: {exc}") from exc
        if is_unreachable(res):
            raise Unreachable(f"{' '.join(argv[:4])}: {(res.stderr or res.stdout).strip()[:300]}")
        return res

    def sacctmgr(self, *args: str, stdin: str | None = None) -> Result:
        return self._run([self.sacctmgr_path, *args], stdin)

    def change(self, *args: str) -> Result:
        """``sacctmgr -i ARGS`` (no prompt); a refused change raises :class:`ReadFailed`."""
        res = self.sacctmgr("-i", *args)
        if res.rc != 0:
            raise ReadFailed(f"sacctmgr {' '.join(args)[:200]}: {(res.stderr or res.stdout).strip()[:300]}")
        return res

    def show(self, entity: str, fields: Sequence[str], *where: str) -> list[list[str]]:
        res = self.sacctmgr("-nP", "show", entity, *where, "format=" + ",".join(fields))
        if res.rc != 0:
            raise ReadFailed(f"sacctmgr show {entity}: {(res.stderr or res.stdout).strip()[:300]}")
        rows: list[list[str]] = []
        for line in res.stdout.splitlines():
            if not line.strip():
                continue
            cells = line.split("|")
            if len(cells) < len(fields):
                raise ReadFailed(f"sacctmgr show {entity}: unexpected line {line!r}")
            rows.append(cells)
        return rows

    def read(self, cluster: str) -> DbState:
        """Every row the reconcile compares, for ``cluster``: the five ``show`` calls side by side (each is mostly a
        round trip to slurmdbd: 0.2-0.4 s apiece here). Raises on any failed read (nothing is decided then)."""
        reads = {
            "cluster": ("cluster", ["cluster"], ()),
            "account": ("account", ["account", "descr"], ()),
            "qos": ("qos", list(QOS_FIELDS), ()),
            "user": ("user", ["user", "defaultaccount"], ()),
            "assoc": ("assoc", list(ASSOC_FIELDS), (f"cluster={cluster}",)),
        }
        with ThreadPoolExecutor(max_workers=len(reads)) as pool:
            futures = {k: pool.submit(self.show, entity, fields, *where) for k, (entity, fields, where) in reads.items()}
            rows = {k: f.result() for k, f in futures.items()}  # the first failure raises here
        state = DbState(cluster_exists=cluster in {row[0] for row in rows["cluster"]})
        for name, descr in rows["account"]:
            state.accounts[name] = descr
        for row in rows["qos"]:
            name, descr, prio, preempt, mode, tres, wall = row[: len(QOS_FIELDS)]
            priority = int(prio) if prio.strip().isdigit() else 0
            state.qos[name] = QosRow(name, descr, priority, names(preempt), mode.lower(), parse_tres(tres), parse_wall(wall))
        for user, default in rows["user"]:
            state.default_account[user] = default
        if state.cluster_exists:
            for row in rows["assoc"]:
                account, user, partition, parent, share, tres, wall, qos, dqos = row[: len(ASSOC_FIELDS)]
                if partition:
                    continue  # partition associations are a site's own: never compared, never touched
                state.assocs.append(AssocRow(account, user, parent, share, parse_tres(tres), parse_wall(wall), names(qos), dqos))
        return state

    def active_jobs(self) -> dict[str, list[tuple[str, str]]]:
        """account -> (job id, user) of its jobs that are pending, running, suspended or completing (``squeue``)."""
        res = self._run([self.squeue_path, "-h", "-a", "-o", "%a|%i|%u|%T"])
        if res.rc != 0:
            raise ReadFailed(f"squeue: {(res.stderr or res.stdout).strip()[:300]}")
        out: dict[str, list[tuple[str, str]]] = {}
        for line in res.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4 and parts[0]:
                out.setdefault(parts[0].lower(), []).append((parts[1], parts[2]))
        return out
