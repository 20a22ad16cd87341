"""A real directory for the people tests: OpenLDAP's ``slapd`` in a temp dir, on 127.0.0.1 with an OS-given port.

:class:`Slapd` makes a test CA and a server certificate with ``openssl`` (SAN ``localhost`` and the loopback address's names), writes a ``slapd.conf``
(``mdb`` database, the ``memberof`` overlay, the core/cosine/nis/inetorgperson schemas), starts ``slapd -d 0`` in the
foreground on ``ldaps://localhost:<port>`` and ``ldapi://<its own socket>``, then adds the entries with ``ldapadd``
over ldapi as the database's root — not ``slapadd``: overlays do not run offline, and the ``memberof`` overlay is what
gives a user the ``memberOf`` attribute an access filter reads (as Active Directory does). It is ended by its pid.

The directory (:data:`BASE`): ``ou=People`` with ``insider`` (uidNumber 20001, a member of ``cn=hpc-users``, the
access group) and ``outsider`` (20002, not), and :data:`SYSTEM_IDS`' ``squatter`` (slurm's uid 64030); ``ou=Groups`` with the access group (``groupOfNames``, members by DN:
the memberof overlay's input), one POSIX group per user (``posixGroup``, RFC 2307 ``memberUid``) and ``rawdisk`` (disk's
gid 6, ``insider`` a member); a read-only
service account :data:`BIND_DN` whose password is :attr:`Slapd.bind_password`, and an ACL letting it (and nobody
anonymous) read.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.e2e.slurm_harness import free_port

SLAPD = "/usr/sbin/slapd"
BASE = "dc=example,dc=com"
BIND_DN = f"cn=gpucluster-ro,ou=Service,{BASE}"
ACCESS_GROUP = f"cn=hpc-users,ou=Groups,{BASE}"
ROOT_DN = f"cn=admin,{BASE}"
USERS = {"insider": 20001, "outsider": 20002}
SYSTEM_IDS = {"squatter": 64030, "rawdisk": 6}
"""Directory entries that claim a system account's id: a user with slurm's uid and a group with disk's gid (a
delegated directory admin could write either); SSSD must not resolve them (``min_id``/``max_id``)."""
SCHEMAS = ("core", "cosine", "nis", "inetorgperson")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def loopback_names() -> list[str]:
    """``localhost`` and the names 127.0.0.1 has here: libldap checks the certificate against the name it finds for
    the address it reached, which may be this machine's hostname (measured: "hostname (vm) does not match common name
    in certificate (localhost)")."""
    names = ["localhost", socket.gethostname()]
    try:
        name, aliases, _ = socket.gethostbyaddr("127.0.0.1")
        names += [name, *aliases]
    except OSError:
        pass
    return list(dict.fromkeys(names))


def make_ca_and_server_cert(d: Path) -> tuple[Path, Path, Path]:
    """A test CA (``ca.pem``) and a server key/certificate it signed for ``localhost``: (ca, cert, key)."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gpucluster test CA",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
             "-out", "server.csr", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=" + ",".join(f"DNS:{n}" for n in loopback_names()) + ",IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
             "-extfile", "san.ext", "-out", "server.pem", cwd=d)  # fmt: skip
    return d / "ca.pem", d / "server.pem", d / "server.key"


def entries(bind_password: str) -> str:
    """The directory's entries, as LDIF."""
    out = [
        f"dn: {BASE}\nobjectClass: dcObject\nobjectClass: organization\no: example\ndc: example\n",
        *(f"dn: ou={ou},{BASE}\nobjectClass: organizationalUnit\nou: {ou}\n" for ou in ("People", "Groups", "Service")),
        f"dn: {BIND_DN}\nobjectClass: simpleSecurityObject\nobjectClass: organizationalRole\ncn: gpucluster-ro\n"
        f"userPassword: {bind_password}\n",
    ]
    for name, uid in USERS.items():
        out.append(
            f"dn: uid={name},ou=People,{BASE}\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\n"
            f"uid: {name}\ncn: {name}\nsn: {name}\nuidNumber: {uid}\ngidNumber: {uid}\n"
            f"homeDirectory: /home/{name}\nloginShell: /bin/bash\n"
        )
        out.append(f"dn: cn={name},ou=Groups,{BASE}\nobjectClass: posixGroup\ncn: {name}\ngidNumber: {uid}\n")
    squatter = SYSTEM_IDS["squatter"]
    out.append(
        f"dn: uid=squatter,ou=People,{BASE}\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: squatter\n"
        f"cn: squatter\nsn: squatter\nuidNumber: {squatter}\ngidNumber: 20001\nhomeDirectory: /home/squatter\n"
    )
    out.append(f"dn: cn=rawdisk,ou=Groups,{BASE}\nobjectClass: posixGroup\ncn: rawdisk\ngidNumber: {SYSTEM_IDS['rawdisk']}\n"
               "memberUid: insider\n")  # fmt: skip
    out.append(f"dn: {ACCESS_GROUP}\nobjectClass: groupOfNames\ncn: hpc-users\nmember: uid=insider,ou=People,{BASE}\n")
    return "\n".join(out)


def slapd_conf(d: Path, cert: Path, key: Path, ca: Path, root_password: str) -> str:
    includes = "".join(f"include /etc/ldap/schema/{s}.schema\n" for s in SCHEMAS)
    return f"""{includes}pidfile {d}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
TLSCACertificateFile {ca}
TLSCertificateFile {cert}
TLSCertificateKeyFile {key}
database mdb
suffix "{BASE}"
rootdn "{ROOT_DN}"
rootpw {root_password}
directory {d}/db
maxsize 33554432
overlay memberof
memberof-group-oc groupOfNames
memberof-member-ad member
memberof-memberof-ad memberOf
access to attrs=userPassword by self read by anonymous auth by * none
access to * by dn.exact="{BIND_DN}" read by * none
"""


class Slapd:
    """A running slapd in ``d`` (see the module). ``uri``: its ldaps URI; ``ca``: the CA certificate's path."""

    def __init__(self, d: Path) -> None:
        self.dir = d
        (d / "db").mkdir(parents=True)
        self.ca, cert, key = make_ca_and_server_cert(d)
        self.bind_password = secrets.token_urlsafe(18)
        root_password = secrets.token_urlsafe(18)
        (d / "slapd.conf").write_text(slapd_conf(d, cert, key, self.ca, root_password))
        self.port = free_port()
        self.uri = f"ldaps://localhost:{self.port}"
        self.ldapi = "ldapi://" + str(d / "ldapi").replace("/", "%2F")
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [SLAPD, "-d", "0", "-f", str(d / "slapd.conf"), "-h", f"{self.uri} {self.ldapi}"],
            stdin=subprocess.DEVNULL, stdout=open(d / "slapd.log", "ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self._wait_up(root_password)
        self.start_seconds = time.monotonic() - started
        add = subprocess.run(
            ["ldapadd", "-x", "-H", self.ldapi, "-D", ROOT_DN, "-w", root_password],
            input=entries(self.bind_password), capture_output=True, text=True, check=False,
        )  # fmt: skip
        if add.returncode != 0:
            self.stop()
            raise RuntimeError(f"ldapadd: {add.stderr}")

    def _wait_up(self, root_password: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"slapd exited: {(self.dir / 'slapd.log').read_text()[-2000:]}")
            probe = subprocess.run(
                ["ldapwhoami", "-x", "-H", self.ldapi, "-D", ROOT_DN, "-w", root_password],
                capture_output=True, check=False,
            )  # fmt: skip
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"slapd not up in {timeout} s")

    def search(self, *args: str) -> str:
        """``ldapsearch`` over ldaps as the read-only account, trusting the test CA only."""
        proc = subprocess.run(
            ["ldapsearch", "-LLL", "-x", "-H", self.uri, "-D", BIND_DN, "-w", self.bind_password, "-b", BASE, *args],
            env={"LDAPTLS_CACERT": str(self.ca), "LDAPTLS_REQCERT": "demand", "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return proc.stdout

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
