"""A directory's people on a node (issue #21, D4, F9): a real ``slapd`` (``ldap.py``: ldaps with a test CA made by
openssl, the memberof overlay) and a real ``sssd`` in a private mount namespace (``namespace.py``: the node's
``/etc/sssd``, ``/var/lib/sss``, ``/var/log/sssd``, ``/run``, ``/etc/nsswitch.conf`` (``files sss``) and
``/etc/pam.d`` are temp copies bound there; the host's are untouched).

- ``sssctl config-check`` accepts the node's sssd.conf (the template with the bind password added the way the boot
  helper adds it: ``ldap_default_authtok_type = password`` + ``ldap_default_authtok`` in the domain section only);
- ``getent passwd`` and ``id`` give the directory's uid 20001 for ``insider`` (sssd read the directory over ldaps,
  trusting the test CA only, bound as the read-only account);
- sshd's account phase (``pamtester sshd <user> acct_mgmt``, login stack): ``insider`` (member of ``cn=hpc-users``,
  the access filter ``(memberOf=cn=hpc-users,…)`` — the real ``memberOf`` attribute of the memberof overlay, as AD
  has) is admitted, ``outsider`` is refused with PAM's "Permission denied" and sssd's own log line;
- the template itself holds no ``ldap_default_authtok``.

Active Directory's id mapping (``ldap_id_mapping = true``: uids derived from SIDs) cannot be exercised with slapd
(no ``objectSid``); the AD-flavoured configuration is checked by ``sssctl config-check`` only.

Files under test: the sssd.conf template and the login PAM stack are hand-written stand-ins in ``tests/e2e/people/``
and the password is added by this test, until i21-render's ``sssd.conf.j2``, ``pam-sshd-login.j2`` and the
``gpucluster-identity sssd-conf`` helper land (then: those, the helper run against a moto secret).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI, require_tool
from tests.e2e.ldap import SLAPD, USERS, Slapd
from tests.e2e.namespace import MountNamespace
from tests.e2e.people import PAMTESTER, PEOPLE, build_syslog_shim

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("people-slapd")]

SSSD = "/usr/sbin/sssd"
SSS_DIRS = ("db", "pipes/private", "mc", "pubconf", "gpo_cache", "secrets", "deskprofile")


def with_password(template: str, password: str) -> str:
    """What the boot helper writes: the template with the password in the domain section only (D4)."""
    lines = template.splitlines()
    at = lines.index("[domain/directory]") + 1
    return (
        "\n".join([*lines[:at], "ldap_default_authtok_type = password", f"ldap_default_authtok = {password}", *lines[at:]]) + "\n"
    )


def node_sssd_conf(slapd: Slapd) -> tuple[str, str]:
    """(the template as rendered for this directory, the node's sssd.conf with the bind password)."""
    template = (PEOPLE / "sssd.conf.in").read_text().replace("@URI@", slapd.uri).replace("@CA@", str(slapd.ca))
    return template, with_password(template, slapd.bind_password)


def config_check(conf_text: str, d: Path) -> subprocess.CompletedProcess[str]:
    d.mkdir()
    (d / "conf.d").mkdir()
    conf = d / "sssd.conf"
    conf.write_text(conf_text)
    conf.chmod(0o600)
    return subprocess.run(["sssctl", "config-check", "-c", str(conf)], capture_output=True, text=True, check=False)


class SssdNode:
    """sssd -i with the node's sssd.conf, in a namespace of its own."""

    def __init__(self, d: Path, conf_text: str) -> None:
        self.dir = d
        etc_sssd = d / "etc-sssd"
        (etc_sssd / "conf.d").mkdir(parents=True)
        (etc_sssd / "sssd.conf").write_text(conf_text)
        (etc_sssd / "sssd.conf").chmod(0o600)
        lib = d / "var-lib-sss"
        for sub in SSS_DIRS:
            (lib / sub).mkdir(parents=True)
        (d / "log").mkdir()
        (d / "run").mkdir()
        nsswitch = d / "nsswitch.conf"
        nsswitch.write_text("passwd: files sss\ngroup: files sss\nshadow: files\nhosts: files dns\n")
        pam = d / "pam.d"
        shutil.copytree("/etc/pam.d", pam, symlinks=True)
        (pam / "sshd").write_text((PEOPLE / "pam-sshd-login").read_text())
        self.shim = build_syslog_shim(d)
        self.syslog = d / "syslog"
        self.ns = MountNamespace(
            {
                Path("/etc/sssd"): etc_sssd,
                Path("/var/lib/sss"): lib,
                Path("/var/log/sssd"): d / "log",
                Path("/run"): d / "run",
                Path("/etc/nsswitch.conf"): nsswitch,
                Path("/etc/pam.d"): pam,
            }
        )
        started = time.monotonic()
        self.proc = subprocess.Popen(
            self.ns.argv(SSSD, "-i", "-d", "3", "--logger=stderr"),
            stdin=subprocess.DEVNULL, stdout=open(d / "sssd.out", "ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self._wait_up()
        self.start_seconds = time.monotonic() - started

    def _wait_up(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sssd exited: {(self.dir / 'sssd.out').read_text()[-3000:]}")
            if (self.dir / "var-lib-sss" / "pipes" / "nss").exists() and (self.dir / "var-lib-sss" / "pipes" / "pam").exists():
                return
            time.sleep(0.1)
        raise RuntimeError(f"sssd not up in {timeout} s: {(self.dir / 'sssd.out').read_text()[-3000:]}")

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return self.ns.run(list(argv))

    def pamtester(self, service: str, user: str, *ops: str) -> tuple[subprocess.CompletedProcess[str], str]:
        self.syslog.write_text("")
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LD_PRELOAD": str(self.shim), "GPUCLUSTER_SYSLOG_FILE": str(self.syslog)}
        proc = self.ns.run([PAMTESTER, "-v", service, user, *ops], env=env)
        return proc, self.syslog.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.ns.close()


@pytest.fixture(scope="module")
def slapd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slapd]:
    for tool in (SLAPD, "ldapadd", "ldapsearch", "openssl", SSSD, "sssctl", PAMTESTER, "unshare", "nsenter", "gcc"):
        require_tool(tool)
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("bind mounts in a mount namespace need root")
    s = Slapd(tmp_path_factory.mktemp("slapd"))
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def sssd(slapd: Slapd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SssdNode]:
    _, conf = node_sssd_conf(slapd)
    node = SssdNode(tmp_path_factory.mktemp("sssd"), conf)
    try:
        yield node
    finally:
        node.stop()


def test_the_nodes_sssd_conf_passes_sssctl_and_the_template_holds_no_password(slapd: Slapd, tmp_path: Path):
    template, conf = node_sssd_conf(slapd)
    options = [line.split("=", 1)[0].strip() for line in template.splitlines() if "=" in line and not line.startswith("#")]
    assert "ldap_default_bind_dn" in options and not any(o.startswith("ldap_default_authtok") for o in options)
    check = config_check(conf, tmp_path / "node")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Issues identified by validators: 0" in check.stdout, check.stdout


def test_the_directorys_users_resolve_with_their_directory_uids(sssd: SssdNode):
    for name, uid in USERS.items():
        got = sssd.run("getent", "passwd", name)
        assert got.returncode == 0, (got, (sssd.dir / "sssd.out").read_text()[-2000:])
        fields = got.stdout.strip().split(":")
        assert (fields[0], fields[2], fields[3], fields[5]) == (name, str(uid), str(uid), f"/home/{name}"), fields
    ident = sssd.run("id", "-u", "insider")
    assert ident.stdout.strip() == "20001", ident
    assert (
        subprocess.run(["getent", "passwd", "insider"], capture_output=True, check=False).returncode == 2
    )  # the host's NSS: unknown


def test_the_access_filter_admits_the_groups_member_and_refuses_the_other(sssd: SssdNode):
    insider, log = sssd.pamtester("sshd", "insider", "acct_mgmt")
    assert insider.returncode == 0 and "account management done" in insider.stdout, (insider, log)
    outsider, log = sssd.pamtester("sshd", "outsider", "acct_mgmt")
    assert outsider.returncode == 1 and "Permission denied" in outsider.stderr, outsider
    assert "pam_sss(sshd:account): Access denied for user outsider" in log, log
