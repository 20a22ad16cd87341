"""End to end: the head node's guard, as the slurm-p5 head node applies it (the script from its rendered files), in a
network namespace made here (``guard_netns.py``'s, with ``test_imds_guard_e2e.py``'s fake IMDS off the node, on IPv4 and IPv6).

The users are the head node's, from fixture files, never this machine's: the guard runs in a mount namespace of its
own where ``/etc/passwd`` and ``/etc/group`` are files of this test, which holds ``slurm``, ``prometheus`` and a
researcher, and the signer's system user as the real ``systemd-sysusers`` makes it from the rendered sysusers.d
file. Every client below is a process with only that uid and gid (``setpriv``), run in the node's namespace.

- M1: with the rules loaded, stand-ins for Prometheus's API, the signer and the exporter of each team's figures listen
  on 127.0.0.1 and ::1, ports 9090, 9091 and 9402: Prometheus's uid (their one client) and root reach all three; a
  researcher's uid, the signer's own and the head exporter's are reset at once (curl exit 7) and the stand-ins log no
  request of theirs. The team exporter's socket, as rendered, listens on 127.0.0.1:9402 and nowhere else.
- M2: the signer's uid and slurm reach the (fake) IMDS; Prometheus's uid (Prometheus and Debian's node exporter),
  the head exporter's (a systemd dynamic user) and a researcher's do not, and IMDS logs no request of theirs.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.render.slurm.collector import COLLECTOR_LISTEN, SIGNER_LISTEN
from gpucluster.render.slurm.guard import IMDS_GUARD, SIGNER_USER, SIGNERS_SYSUSERS
from gpucluster.render.slurm.team_metrics import TEAM_METRICS_LISTEN, TEAM_METRICS_SOCKET
from gpucluster.tools.plan.run.engine import run_plan
from tests.conftest import require_tool
from tests.e2e.guard_netns import Namespace
from tests.e2e.slurm_harness import MARKER_KEY
from tests.e2e.test_imds_guard_e2e import HERE, IMDS, ROLE, SECRET, SYSTEM_PYTHON

pytestmark = pytest.mark.slow

HEAD = "slurm-p5-slurm-head-files"
PORTS = tuple(int(listen.rsplit(":", 1)[1]) for listen in (COLLECTOR_LISTEN, SIGNER_LISTEN, TEAM_METRICS_LISTEN))
TEAM_SOCKET = f"/etc/systemd/system/{TEAM_METRICS_SOCKET}"
UIDS = {"slurm": 64030, "prometheus": 64031, "researcher": 2001}
EXPORTER_UID = 61200
"""A uid of systemd's dynamic-user range (61184-65519): the head node's exporter runs as one (DynamicUser=yes)."""
LOOPBACK = ("127.0.0.1", "[::1]")
STAND_INS = """
import http.server, socket, sys, threading
log = sys.argv[1]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as fh:
            fh.write(f"{self.server.server_address[1]} {self.path}\\n")
        body = f"ok {self.server.server_address[1]}".encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
class V6(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
servers = [cls((host, port), Handler) for port in (%s,) for cls, host in ((http.server.ThreadingHTTPServer, "127.0.0.1"), (V6, "::1"))]
for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""


@functools.cache
def head_files() -> dict[str, str]:
    files = run_plan("slurm-p5").files
    return {path.removeprefix(HEAD): text for path, text in files.items() if path.startswith(HEAD + "/")}


def user_files(run_dir: Path, sysusers: str) -> tuple[Path, int]:
    """``etc/passwd`` and ``etc/group`` of the head node's users under ``run_dir``; the signer's uid."""
    root = run_dir / "root"
    (root / "etc").mkdir(parents=True)
    passwd = ["root:x:0:0:root:/root:/bin/sh"] + [f"{u}:x:{i}:{i}::/nonexistent:/usr/sbin/nologin" for u, i in UIDS.items()]
    (root / "etc" / "passwd").write_text("\n".join(passwd) + "\n")
    (root / "etc" / "group").write_text("\n".join(["root:x:0:"] + [f"{u}:x:{i}:" for u, i in UIDS.items()]) + "\n")
    conf = run_dir / Path(SIGNERS_SYSUSERS).name
    conf.write_text(sysusers)
    made = subprocess.run(
        [require_tool("systemd-sysusers"), f"--root={root}", str(conf)], capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr
    line = next(x for x in (root / "etc" / "passwd").read_text().splitlines() if x.startswith(f"{SIGNER_USER}:"))
    fields = line.split(":")
    assert fields[5:] == ["/nonexistent", "/usr/sbin/nologin"], line  # no home, no shell
    assert int(fields[2]) < 1000 and int(fields[2]) not in (0, *UIDS.values()), line  # a system uid of its own
    return root, int(fields[2])


def apply_head_guard(ns: Namespace, script: str, root: Path, run_dir: Path) -> subprocess.CompletedProcess[str]:
    """The head node's guard in the namespace, its user names read from ``root``'s files."""
    path = run_dir / "guard.sh"
    path.write_text(script)
    binds = " && ".join(f"mount --bind {root}/etc/{name} /etc/{name}" for name in ("passwd", "group"))
    command = f'{binds} && exec sh "{path}"'
    return ns.run(require_tool("unshare"), "--mount", "--propagation", "private", "sh", "-c", command, check=False)


def curl_as(ns: Namespace, uid: int, url: str, *headers: str, method: str = "GET") -> subprocess.CompletedProcess[str]:
    setpriv = ("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups")
    head = [arg for h in headers for arg in ("-H", h)]
    return ns.run(*setpriv, "curl", "-fsS", "-m", "10", "-X", method, *head, url, check=False)


def imds_token(ns: Namespace, uid: int, base: str) -> subprocess.CompletedProcess[str]:
    return curl_as(ns, uid, f"{base}/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds: 60", method="PUT")


def start(ns: Namespace, argv: list[str], run_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, MARKER_KEY: ns.marker}
    proc = subprocess.Popen(
        ns.cmd(*argv), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", argv
    return proc


@pytest.fixture
def head_node(netns: Namespace, run_dir: Path) -> Iterator[tuple[Namespace, int, Path, Path]]:
    """The node namespace with IMDS and the loopback stand-ins running, the guard not yet applied: (namespace, the
    signer's uid, IMDS's request log, the stand-ins' request log)."""
    for tool in ("iptables", "ip6tables", "curl", "setpriv", "unshare"):
        require_tool(tool)
    files = head_files()
    _, signer_uid = user_files(run_dir, files[SIGNERS_SYSUSERS])
    imds_log, local_log = run_dir / "imds.log", run_dir / "local.log"
    imds_log.touch()
    local_log.touch()
    assert netns.imds is not None
    start(netns.imds, [SYSTEM_PYTHON, str(HERE / "fake_imds.py"), str(imds_log), ROLE, SECRET], run_dir)
    start(netns, [sys.executable, "-c", STAND_INS % ", ".join(map(str, PORTS)), str(local_log)], run_dir)
    yield netns, signer_uid, imds_log, local_log
    # processes and namespaces: the netns fixture's teardown (the marker)


def guarded(head_node: tuple[Namespace, int, Path, Path], run_dir: Path) -> str:
    """Check that every user reaches IMDS and the loopback ports before the guard (so the checks after it can fail),
    apply the head node's guard twice (every boot: the same rules, once) and return its rules."""
    ns, signer_uid, _, _ = head_node
    for uid in (UIDS["researcher"], UIDS["prometheus"], EXPORTER_UID, signer_uid):
        assert imds_token(ns, uid, IMDS[0]).stdout == "fake-imds-token"
        assert curl_as(ns, uid, f"http://{LOOPBACK[0]}:{PORTS[1]}/before").stdout == f"ok {PORTS[1]}"
    script, root = head_files()[IMDS_GUARD], run_dir / "root"
    applied = apply_head_guard(ns, script, root, run_dir)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    rules = ns.rules()
    again = apply_head_guard(ns, script, root, run_dir)
    assert again.returncode == 0 and ns.rules() == rules, again.stderr
    return rules


def test_m1_loopback_ports_take_root_and_prometheus_only(head_node, run_dir) -> None:
    """Prometheus's API (9090), the signer (9091) and each team's figures (9402), on 127.0.0.1 and ::1: root and
    Prometheus's uid (their one client) connect; a researcher, the signer's own uid and the head exporter's are reset,
    and the services see none of their requests."""
    ns, signer_uid, _, local_log = head_node
    team_socket = head_files()[TEAM_SOCKET]  # the rendered listener: loopback, never given the private address
    assert [ln for ln in team_socket.splitlines() if ln.startswith("ListenStream=")] == [f"ListenStream={TEAM_METRICS_LISTEN}"]
    assert not [t for t in head_files().values() if f"--socket {TEAM_METRICS_SOCKET}" in t]
    rules = guarded(head_node, run_dir)
    dports = ",".join(map(str, PORTS))
    assert rules.count(f"-A OUTPUT -o lo -p tcp -m multiport --dports {dports} -j GPUCLUSTER-LOOPBACK") == 2
    before = local_log.read_text()
    for host in LOOPBACK:
        for port in PORTS:
            url = f"http://{host}:{port}/m1"
            for uid in (0, UIDS["prometheus"]):
                got = curl_as(ns, uid, url)
                assert (got.returncode, got.stdout) == (0, f"ok {port}"), (uid, url, got.stderr)
            for uid in (UIDS["researcher"], signer_uid, EXPORTER_UID):
                got = curl_as(ns, uid, url)
                assert got.returncode == 7, (uid, url, got.returncode, got.stderr)  # reset at once, not timed out
    served = local_log.read_text()[len(before) :].splitlines()
    assert len(served) == len(LOOPBACK) * len(PORTS) * 2, served  # root's and prometheus's requests only


def test_m2_imds_takes_root_slurm_and_the_signer_only(head_node, run_dir) -> None:
    """IMDS over IPv4 and IPv6: root, slurm and the signer's sysusers uid get a token; Prometheus's uid (Prometheus,
    the node exporter), the head exporter's dynamic uid and a researcher's are reset, and IMDS sees none of theirs."""
    ns, signer_uid, imds_log, _ = head_node
    rules = guarded(head_node, run_dir)
    # by number: the owner rules resolved the fixture's names, the signer's to its sysusers uid
    owners = {line.split("--uid-owner ")[1].split()[0] for line in rules.splitlines() if "GPUCLUSTER-IMDS -m owner" in line}
    assert owners == {"0", str(UIDS["slurm"]), str(signer_uid)}, rules
    before = imds_log.read_text()
    for base in IMDS:
        for uid in (0, UIDS["slurm"], signer_uid):
            got = imds_token(ns, uid, base)
            assert (got.returncode, got.stdout) == (0, "fake-imds-token"), (uid, base, got.stderr)
        for uid in (UIDS["prometheus"], EXPORTER_UID, UIDS["researcher"]):
            got = imds_token(ns, uid, base)
            assert got.returncode == 7, (uid, base, got.returncode, got.stderr)
    assert imds_log.read_text()[len(before) :].count("PUT /latest/api/token") == len(IMDS) * 3  # the admitted three only


def test_m2_head_guard_fails_closed_without_the_signers_user(head_node, run_dir) -> None:
    """A head node where the signer's user was never made: the guard fails (so do the units ordered after it) and
    leaves no rule that would let anyone else through."""
    ns, *_ = head_node
    root = run_dir / "root"
    passwd = root / "etc" / "passwd"
    passwd.write_text("".join(line + "\n" for line in passwd.read_text().splitlines() if not line.startswith(SIGNER_USER)))
    failed = apply_head_guard(ns, head_files()[IMDS_GUARD], root, run_dir)
    assert failed.returncode != 0
    assert "GPUCLUSTER-IMDS" not in ns.rules() and "GPUCLUSTER-LOOPBACK" not in ns.rules()
