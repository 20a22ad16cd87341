"""Homes at first login on the Session Manager path (docs/people.md, "Home directories and quotas"): Run As starts the user's shell without PAM,
so the session document's shell profile asks oddjob over D-Bus (``mkmyhomedir``) and oddjobd's root helper makes
``/home/<user>`` 0700 owned by the caller.

Real programs, in a private mount namespace (``namespace.py``): a private ``dbus-daemon`` (Debian's system-bus policy
and the packages' policies, on a socket of the run: ``DBUS_SYSTEM_BUS_ADDRESS`` for oddjobd and the client),
``oddjobd -n`` with the node's ``oddjobd-mkhomedir.conf`` bound in ``/etc/oddjobd.conf.d``, a temp ``/home``, and a
passwd/group copy with the directory user ``insider`` (uid/gid 20001, as sssd would give it). The shell profile's
home step runs as ``insider`` (``runuser``), with ``HOME=/home/insider`` as the agent sets it.

The package's own ``oddjobd-mkhomedir.conf`` lets nobody call ``mkmyhomedir`` ("no acl entries -> not allowed for
anyone"): the second test pins that, so a login node installs one that grants it (``<allow min_uid="1000"/>``, the
helper with ``-u 0077``).

The SSH path (the rendered login sshd PAM stack, ``render/slurm/pam.py: login_pam_sshd`` for the config tests'
directory cluster, ``pam_oddjob_mkhomedir``) is run with ``pamtester sshd insider open_session`` as root, with the
package's own oddjob file and the login setup's ``HOME_MODE 0700`` step applied to the namespace's login.defs: the
helper takes the home's mode from there (measured: 0755 with Debian's login.defs as shipped).

Files under test: the rendered login PAM stack, the login setup's HOME_MODE step and the rendered oddjob file
(``render/slurm/login.py: oddjob_mkhomedir_conf``, installed on a directory's login nodes over the package's). The
shell profile is the Session documents' own (``components/slurm/_sessions.py: SHELL_PROFILE``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.components.slurm._sessions import SHELL_PROFILE
from gpucluster.render.slurm.login import oddjob_mkhomedir_conf
from gpucluster.render.slurm.pam import login_pam_sshd
from tests.conftest import IN_CI, identity_directory_config, require_tool
from tests.e2e.namespace import MountNamespace
from tests.e2e.people import PAMTESTER, PEOPLE, RUNUSER
from tests.e2e.slurm_harness import run_dir

pytestmark = pytest.mark.slow

DBUS_DAEMON = "/usr/bin/dbus-daemon"
ODDJOBD = "/usr/sbin/oddjobd"
PACKAGE_CONF = Path("/etc/oddjobd.conf.d/oddjobd-mkhomedir.conf")
LOGIN_SETUP = Path(__file__).resolve().parents[2] / "templates" / "slurm" / "login-setup.sh.j2"
PROFILE_HOME_STEP = SHELL_PROFILE.replace(" >/dev/null 2>&1", "").replace("exec bash -l", "pwd")
"""The Session documents' shell profile (``components/slurm/_sessions.py``) with its output kept and ``pwd`` in place
of the login shell, so the test reads the D-Bus reply, oddjob's refusal and where the shell ends."""
assert PROFILE_HOME_STEP.endswith('cd "$HOME"; pwd') and "mkmyhomedir;" in PROFILE_HOME_STEP
INSIDER = 20001


def directory_people():  # type: ignore[no-untyped-def]
    """The config tests' directory cluster (``identity_directory_config``), loaded and resolved."""
    from gpucluster.load import load_spec

    slurm = load_spec(identity_directory_config(), stack="people-directory").cluster.slurm
    assert slurm is not None and slurm.identity is not None
    return slurm.identity


class OddjobNode:
    def __init__(self, d: Path, oddjob_conf: str, login_defs: str | None = None) -> None:
        self.dir = d
        etc = d / "etc"
        etc.mkdir()
        d.chmod(0o755)  # the bus socket and the user's view of the run
        for name, line in (("passwd", f"insider:x:{INSIDER}:{INSIDER}:insider:/home/insider:/bin/bash\n"),
                           ("group", f"insider:x:{INSIDER}:\n")):  # fmt: skip
            (etc / name).write_text(Path(f"/etc/{name}").read_text() + line)
        confd = d / "oddjobd.conf.d"
        shutil.copytree("/etc/oddjobd.conf.d", confd)
        (confd / PACKAGE_CONF.name).write_text(oddjob_conf)
        self.home = d / "home"
        self.home.mkdir(mode=0o755)
        socket = d / "system_bus_socket"
        (d / "bus.conf").write_text((PEOPLE / "system-bus.conf").read_text().replace("@SOCKET@", str(socket)))
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={socket}"}
        binds_defs = {}
        if login_defs is not None:
            (etc / "login.defs").write_text(login_defs)
            binds_defs[Path("/etc/login.defs")] = etc / "login.defs"
        pam = d / "pam.d"
        shutil.copytree("/etc/pam.d", pam, symlinks=True)
        (pam / "sshd").write_text(login_pam_sshd("people", directory_people()))
        self.ns = MountNamespace(
            {Path("/etc/passwd"): etc / "passwd", Path("/etc/group"): etc / "group",
             Path("/etc/oddjobd.conf.d"): confd, Path("/home"): self.home, Path("/etc/pam.d"): pam, **binds_defs}
        )  # fmt: skip
        self.procs: list[subprocess.Popen[bytes]] = []
        self._spawn([DBUS_DAEMON, "--nofork", "--nopidfile", f"--config-file={d / 'bus.conf'}"], "dbus.out")
        self._wait(socket.exists, "the bus socket")
        self._spawn([ODDJOBD, "-n", "-p", str(d / "oddjobd.pid")], "oddjobd.out")
        self._wait(self._oddjob_named, "oddjobd on the bus")

    def _spawn(self, argv: list[str], log: str) -> None:
        with open(self.dir / log, "ab") as out:
            proc = subprocess.Popen(
                self.ns.argv(*argv), env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)

    def _oddjob_named(self) -> bool:
        names = self.ns.run(
            ["dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
             "org.freedesktop.DBus.ListNames"], env=self.env,
        )  # fmt: skip
        return "com.redhat.oddjob_mkhomedir" in names.stdout

    def _wait(self, condition, what: str, timeout: float = 20) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while not condition():
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args} exited: {self.logs()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not within {timeout} s: {self.logs()}")
            time.sleep(0.1)

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace")[-1500:] for p in sorted(self.dir.glob("*.out")))

    def profile_as_insider(self) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "HOME": "/home/insider"}
        return self.ns.run([RUNUSER, "-u", "insider", "--", "sh", "-c", PROFILE_HOME_STEP], env=env)

    def open_session_as_sshd(self) -> subprocess.CompletedProcess[str]:
        """The rendered login sshd stack's session phase for insider, as sshd (root) runs it."""
        return self.ns.run([PAMTESTER, "-v", "sshd", "insider", "open_session", "close_session"], env=self.env)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        self.ns.close()


@pytest.fixture
def oddjob() -> Iterator[type[OddjobNode]]:
    for tool in (DBUS_DAEMON, ODDJOBD, "dbus-send", "/usr/libexec/oddjob/mkhomedir", "unshare", "nsenter"):
        require_tool(tool)
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("bind mounts in a mount namespace need root")
    started: list[OddjobNode] = []

    def make(conf: str, login_defs: str | None = None) -> OddjobNode:  # type: ignore[no-redef]
        node = OddjobNode(run_dir("gcoddjob-"), conf, login_defs)  # under /tmp: insider must reach the bus socket
        started.append(node)
        return node

    try:
        yield make  # type: ignore[misc]
    finally:
        for node in started:
            node.stop()
            shutil.rmtree(node.dir, ignore_errors=True)


def test_the_profile_makes_the_callers_home_0700_owned_by_them(oddjob):  # type: ignore[no-untyped-def]
    node = oddjob(oddjob_mkhomedir_conf("c1"))  # the file a directory's login node installs
    got = node.profile_as_insider()
    assert got.returncode == 0, (got, node.logs())
    assert got.stdout.strip().splitlines()[-1] == "/home/insider"  # the shell ends in its new home
    st = (node.home / "insider").stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (INSIDER, INSIDER, 0o700)
    again = node.profile_as_insider()  # the next session: the home is there, no call
    assert again.returncode == 0 and "method return" not in again.stdout


def test_the_packages_own_oddjob_file_lets_nobody_call_mkmyhomedir(oddjob):  # type: ignore[no-untyped-def]
    node = oddjob(PACKAGE_CONF.read_text())
    got = node.profile_as_insider()
    assert "com.redhat.oddjob.Error.ACL: ACL does not allow access" in got.stderr, got  # oddjobd's own refusal
    assert got.stdout.strip().splitlines()[-1] != "/home/insider" and "can't cd to /home/insider" in got.stderr, got
    assert not (node.home / "insider").exists()


def login_setup_home_mode_step() -> str:
    """The login setup's HOME_MODE step (``templates/slurm/login-setup.sh.j2``: static text, no template values)."""
    lines = [line for line in LOGIN_SETUP.read_text().splitlines() if "HOME_MODE" in line and not line.startswith("#")]
    assert len(lines) == 1, lines
    return lines[0]


def test_the_ssh_path_makes_the_home_0700_with_the_packages_oddjob_file_and_the_login_setup(oddjob):  # type: ignore[no-untyped-def]
    """SSH to a login node: the rendered login sshd stack's ``pam_oddjob_mkhomedir`` asks oddjobd as root
    (``mkhomedirfor``, which the package's own file allows root); the helper takes the mode from login.defs'
    ``HOME_MODE``, which the login setup's step sets (run here on the namespace's copy of login.defs). Measured: with
    Debian's login.defs as shipped (``UMASK 022``, no HOME_MODE) the home is 0755."""
    node = oddjob(PACKAGE_CONF.read_text(), Path("/etc/login.defs").read_text())
    step = node.ns.run(["sh", "-c", login_setup_home_mode_step()])
    assert step.returncode == 0, step
    got = node.open_session_as_sshd()
    assert got.returncode == 0, (got, node.logs())
    assert "Creating home directory for insider" in got.stdout
    st = (node.home / "insider").stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (INSIDER, INSIDER, 0o700)
