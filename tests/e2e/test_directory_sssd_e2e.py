"""A directory's people on a node (docs/people.md, "What a directory needs"): a real ``slapd`` (``ldap.py``: ldaps with a test CA made by
openssl, the memberof overlay) and a real ``sssd`` with the rendered configuration, in a private mount namespace
(``namespace.py``: a copy of ``/etc`` and temp ``/var/lib/sss``, ``/var/log/sssd``, ``/run`` bound there; the host's
are untouched).

The chain a node runs: the cluster config (``slurm.identity.directory`` pointing at the test slapd: rfc2307, ldaps,
its CA, the read-only bind DN, a Secrets Manager ARN, the access filter ``(memberOf=cn=hpc-users,…)``) loaded,
checked and resolved; the rendered template ``/etc/gpucluster/sssd.conf.in`` (no password) and CA
``/etc/gpucluster/directory-ca.pem`` (``render/slurm/sssd.py``); the node's own ``gpucluster-identity sssd-conf``
(``gpucluster_agents/boot/identity.py``, run as the node runs it) reading the password from a moto Secrets Manager and
writing ``/etc/sssd/sssd.conf`` 0600; ``sssctl config-check``; ``sssd -i``; the rendered login sshd PAM stack.

- ``getent passwd`` and ``id`` give the directory's uid 20001 for ``insider`` (sssd read the directory over ldaps,
  trusting the test CA only, bound as the read-only account);
- sshd's account phase (``pamtester sshd <user> acct_mgmt``): ``insider`` (member of ``cn=hpc-users``: the real
  ``memberOf`` attribute of slapd's memberof overlay, as AD has) is admitted, ``outsider`` is refused with PAM's
  "Permission denied" and pam_sss's own log line;
- the template holds no ``ldap_default_authtok``; the node's file has it in the domain section.

Active Directory's id mapping (``ldap_id_mapping = true``: uids derived from SIDs) cannot be exercised with slapd
(no ``objectSid``); the rendered AD configuration (the config tests' ``identity_directory_config``) is checked by
``sssctl config-check`` only, with the password added by the helper's own function.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from gpucluster.render.slurm.pam import login_pam_sshd
from gpucluster.render.slurm.sssd import DIRECTORY_CA, SSSD_CONF, SSSD_TEMPLATE, sssd_conf
from gpucluster.resolve.slurm.identity import DirectoryIdentity, ResolvedIdentity
from gpucluster_agents.boot.identity import with_authtok
from tests.agents.moto_env import AWS_ENV, REGION
from tests.conftest import IN_CI, identity_config, identity_directory_config, require_tool
from tests.e2e.ldap import ACCESS_GROUP, BASE, BIND_DN, SLAPD, USERS, Slapd
from tests.e2e.namespace import MountNamespace
from tests.e2e.people import PAMTESTER, build_syslog_shim

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("people-slapd")]

SSSD = "/usr/sbin/sssd"
SSS_DIRS = ("db", "pipes/private", "mc", "pubconf", "gpo_cache", "secrets", "deskprofile")
HELPER = Path(__file__).resolve().parents[2] / "gpucluster_agents" / "boot" / "identity.py"
CLUSTER = "people"


def load_identity(config: dict) -> ResolvedIdentity:  # type: ignore[type-arg]
    from gpucluster.load import load_spec

    slurm = load_spec(config, stack="people-directory").cluster.slurm
    assert slurm is not None and slurm.identity is not None and isinstance(slurm.identity.source, DirectoryIdentity)
    return slurm.identity


def slapd_identity(slapd: Slapd, secret_arn: str) -> ResolvedIdentity:
    """The cluster config's directory pointing at the test slapd, loaded, checked and resolved."""
    return load_identity(
        identity_config(
            {
                "directory": {
                    "uris": [slapd.uri], "schema": "rfc2307", "searchBase": BASE, "bindDn": BIND_DN,
                    "bindPasswordSecret": secret_arn, "caCertificate": slapd.ca.read_text(),
                    "accessFilter": f"(memberOf={ACCESS_GROUP})",
                }
            }
        )
    )  # fmt: skip


def options(text: str) -> list[str]:
    return [line.split("=", 1)[0].strip() for line in text.splitlines() if "=" in line and not line.startswith("#")]


def config_check(conf_text: str, d: Path) -> subprocess.CompletedProcess[str]:
    d.mkdir()
    (d / "conf.d").mkdir()
    conf = d / "sssd.conf"
    conf.write_text(conf_text)
    conf.chmod(0o600)
    return subprocess.run(["sssctl", "config-check", "-c", str(conf)], capture_output=True, text=True, check=False)


class SssdNode:
    """A node's /etc (a copy, with the rendered files), the boot helper's sssd.conf, and ``sssd -i``, in a namespace
    of its own."""

    def __init__(self, d: Path, identity: ResolvedIdentity, moto_url: str) -> None:
        self.dir = d
        directory = identity.source
        assert isinstance(directory, DirectoryIdentity)
        self.etc = d / "etc"
        subprocess.run(["cp", "-a", "/etc", str(self.etc)], check=True)
        (self.etc / "gpucluster").mkdir(exist_ok=True)
        template = self.etc / SSSD_TEMPLATE.removeprefix("/etc/")
        template.write_text(sssd_conf(CLUSTER, directory))
        template.chmod(0o600)
        (self.etc / DIRECTORY_CA.removeprefix("/etc/")).write_text(directory.ca_certificate_pem)
        shutil.rmtree(self.etc / "sssd", ignore_errors=True)
        (self.etc / "sssd" / "conf.d").mkdir(parents=True)
        (self.etc / "sssd").chmod(0o700)
        (self.etc / "nsswitch.conf").write_text("passwd: files sss\ngroup: files sss\nshadow: files\nhosts: files dns\n")
        (self.etc / "pam.d" / "sshd").write_text(login_pam_sshd(CLUSTER, identity))
        lib = d / "var-lib-sss"
        for sub in SSS_DIRS:
            (lib / sub).mkdir(parents=True)
        (d / "log").mkdir()
        (d / "run").mkdir()
        self.shim = build_syslog_shim(d)
        self.syslog = d / "syslog"
        self.ns = MountNamespace({Path("/etc"): self.etc, Path("/var/lib/sss"): lib, Path("/var/log/sssd"): d / "log",
                                  Path("/run"): d / "run"})  # fmt: skip
        self.helper = self.ns.run(
            [sys.executable, "-I", str(HELPER), "sssd-conf", "--secret-arn", directory.bind_password_secret_arn,
             "--region", REGION],
            env={**AWS_ENV, "GPUCLUSTER_SM_ENDPOINT": moto_url, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        started = time.monotonic()
        with open(self.dir / "sssd.out", "ab") as out:
            self.proc = subprocess.Popen(
                self.ns.argv(SSSD, "-i", "-d", "3", "--logger=stderr"),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        pipes = self.dir / "var-lib-sss" / "pipes"
        deadline = time.monotonic() + 30
        while not ((pipes / "nss").exists() and (pipes / "pam").exists()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sssd not up: {(self.dir / 'sssd.out').read_text()[-3000:]}")
            time.sleep(0.1)
        self.start_seconds = time.monotonic() - started

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return self.ns.run(list(argv))

    def pamtester(self, service: str, user: str, *ops: str) -> tuple[subprocess.CompletedProcess[str], str]:
        self.syslog.write_text("")
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LD_PRELOAD": str(self.shim), "GPUCLUSTER_SYSLOG_FILE": str(self.syslog)}
        proc = self.ns.run([PAMTESTER, "-v", service, user, *ops], env=env)
        return proc, self.syslog.read_text()

    def stop(self) -> None:
        self.ns.kill_members()  # sssd and its providers/responders, by pid
        if self.proc is not None:
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
def sssd(slapd: Slapd, moto_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SssdNode]:  # type: ignore[no-untyped-def]
    sm = boto3.client("secretsmanager", region_name=REGION, endpoint_url=moto_server.url,
                      aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    arn = sm.create_secret(Name=f"gpucluster/people-bind-{os.getpid()}", SecretString=slapd.bind_password)["ARN"]
    node = SssdNode(tmp_path_factory.mktemp("sssd"), slapd_identity(slapd, arn), moto_server.url)
    try:
        assert node.helper.returncode == 0, node.helper.stdout + node.helper.stderr
        node.start()
        yield node
    finally:
        node.stop()


def test_the_node_gets_its_sssd_conf_from_the_template_and_the_secret_and_sssctl_accepts_it(sssd: SssdNode, slapd: Slapd):
    template = (sssd.etc / SSSD_TEMPLATE.removeprefix("/etc/")).read_text()
    assert "ldap_default_bind_dn" in options(template) and not any(
        o.startswith("ldap_default_authtok") for o in options(template)
    )
    conf = sssd.etc / SSSD_CONF.removeprefix("/etc/")
    assert conf.stat().st_mode & 0o777 == 0o600 and conf.stat().st_uid == 0
    assert f"ldap_default_authtok = {slapd.bind_password}" in conf.read_text().split("[domain/directory]")[1]
    assert slapd.bind_password not in sssd.helper.stdout + sssd.helper.stderr  # never logged
    check = sssd.run("sssctl", "config-check")  # the node's own /etc/sssd/sssd.conf
    assert check.returncode == 0 and "Issues identified by validators: 0" in check.stdout, check.stdout + check.stderr


def test_the_rendered_active_directory_configuration_passes_sssctl(tmp_path: Path):
    identity = load_identity(identity_directory_config())
    assert isinstance(identity.source, DirectoryIdentity) and identity.source.id_mapping
    conf = with_authtok(sssd_conf(CLUSTER, identity.source), "not-a-real-password")
    check = config_check(conf, tmp_path / "ad")
    assert check.returncode == 0 and "Issues identified by validators: 0" in check.stdout, check.stdout + check.stderr


def test_the_directorys_users_resolve_with_their_directory_uids(sssd: SssdNode):
    for name, uid in USERS.items():
        got = sssd.run("getent", "passwd", name)
        assert got.returncode == 0, (got, (sssd.dir / "sssd.out").read_text()[-2000:])
        fields = got.stdout.strip().split(":")
        assert (fields[0], fields[2], fields[3], fields[5]) == (name, str(uid), str(uid), f"/home/{name}"), fields
    ident = sssd.run("id", "-u", "insider")
    assert ident.stdout.strip() == "20001", ident
    assert subprocess.run(["getent", "passwd", "insider"], capture_output=True, check=False).returncode == 2  # not the host's


def test_l2_directory_ids_in_the_system_range_are_not_resolved(sssd: SssdNode):
    """``min_id``/``max_id``: the directory's user with slurm's uid and its group with disk's gid do not resolve, while
    a normal user does, and the normal user's groups leave out the gid 6 group (names only: an id could be the
    namespace's own /etc entry)."""
    assert sssd.run("getent", "passwd", "insider").returncode == 0
    for query in (("passwd", "squatter"), ("group", "rawdisk")):
        got = sssd.run("getent", *query)
        assert got.returncode == 2 and got.stdout == "", (query, got)
    groups = sssd.run("id", "-G", "insider")
    assert groups.returncode == 0 and "20001" in groups.stdout.split() and "6" not in groups.stdout.split(), groups


def test_the_access_filter_admits_the_groups_member_and_refuses_the_other(sssd: SssdNode):
    insider, log = sssd.pamtester("sshd", "insider", "acct_mgmt")
    assert insider.returncode == 0 and "account management done" in insider.stdout, (insider, log)
    outsider, log = sssd.pamtester("sshd", "outsider", "acct_mgmt")
    assert outsider.returncode == 1 and "Permission denied" in outsider.stderr, outsider
    assert "pam_sss(sshd:account): Access denied for user outsider" in log, log
