"""A node for the people tests: declared users, a PAM configuration and a real Slurm cluster, all inside a
private mount namespace (``namespace.py``) so the host's own files are never changed.

:class:`PeopleNode` is one node of the shared real-Slurm harness (``slurm_harness.LocalSlurm``): Slurm 22.05 of this
machine, or Slurm 24.11 of the trixie root (``tests/render/slurm_versions.py``) entered with ``chroot`` inside the
namespace. What the namespace shows over the node's own files (the root's, for 24.11):

- ``/etc/passwd``, ``/etc/group``, ``/etc/shadow``, ``/etc/gshadow``: copies of the node's, with the users the
  users script made (run with ``GPUCLUSTER_ROOT=<temp root>``: render's contract, ``useradd --prefix``);
- ``/etc/pam.d``, ``/etc/security``: copies with the services and files a test gives (the compute sshd stack);
- ``/etc/slurm``: the test cluster's slurm.conf (pam_slurm_adopt reads ``/etc/slurm/slurm.conf``);
- on this machine only, ``/lib/x86_64-linux-gnu/security``: a copy with bookworm's ``pam_slurm_adopt.so`` added —
  Debian 12 installs it in ``/lib/security``, a directory libpam does not search for a module named without a path
  (trixie and Ubuntu install it in the multiarch directory libpam searches).

PAM modules log through syslog(3) and a test machine has no ``/dev/log``: ``syslog_shim.c`` (LD_PRELOAD) writes
their lines into a file of the run, so a test reads the module's own words.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gpucluster.render.slurm.identity import users_json
from gpucluster.resolve.slurm.identity import DeclaredIdentity, ResolvedIdentity
from gpucluster_agents.contract.users import USERS_PATH
from tests.conftest import IN_CI, ROOT, identity_declared_config
from tests.e2e.namespace import MountNamespace, pivot_lines
from tests.e2e.slurm_harness import HERE, SBATCH, LocalSlurm, conf_lines, free_port, local_keys, node_line, run_dir
from tests.render.slurm_versions import TRIXIE_ROOT

PEOPLE = HERE / "people"
"""Hand-written stand-ins for rendered files, in this test directory (see each file's first comment)."""
IDENTITY_FILES = ("passwd", "group", "shadow", "gshadow")
HOST_PAM_MODULES = Path("/lib/x86_64-linux-gnu/security")
BOOKWORM_PAM_SLURM_ADOPT = Path("/lib/security/pam_slurm_adopt.so")
CGROUP_V1_FREEZER = Path("/sys/fs/cgroup/freezer")
"""Where cgroup v1's freezer hierarchy is mounted when the machine offers it (proctrack/cgroup's, on v1)."""
PAMTESTER = "/usr/bin/pamtester"
RUNUSER = "/usr/sbin/runuser"


TRIXIE_TOOLS = (
    "usr/sbin/slurmctld",
    "usr/sbin/slurmd",
    "usr/sbin/sackd",
    "usr/sbin/munged",
    "usr/bin/sbatch",
    "usr/bin/pamtester",
    "usr/lib/x86_64-linux-gnu/security/pam_slurm_adopt.so",
)
"""What the people tests need in the trixie root (``.ci/run``'s debootstrap ``--include``)."""


def trixie_root_or_skip() -> Path:
    """The Slurm 24.11 root with what the people tests run; missing: fails in CI, skips here with the command."""
    missing = [tool for tool in TRIXIE_TOOLS if not (TRIXIE_ROOT / tool).exists()]
    if missing:
        message = (
            f"the Slurm 24.11 root {TRIXIE_ROOT} lacks {', '.join(missing)}: chroot {TRIXIE_ROOT} apt-get install "
            "sackd slurm-client libpam-slurm-adopt pamtester (.ci/run's debootstrap --include)"
        )
        (pytest.fail if IN_CI else pytest.skip)(message)
    return TRIXIE_ROOT


def declared_people() -> ResolvedIdentity:
    """The slurm-p5-like people of the config tests (``tests/conftest.py: identity_declared_config``: alice 10001 in
    hpc-admins and vision, bob 10002 and carol 10003 in llm, admin group hpc-admins) loaded, checked and resolved."""
    from gpucluster.load import load_spec

    slurm = load_spec(identity_declared_config(), stack="people").cluster.slurm
    assert slurm is not None and slurm.identity is not None and isinstance(slurm.identity.source, DeclaredIdentity)
    identity = slurm.identity
    return identity


def rendered_users_script(work: Path, people: ResolvedIdentity | None = None) -> Path:
    """The users program as a node runs it (``gpucluster_agents/boot/users.sh`` from the node package, reading
    ``/etc/gpucluster/users.json``, which ``render/slurm/identity.py: users_json`` writes) for ``people`` (default:
    :func:`declared_people`): a wrapper that puts the users file on ``$GPUCLUSTER_ROOT``, then runs the program with
    this checkout's package."""
    source = (people or declared_people()).source
    assert isinstance(source, DeclaredIdentity)
    users = work / "users.json"
    users.write_text(users_json(source))
    path = work / "gpucluster-users"
    path.write_text(
        "#!/bin/bash\nset -e\n"
        f'install -D -m 0644 {shlex.quote(str(users))} "$GPUCLUSTER_ROOT{USERS_PATH}"\n'
        f"export GPUCLUSTER_AGENT_LIB={shlex.quote(str(ROOT))} GPUCLUSTER_PYTHON={shlex.quote(sys.executable)}\n"
        f'exec bash {shlex.quote(str(ROOT / "gpucluster_agents/boot/users.sh"))} "$@"\n'
    )
    path.chmod(0o755)
    return path


def declared_etc(work: Path, users_script: Path, base: Path = Path("/")) -> Path:
    """``work/root/etc`` with copies of ``base``'s passwd/group/shadow/gshadow, then the users script run on that root
    (``GPUCLUSTER_ROOT``): the etc directory."""
    etc = work / "root" / "etc"
    etc.mkdir(parents=True)
    for name in IDENTITY_FILES:
        shutil.copy2(base / "etc" / name, etc / name)
    proc = subprocess.run(
        ["bash", str(users_script)],
        env={"GPUCLUSTER_ROOT": str(work / "root"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"users script failed: {proc.stdout}{proc.stderr}"
    return etc


def copy_dir(source: Path, dest: Path, files: Mapping[str, str]) -> Path:
    """A copy of ``source`` (symlinks kept) with ``files`` written over it."""
    shutil.copytree(source, dest, symlinks=True)
    for name, text in files.items():
        (dest / name).write_text(text)
    return dest


def build_syslog_shim(out_dir: Path) -> Path:
    so = out_dir / "syslog_shim.so"
    gcc = shutil.which("gcc") or "/usr/bin/gcc"
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-o", str(so), str(HERE / "syslog_shim.c")], check=True, capture_output=True)
    return so


class PeopleNode:
    """One Slurm node (``n-1``) with declared users and a PAM configuration, in a private mount namespace.

    ``users_script``: the rendered users program to run on the node's temp root (:func:`rendered_users_script`).
    ``root``: the trixie root for Slurm 24.11, ``None`` for this machine's 22.05. ``pam``: services written into the
    copy of ``/etc/pam.d``; ``security``: files written into the copy of ``/etc/security``; ``conf``: slurm.conf
    keys added to (or replacing) the harness's."""

    def __init__(
        self,
        users_script: Path,
        *,
        root: Path | None = None,
        pam: Mapping[str, str] | None = None,
        security: Mapping[str, str] | None = None,
        conf: Mapping[str, str] | None = None,
        extra_binds: Mapping[Path, Path] | None = None,
        cgroups: bool = False,
        pivot: bool = False,
        subreaper: bool = False,
    ) -> None:
        """``pivot``: with ``root``, the namespace's root is ``root`` itself (``namespace.pivot_lines``) instead of a
        ``chroot`` into it: what a node whose jobs make user namespaces (containers) needs. ``subreaper``: slurmd
        under ``slurm_harness.SUBREAPER``."""
        self.root = root
        self.pivot = pivot and root is not None
        # a node name of this run: Slurm's cgroup v1 paths are slurm_<node>/uid_<uid>/job_<id>, so two runs'
        # "n-1" job 1 would share a cgroup; "@NODENAME@" in a PAM service is replaced by it, as node setup does
        self.node = f"p{os.getpid()}-{secrets.token_hex(3)}"
        self.cgroups = cgroups
        base = root or Path("/")
        self.dir = run_dir("gcpeople-") if root is None else Path(tempfile.mkdtemp(prefix="gcpeople-", dir=root / "tmp"))
        self.inner = self.dir if root is None else Path("/") / self.dir.relative_to(root)
        self.etc = declared_etc(self.dir, users_script, base)
        slurm_etc = copy_dir(base / "etc" / "slurm", self.dir / "etc-slurm", {})
        conf_path = slurm_etc / "slurm.conf"
        binds: dict[Path, Path] = {base / "etc" / name: self.etc / name for name in IDENTITY_FILES}
        services = {name: text.replace("@NODENAME@", self.node) for name, text in (pam or {}).items()}
        binds[base / "etc" / "pam.d"] = copy_dir(base / "etc" / "pam.d", self.dir / "pam.d", services)
        binds[base / "etc" / "security"] = copy_dir(base / "etc" / "security", self.dir / "security", security or {})
        binds[base / "etc" / "slurm"] = slurm_etc
        if root is None:
            modules = copy_dir(HOST_PAM_MODULES, self.dir / "pam-modules", {})
            shutil.copy2(BOOKWORM_PAM_SLURM_ADOPT, modules / BOOKWORM_PAM_SLURM_ADOPT.name)
            binds[HOST_PAM_MODULES] = modules
        else:
            binds[root / "proc"] = Path("/proc")  # this namespace's own: the shared mount of slurm_versions.py untouched
            binds[root / "sys"] = Path("/sys")  # 24.11's slurmd loads its cgroup plugin whatever ProctrackType says
        binds.update(extra_binds or {})
        after: list[str] = []
        if self.pivot and root is not None:  # a copy of the root's /etc under the binds, with the /etc/hosts
            # debootstrap does not make: slurmctld calls back srun by this machine's name (10 s of retries unresolved)
            hosts = self.dir / "root-etc" / "hosts"
            binds = {root / "etc": copy_dir(root / "etc", self.dir / "root-etc", {}), **binds}
            after = [f'echo "127.0.0.1 localhost $(hostname)" >{shlex.quote(str(hosts))}', *pivot_lines(root)]
        self.binds = binds
        self.ns = MountNamespace(binds, after=after)
        self.login_namespaces: list[MountNamespace] = []
        self.syslog = self.dir / "syslog"
        self.shim = build_syslog_shim(self.dir)
        self.dir.chmod(0o755)
        wrap = self._wrap
        self.slurm = LocalSlurm(self.dir, conf_path, wrap=wrap, subreaper=subreaper)
        keys = {"ClusterName": "people", **local_keys(self.inner, free_port()), "PrologFlags": "Contain"}
        if root is not None:  # debootstrap makes no /etc/hosts: the controller's address is given, not looked up
            keys["SlurmctldHost"] = "localhost(127.0.0.1)"
            keys.update(self._munge_keys())
        if cgroups:  # cgroup v1 (measured here: 22.05 and 24.11 both run it; autodetect picks v1)
            keys.update(ProctrackType="proctrack/cgroup", TaskPlugin="task/cgroup")
            (slurm_etc / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nConstrainCores=no\nConstrainRAMSpace=no\n")
        keys.update(conf or {})
        self.slurm.write_conf(
            [
                *conf_lines(keys),
                node_line(self.node, free_port(), memory_mb=256, State="UNKNOWN"),
                f"PartitionName=p Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
            ]
        )
        self.conf_inner = Path("/etc/slurm/slurm.conf")

    def _wrap(self, *argv: str) -> list[str]:
        if self.root is None:
            return self.ns.argv(*argv)
        if self.pivot:
            return self.ns.argv("/usr/bin/env", f"SLURM_CONF={self.conf_inner}", *argv)
        return self.ns.argv("chroot", str(self.root), "env", f"SLURM_CONF={self.conf_inner}", *argv)

    def inside(self, path: Path) -> Path:
        """``path`` (under the run dir) as the node's processes see it."""
        return self.inner / path.relative_to(self.dir)

    def _munge_keys(self) -> dict[str, str]:
        """24.11: munge instead of auth/none. Its cred/none plugin cannot be loaded by pam_slurm_adopt (pamtester dies
        with "cred_none.so: undefined symbol: get_log_level", measured): a munged of the run's own (key, socket)."""
        (self.dir / "munge").mkdir(mode=0o755)
        key = self.dir / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = self.inside(self.dir / "munge" / "munge.sock")
        return {"AuthType": "auth/munge", "CredType": "cred/munge", "AuthInfo": f"socket={self.munge_socket}"}

    def _start_munge(self) -> None:
        m = self.inside(self.dir / "munge")
        argv = ["/usr/sbin/munged", "--foreground", "--force", f"--socket={self.munge_socket}", f"--key-file={m}/munge.key"]
        argv += [f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"]
        self.slurm.spawn(argv, "munged.out")
        socket_path = self.dir / "munge" / "munge.sock"
        self.slurm.wait("munged's socket", socket_path.exists, 20, 0.1)

    def start(self) -> None:
        if self.root is not None:
            self._start_munge()
        self.slurm.start_ctld()
        self.slurm.start_slurmd(self.node)
        self.slurm.wait("node idle", lambda: "IDLE" in self.slurm.node(self.node).get("State", ""), 60)

    def as_user(self, user: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``argv`` run as ``user`` (``runuser``) on the node, with the harness's environment (its marker)."""
        return self.slurm.run(RUNUSER, "-u", user, "--", *argv, timeout=timeout)

    def sbatch_as(self, user: str, *args: str) -> int:
        proc = self.as_user(user, SBATCH, "--parsable", "--chdir=/tmp", *args)
        assert proc.returncode == 0, proc.stderr
        return int(proc.stdout.strip().split(";")[0])

    def _pamtester_argv(self, service: str, user: str, *ops: str) -> tuple[list[str], dict[str, str]]:
        self.syslog.write_text("")
        env = {k: v for k, v in self.slurm.env.items() if k != "SLURM_CONF"}
        shim = [f"LD_PRELOAD={self.inside(self.shim)}", f"GPUCLUSTER_SYSLOG_FILE={self.inside(self.syslog)}"]
        argv = ["env", *shim, PAMTESTER, "-v", service, user, *ops]
        if self.root is not None:
            argv = ["chroot", str(self.root), *argv]
        return self.ns.argv(*argv), env  # nsenter, chroot and env exec: the process's pid is pamtester's

    def pamtester(self, service: str, user: str, *ops: str) -> tuple[int, subprocess.CompletedProcess[str], str]:
        """``pamtester service user ops`` as root, as sshd would call PAM: no SLURM_CONF in its environment (the
        module reads /etc/slurm/slurm.conf). Returns pamtester's pid, its result and the syslog lines it wrote."""
        argv, env = self._pamtester_argv(service, user, *ops)
        with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            out, err = proc.communicate(timeout=60)
        return proc.pid, subprocess.CompletedProcess(proc.args, proc.returncode, out, err), self.syslog.read_text()

    def held_pamtester(self, service: str, user: str) -> subprocess.Popen[str]:
        """``pamtester service user acct_mgmt authenticate``: after the account phase (adoption) it waits at the
        password prompt on its stdin, alive like an sshd session, until the caller closes that."""
        argv, env = self._pamtester_argv(service, user, "acct_mgmt", "authenticate")
        return subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def login_namespace(self) -> MountNamespace:
        """A login node of the same people: a namespace of its own with the same identity and PAM files, no
        slurm.conf of its own (``/etc/slurm`` as the package leaves it) and, for 24.11, its own ``/run`` (sackd's
        configless cache, ``/run/slurm/conf``). Ended with the node."""
        base = self.root or Path("/")
        binds = dict(self.binds)
        binds[base / "etc" / "slurm"] = copy_dir(
            base / "etc" / "slurm", self.dir / f"login-etc-slurm-{len(self.login_namespaces)}", {}
        )
        if self.root is not None:
            run = self.dir / f"login-run-{len(self.login_namespaces)}"
            (run / "slurm").mkdir(
                mode=0o755, parents=True
            )  # sackd makes /run/slurm/conf, not its parent (systemd's RuntimeDirectory)
            (run / "munge").mkdir(mode=0o755)  # before it has a slurm.conf (AuthInfo), sackd asks munge's default socket
            (run / "munge" / "munge.socket.2").symlink_to(self.munge_socket)
            binds[self.root / "run"] = run
        ns = MountNamespace(binds)
        self.login_namespaces.append(ns)
        return ns

    def spawn_in(self, ns: MountNamespace, argv: Sequence[str], log: str) -> subprocess.Popen[bytes]:
        """A daemon of another namespace (a login node's sackd), with the run's marker: the harness's stop ends it."""
        env = {k: v for k, v in self.slurm.env.items() if k != "SLURM_CONF"}
        chroot = ["chroot", str(self.root)] if self.root is not None else []
        with open(self.dir / "log" / log, "ab") as out:
            proc = subprocess.Popen(
                ns.argv(*chroot, *argv), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.slurm.procs.append(proc)
        return proc

    def extern_cgroup_procs(self, job: int, uid: int) -> list[int]:
        """The pids in the job's extern step's freezer cgroup (cgroup v1, proctrack/cgroup)."""
        path = CGROUP_V1_FREEZER / f"slurm_{self.node}" / f"uid_{uid}" / f"job_{job}" / "step_extern" / "cgroup.procs"
        return [int(x) for x in path.read_text().split()] if path.exists() else []

    def stop(self) -> None:
        """The harness's daemons (by marker), then every process left in the node's namespaces (by pid: 24.11's
        slurmstepd clears its environment, so the marker misses it), then this node's cgroups, then the files."""
        try:
            self.slurm.stop()
        finally:
            for ns in (*self.login_namespaces, self.ns):
                ns.kill_members()
                ns.close()
            self._remove_cgroups()
            shutil.rmtree(self.dir, ignore_errors=True)

    def _remove_cgroups(self) -> None:
        for top in Path("/sys/fs/cgroup").glob(f"*/slurm_{self.node}"):
            for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    d.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()

    def leftover(self) -> list[int]:
        """Processes of the run still alive: by marker, and in any of its namespaces."""
        return sorted({*self.slurm.leftover(), *(pid for ns in (*self.login_namespaces, self.ns) for pid in ns.members())})

    def leftover_cgroups(self) -> list[Path]:
        return list(Path("/sys/fs/cgroup").glob(f"*/slurm_{self.node}"))
