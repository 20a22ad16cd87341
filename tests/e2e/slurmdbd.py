"""Slurm with accounting, on one machine: a private MariaDB, Debian's slurmdbd 22.05, a private munged and slurmctld
(with ``AccountingStorageType=accounting_storage/slurmdbd``), all as root in a short run dir, for the teams' tests
 and ``bench/teams_reconcile.py``.

What makes it run here, and nothing else (the ``local_*`` functions patch the rendered files):

- MariaDB: ``mariadbd --skip-networking`` on a socket in the run dir, its system tables loaded into an empty data
  dir with grants skipped (or ``install_db=True``: ``mariadb-install-db``, root through socket authentication).
  slurmdbd.conf has no socket key: the client library takes it from ``MYSQL_UNIX_PORT`` in slurmdbd's environment.
- ``wrap``: every program run inside another root, which sees the run dir at the same path (the trixie root's
  Slurm 24.11: ``test_teams_slurm_24_11.py``).
- munge: a munged of the run (own key and socket). slurmctld and the commands name its socket in ``AuthInfo``;
  the connections to slurmdbd (slurmctld's, sacctmgr's) take it from ``AccountingStoragePass`` (measured: without
  it sacctmgr asks munge's default socket), slurmdbd from its own ``AuthInfo``.
- slurmdbd on 127.0.0.1 and a port the OS hands out; slurmctld on another.

Start order: MariaDB, munged, slurmdbd, then (``start_ctld``) slurmctld, which at its first start needs slurmdbd
up (measured: "fatal: slurmdbd and/or database must be up at slurmctld start time"). The cluster row is added by
``add_cluster`` (the reconcile adds it too, when missing). Every process carries the run's marker (the shared
harness's teardown), so :meth:`AccountingSlurm.stop` leaves nothing behind.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests.e2e.slurm_harness import LocalSlurm, conf_lines, free_port, kill_marked, local_keys, run_dir

__all__ = [
    "SACCTMGR",
    "SLURMDBD",
    "AccountingSlurm",
    "accounting_keys",
    "local_slurmdbd_conf",
    "missing_tools",
    "run_dir",
]

MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = "/usr/bin/mariadb-install-db"
MARIADB = "/usr/bin/mariadb"
SYSTEM_TABLES = "/usr/share/mysql/mysql_system_tables.sql"
"""MariaDB's system tables, as mariadb-install-db creates them (Debian's mariadb-server ships the file)."""
MUNGED = "/usr/sbin/munged"
SLURMDBD = "/usr/sbin/slurmdbd"
SACCTMGR = "/usr/bin/sacctmgr"
SQUEUE = "/usr/bin/squeue"
TOOLS = (MARIADBD, INSTALL_DB, MARIADB, SYSTEM_TABLES, MUNGED, SLURMDBD, SACCTMGR, SQUEUE, "/usr/sbin/slurmctld")

SLURMDBD_CONF = """\
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StorageLoc=slurm_acct_db
"""
"""A slurmdbd.conf like the head node's (templates/slurm/slurmdbd.conf.j2), for callers without a rendered one."""


def missing_tools() -> list[str]:
    """The programs this fixture needs that this machine lacks (a test skips locally, fails in CI)."""
    return [tool for tool in TOOLS if not os.access(tool, os.R_OK if tool.endswith(".sql") else os.X_OK)]


def set_keys(text: str, keys: Mapping[str, str]) -> str:
    """``text`` (a slurm.conf or slurmdbd.conf) with each of ``keys`` set: a line ``Key=…`` replaced in place, else
    appended. Keys compare case-insensitively, as Slurm reads them."""
    lines = text.splitlines()
    for key, value in keys.items():
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=", re.IGNORECASE)
        hits = [i for i, line in enumerate(lines) if pattern.match(line)]
        if hits:
            lines[hits[0]] = f"{key}={value}"
            for i in reversed(hits[1:]):
                del lines[i]
        else:
            lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def local_slurmdbd_conf(text: str, d: Path, port: int, munge_socket: Path) -> str:
    """The head node's slurmdbd.conf, patched to run here: root instead of the slurm user (for the daemon and for
    MariaDB's socket authentication), 127.0.0.1 and a private port, log and pid in the run dir, the run's munged."""
    return set_keys(
        text,
        {
            "SlurmUser": "root",
            "StorageUser": "root",
            "DbdAddr": "127.0.0.1",
            "DbdPort": str(port),
            "LogFile": str(d / "log" / "slurmdbd.log"),
            "PidFile": str(d / "slurmdbd.pid"),
            "AuthInfo": f"socket={munge_socket}",
            "DebugLevel": "info",
        },
    )


def accounting_keys(d: Path, ctld_port: int, dbd_port: int, munge_socket: Path) -> dict[str, str]:
    """slurm.conf keys of a cluster on this machine (``local_keys``) that keeps its accounting in this run's
    slurmdbd, authenticating with the run's munged."""
    keys = local_keys(d, ctld_port)
    keys.update(
        {
            "AuthType": "auth/munge",
            "CredType": "cred/munge",
            "AuthInfo": f"socket={munge_socket}",
            "AccountingStorageType": "accounting_storage/slurmdbd",
            "AccountingStorageHost": "localhost",
            "AccountingStoragePort": str(dbd_port),
            "AccountingStoragePass": str(munge_socket),
        }
    )
    return keys


class AccountingSlurm(LocalSlurm):
    """MariaDB + munged + slurmdbd + slurmctld in ``run_dir``. ``slurm_conf``: the cluster's slurm.conf without the
    local keys (they are set over it: :func:`accounting_keys`); default a one-node cluster named ``cluster``.
    ``slurmdbd_conf``: the head node's slurmdbd.conf (patched by :func:`local_slurmdbd_conf`); ``files``: more files
    for slurm.conf's directory (``topology.conf``)."""

    def __init__(
        self,
        run: Path,
        *,
        cluster: str = "gpucluster-test",
        slurm_conf: str | None = None,
        slurmdbd_conf: str = SLURMDBD_CONF,
        extra_keys: Mapping[str, str] | None = None,
        files: Mapping[str, str] | None = None,
        install_db: bool = False,
        wrap: Callable[..., list[str]] | None = None,
    ) -> None:
        super().__init__(run, run / "etc" / "slurm.conf", wrap=wrap, subdirs=("state", "spool", "log", "pids", "munge"))
        (run / "munge").chmod(0o755)  # munge refuses a socket dir others may write; clients need to reach it
        self.cluster = cluster
        self.munge_socket = run / "munge" / "munge.sock"
        self.mysql_socket = run / "mysql.sock"
        self.dbd_port = free_port()
        self.ctld_port = free_port()
        keys = {"ClusterName": cluster, **accounting_keys(run, self.ctld_port, self.dbd_port, self.munge_socket)}
        keys.update(extra_keys or {})
        base = slurm_conf if slurm_conf is not None else default_slurm_conf()
        self.conf_path.write_text(set_keys(base, keys))
        for name, text in (files or {}).items():  # files slurm.conf's directory holds (topology.conf)
            (run / "etc" / name).write_text(text)
        dbd = run / "etc" / "slurmdbd.conf"  # slurmdbd reads slurmdbd.conf next to SLURM_CONF
        dbd.write_text(local_slurmdbd_conf(slurmdbd_conf, run, self.dbd_port, self.munge_socket))
        dbd.chmod(0o600)  # slurmdbd refuses a slurmdbd.conf others can read
        self.install_db = install_db
        self.mariadbd: subprocess.Popen[bytes] | None = None
        self.dbd: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ daemons
    def start(self, ctld: bool = True) -> None:
        """MariaDB, munged, slurmdbd, then slurmctld (unless ``ctld`` is false)."""
        self.start_mariadb()
        self.start_munge()
        self.start_dbd()
        if ctld:
            self.start_ctld()

    def start_mariadb(self, timeout: float = 60) -> None:
        """MariaDB on its socket. ``install_db``: its system tables from ``mariadb-install-db`` (root through socket
        authentication, as the head node's slurm user; 5-6 s here). Otherwise (the tests' default) an empty data
        dir, ``--skip-grant-tables`` and the same system tables loaded through the running server (under 2 s): the
        database is private anyway (no networking, its socket in the 0700 run dir). The system tables are needed:
        without ``mysql.proc`` slurmdbd's stored functions are missing and every association's MaxWall reads 0
        (measured)."""
        data = self.dir / "mysql"
        grants: list[str] = []
        if not self.install_db:
            data.mkdir(exist_ok=True)
            grants = ["--skip-grant-tables"]
        elif not data.exists():
            argv = [INSTALL_DB, "--no-defaults", f"--datadir={data}", "--user=root", "--skip-test-db"]
            argv.append("--auth-root-authentication-method=socket")
            with open(self.dir / "log" / "mariadb-install.log", "wb") as out:
                subprocess.run(self.wrap(*argv), stdout=out, stderr=subprocess.STDOUT, check=True, env=self.env, timeout=timeout)
        argv = [MARIADBD, "--no-defaults", "--user=root", f"--datadir={data}", f"--socket={self.mysql_socket}", *grants]
        argv += [
            "--skip-networking",
            f"--pid-file={self.dir / 'mariadbd.pid'}",
            f"--log-error={self.dir / 'log' / 'mariadbd.err'}",
        ]
        argv += ["--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=0", "--skip-log-bin"]
        argv += ["--innodb-lock-wait-timeout=900"]  # slurmdbd's recommended value (it logs an error below it)
        self.mariadbd = self.spawn(argv, "mariadbd.out")
        self._wait_up("mariadbd's socket", self.mariadbd, self.mysql_socket.exists, timeout, "mariadbd.err")
        if not self.install_db:
            sql = "CREATE DATABASE IF NOT EXISTS mysql; USE mysql;\n" + Path(SYSTEM_TABLES).read_text()
            argv = [MARIADB, "--no-defaults", f"--socket={self.mysql_socket}", "--user=root"]
            wrapped = self.wrap(*argv)
            subprocess.run(wrapped, input=sql.encode(), capture_output=True, check=True, env=self.env, timeout=timeout)

    def start_munge(self, timeout: float = 20) -> None:
        key = self.dir / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        m = self.dir / "munge"
        argv = [MUNGED, "--foreground", "--force", f"--socket={self.munge_socket}", f"--key-file={key}"]
        argv += [f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"]
        proc = self.spawn(argv, "munged.out")
        self._wait_up("munged's socket", proc, self.munge_socket.exists, timeout, "munged.out")

    def start_dbd(self, timeout: float = 60) -> None:
        """slurmdbd, up when sacctmgr gets an answer from it (it creates its tables at the first start)."""
        env = {**self.env, "MYSQL_UNIX_PORT": str(self.mysql_socket)}
        self.dbd = self.spawn([SLURMDBD, "-D"], "slurmdbd.out", env)
        self._wait_up(
            "slurmdbd",
            self.dbd,
            lambda: self.sacctmgr("-nP", "show", "qos", "format=name").returncode == 0,
            timeout,
            "slurmdbd.out",
        )

    def stop_dbd(self, timeout: float = 30) -> None:
        """slurmdbd stopped (SIGTERM, waited for): what the reconcile sees when the database is unreachable."""
        assert self.dbd is not None
        self.dbd.terminate()
        self.dbd.wait(timeout=timeout)

    def _wait_up(self, what: str, proc: subprocess.Popen[bytes], ready: object, timeout: float, log: str) -> None:
        assert callable(ready)
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: exited {proc.returncode}\n{self.log(log)[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not up in {timeout:.0f} s\n{self.log(log)[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Every process of the run (slurmctld, slurmdbd, munged, mariadbd, jobs), by pid, with SIGKILL: the run's
        state and database are thrown away, so nothing needs a clean shutdown (seconds less per module)."""
        for proc in [p for p in (self.ctld, *self.procs) if p is not None and p.poll() is None]:
            proc.kill()
            proc.wait(timeout=10)
        kill_marked(self.marker)

    def cleanup(self) -> None:
        """Stop everything, then remove the run dir."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ commands
    def sacctmgr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.run(SACCTMGR, *args, timeout=timeout)

    def add_cluster(self) -> None:
        proc = self.sacctmgr("-i", "add", "cluster", self.cluster)
        if proc.returncode != 0 and "already exists" not in proc.stdout + proc.stderr:
            raise RuntimeError(f"sacctmgr add cluster: {proc.stdout}{proc.stderr}")

    def show(self, entity: str, fields: Sequence[str], *where: str) -> list[dict[str, str]]:
        """``sacctmgr -nP show ENTITY [WHERE…] format=FIELDS`` as one dict per row (keys: ``fields`` as given)."""
        proc = self.sacctmgr("-nP", "show", entity, *where, "format=" + ",".join(fields))
        if proc.returncode != 0:
            raise RuntimeError(f"sacctmgr show {entity}: {proc.stderr}")
        return [dict(zip(fields, line.split("|"), strict=True)) for line in proc.stdout.splitlines() if line]

    def squeue(self, *args: str) -> str:
        return self.run(SQUEUE, *args).stdout

    def debug(self, logs: Sequence[str] = ("slurmctld.log", "slurmdbd.log"), lines: int = 40) -> str:
        return super().debug(logs, lines)


def default_slurm_conf() -> str:
    """A one-node cluster (no slurmd needed: jobs submitted held stay pending), with the accounting keys the
    teams need. The node is declared CPUs=1 so nothing about this machine's size matters."""
    keys = {
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core",
        "GresTypes": "gpu",
        "AccountingStorageTRES": "gres/gpu",
        "AccountingStorageEnforce": "associations,limits,qos,safe",
        "PriorityType": "priority/multifactor",
        "SchedulerParameters": "sched_interval=2,bf_interval=2",
    }
    lines = conf_lines(keys)
    lines.append(f"NodeName=node-1 NodeAddr=127.0.0.1 Port={free_port()} CPUs=1 RealMemory=512 State=UNKNOWN")
    lines.append("PartitionName=p5 Nodes=node-1 Default=YES State=UP MaxTime=INFINITE")
    return "\n".join(lines) + "\n"
