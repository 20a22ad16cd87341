"""The exporter's serve loop under a job's flood (docs/monitoring.md, "Floods and squatters"), each against the shipped code in its own
process (``python -m gpucluster_agents.metrics serve``): 400 clients in a loop do not delay a scrape past 2 s, the
head node's Slurm commands run once per cache interval however many clients ask, the thread count stays at the
cap, a client that sends nothing (or a byte at a time) is dropped at the request deadline, connections past the
cap cost no thread and the scrape still gets through; and the port handed over the way systemd hands it
(``LISTEN_FDS``/``LISTEN_PID``, fd 3) by systemd's own ``systemd-socket-activate``, for this exporter and Debian's
node exporter, and kept by its holder while the exporter is down, so that no other process can bind it.

systemd is not PID 1 here: a ``.socket`` unit holding the port across a restart is played by the test itself
(it holds the socket, as systemd does, and starts the exporter on it twice); the units are read by
systemd-analyze in tests/render/slurm/test_slurm_metrics.py.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster_agents.metrics.server import CACHE_SECONDS, LIMITS
from tests.agents.metrics.nodes import SINFO, SQUEUE, env
from tests.conftest import ROOT, require_tool

SLURM_DELAY = 0.1  # each of the three Slurm commands a head-node collect runs: a slow slurmctld


def slow_slurm(bin_dir: Path) -> Path:
    """sinfo and squeue that take :data:`SLURM_DELAY` and log each call to ``calls`` (squeue: once a collect)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("sinfo", SINFO), ("squeue", SQUEUE)):
        (bin_dir / f"{name}.out").write_text(text)
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nsleep {SLURM_DELAY}\necho {name} >> "{bin_dir}/calls"\nexec cat "{bin_dir}/{name}.out"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def collects(bin_dir: Path) -> int:
    calls = bin_dir / "calls"
    return calls.read_text().split().count("squeue") if calls.exists() else 0


def exporter_cmd(tmp: Path, *listen: str) -> list[str]:
    """The head node's exporter (no GPUs, Slurm's and no agent's figures) over fixture trees."""
    (tmp / "sys").mkdir(exist_ok=True)
    words = [sys.executable, "-m", "gpucluster_agents.metrics", "serve", *listen, "--no-gpus"]
    return [
        *words,
        "--sysfs-root",
        str(tmp / "sys"),
        "--lustre-root",
        str(tmp / "sys"),
        "--slurm-bin-dir",
        str(slow_slurm(tmp / "bin")),
    ]


@contextlib.contextmanager
def running(cmd: list[str], stdin: int | None = None) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=ROOT)
    try:
        yield proc
    finally:
        proc.kill()
        proc.communicate(timeout=30)


@contextlib.contextmanager
def exporter(tmp: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """The exporter on a free port of 127.0.0.1 (read back from its banner)."""
    with running(exporter_cmd(tmp, "--listen", "127.0.0.1", "--port", "0")) as proc:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in banner, banner + (proc.stderr.read() if proc.stderr else "")
        yield proc, int(banner.rsplit(":", 1)[1].split("/")[0])


def scrape(port: int, timeout: float = 10.0) -> tuple[float, str]:
    """(seconds, body) of one GET /metrics."""
    start = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as resp:
        assert resp.status == 200
        body = resp.read().decode()
    return time.monotonic() - start, body


def threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("Threads:")).split()[1])


def flood(port: int, clients: int, seconds: float, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "tests.agents.metrics.flood", "--port", str(port), "--clients", str(clients)]
    cmd += ["--seconds", str(seconds), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env(), cwd=ROOT)


@pytest.mark.slow
def test_m3_400_clients_in_a_loop_delay_a_scrape_by_less_than_2s_and_run_slurm_once_per_interval(tmp_path: Path):
    seconds = 3 * CACHE_SECONDS
    with exporter(tmp_path) as (proc, port):
        flooding = flood(port, 400, seconds)
        time.sleep(1.0)  # the clients connected and looping
        before = collects(tmp_path / "bin")
        started, took, peak = time.monotonic(), [], 0
        while time.monotonic() - started < seconds - 2:
            elapsed, body = scrape(port)
            took.append(elapsed)
            assert 'gpucluster_slurm_jobs{state="PENDING"} 4' in body
            peak = max(peak, threads(proc.pid))
            time.sleep(0.25)
        during = collects(tmp_path / "bin") - before
        window = time.monotonic() - started
        out, _ = flooding.communicate(timeout=60)
    answered = json.loads(out)
    assert answered["ok"] >= 1000, answered  # the flood was one: on the old loop it got a few answers a second
    assert max(took) < 2.0, f"scrapes took up to {max(took):.2f} s under 400 clients: {sorted(took)[-5:]}"
    assert during <= window / CACHE_SECONDS + 1, f"{during} collects in {window:.1f} s (cache {CACHE_SECONDS} s)"
    assert peak <= LIMITS.workers + 2, f"{peak} threads (cap: {LIMITS.workers} workers and the loop)"


@pytest.mark.slow
def test_m3_a_client_that_sends_nothing_or_a_byte_at_a_time_is_dropped_at_the_deadline(tmp_path: Path):
    with exporter(tmp_path) as (_proc, port):
        silent = socket.create_connection(("127.0.0.1", port))
        dribbler = socket.create_connection(("127.0.0.1", port))
        start = time.monotonic()
        silent.settimeout(0.2)
        dribbler.settimeout(0.2)
        dropped: dict[str, float] = {}
        request = iter(b"GET /metrics HTTP/1.1\r\nHost: node\r\n" + b"X-Slow: " + b"a" * 100)
        while len(dropped) < 2 and time.monotonic() - start < 15:
            for name, sock in (("silent", silent), ("dribbler", dribbler)):
                if name in dropped:
                    continue
                try:
                    if sock.recv(4096) == b"":
                        dropped[name] = time.monotonic() - start
                        continue
                except ConnectionResetError:  # closed with a byte of ours unread: a reset, dropped all the same
                    dropped[name] = time.monotonic() - start
                    continue
                except TimeoutError:
                    pass
                if name == "dribbler":
                    with contextlib.suppress(OSError):
                        dribbler.send(bytes([next(request)]))
                        time.sleep(0.3)  # one byte each half second or so
        silent.close()
        dribbler.close()
        assert scrape(port)[0] < 2.0  # the exporter itself is fine
    limit = LIMITS.request_seconds
    assert set(dropped) == {"silent", "dribbler"}, f"still connected after 15 s: {dropped}"
    assert all(limit - 0.5 <= t <= limit + 1.5 for t in dropped.values()), f"dropped after {dropped} (deadline {limit} s)"


@pytest.mark.slow
def test_m3_idle_connections_past_the_cap_hold_no_thread_and_a_scrape_still_gets_through(tmp_path: Path):
    clients = LIMITS.connections + 100
    with exporter(tmp_path) as (proc, port):
        flooding = flood(port, clients, 6.0, "--idle")
        time.sleep(2.0)  # every idle client connected (or queued in the backlog)
        took, body = scrape(port)
        peak = threads(proc.pid)
        flooding.communicate(timeout=60)
    assert "gpucluster_slurm_nodes" in body
    assert took < 2.0, f"a scrape took {took:.2f} s behind {clients} idle connections"
    assert peak <= LIMITS.workers + 2, f"{peak} threads for {clients} idle connections"


def _activate_cmd(port: int, program: list[str]) -> list[str]:
    activate = require_tool("systemd-socket-activate")
    return [activate, "--listen", f"127.0.0.1:{port}", *program]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_scrape(port: int, seconds: float = 20.0) -> str:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return scrape(port, timeout=5)[1]
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_m3_systemd_socket_activation_serves_both_exporters(tmp_path: Path):
    """systemd's own socket handover (systemd-socket-activate binds, then execs the program with LISTEN_FDS=1,
    LISTEN_PID and the socket on fd 3): this exporter serves it with ``--systemd-socket``; Debian's node exporter,
    started through the node's wrapper (``node-exporter --systemd-socket``), serves it too."""
    port = _free_port()
    with running(_activate_cmd(port, exporter_cmd(tmp_path, "--systemd-socket"))) as proc:
        assert 'gpucluster_slurm_jobs{state="RUNNING"} 2' in _wait_scrape(port)
        assert proc.poll() is None
    node_exporter = require_tool("prometheus-node-exporter")
    wrapper = [sys.executable, "-E", "-s", "-m", "gpucluster_agents.metrics", "node-exporter", "--systemd-socket"]
    wrapper += ["--binary", node_exporter, "--", "--collector.disable-defaults", "--collector.loadavg"]
    wrapper += ["--web.listen-address=127.0.0.1:1"]  # a listen address from Debian's $ARGS is dropped
    port = _free_port()
    with running(_activate_cmd(port, wrapper)):
        assert "node_load1 " in _wait_scrape(port)
    with running(exporter_cmd(tmp_path, "--systemd-socket")) as proc:  # no socket passed: a clear error
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2 and "cannot listen on the systemd socket: no socket from systemd" in err


def _job_binds(port: int) -> int:
    """errno of a job's bind of 127.0.0.1:port with every reuse option it may set (0: it got the port)."""
    with socket.socket() as job:
        job.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        job.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            job.bind(("127.0.0.1", port))
            job.listen()
        except OSError as exc:
            return exc.errno or -1
        return 0


def test_m3_the_socket_holder_keeps_the_port_while_the_exporter_restarts(tmp_path: Path):
    """The test holds the listening socket as a ``.socket`` unit does and starts the exporter on it the way systemd
    does (fd 3, LISTEN_FDS=1, LISTEN_PID: the shell's pid, which exec keeps). Killed, the exporter leaves the port
    to its holder: a job cannot bind it, and a scrape sent meanwhile waits in the backlog and is answered by the
    exporter's next start. Without the holder the job gets the port (the check can fail)."""
    holder = socket.create_server(("127.0.0.1", 0))  # SO_REUSEADDR, no SO_REUSEPORT: systemd's default
    port = holder.getsockname()[1]
    handover = ["sh", "-c", 'exec 3<&0 0</dev/null; LISTEN_FDS=1 LISTEN_PID=$$ exec "$@"', "sh"]
    cmd = handover + exporter_cmd(tmp_path, "--systemd-socket")
    try:
        with running(cmd, stdin=holder.fileno()) as first:
            assert "gpucluster_slurm_nodes" in _wait_scrape(port)
            first.kill()
            first.wait(30)
        assert _job_binds(port) == errno.EADDRINUSE
        pending = socket.create_connection(("127.0.0.1", port), timeout=30)  # the kernel queues it for the holder
        pending.sendall(b"GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n")
        with running(cmd, stdin=holder.fileno()):
            answer = b""
            while chunk := pending.recv(65536):
                answer += chunk
        pending.close()
        assert answer.startswith(b"HTTP/1.1 200 ") and b"gpucluster_slurm_nodes" in answer
        assert _job_binds(port) == errno.EADDRINUSE
    finally:
        holder.close()
    assert _job_binds(port) == 0


def test_m3_the_listen_drop_ins_name_the_private_address(tmp_path: Path):
    from gpucluster_agents.metrics import cli

    argv = [str(tmp_path), "--address", "10.0.3.17", "--socket", "gpucluster-metrics.socket=9400"]
    assert cli.main(["listen-drop-ins", *argv, "--socket", "prometheus-node-exporter.socket=9100"]) == 0
    drop_in = tmp_path / "gpucluster-metrics.socket.d" / "address.conf"
    assert drop_in.read_text() == "[Socket]\nListenStream=\nListenStream=10.0.3.17:9400\n"
    node = (tmp_path / "prometheus-node-exporter.socket.d" / "address.conf").read_text()
    assert node.endswith("ListenStream=10.0.3.17:9100\n")
    assert cli.main(["listen-drop-ins", str(tmp_path), "--socket", "../x=1"]) == 2
    assert sorted(os.listdir(tmp_path)) == ["gpucluster-metrics.socket.d", "prometheus-node-exporter.socket.d"]


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_requests_the_loop_refuses_get_a_status_and_the_loop_goes_on(tmp_path: Path):
    """In process: each malformed or unwanted request gets its status (and its connection closed), and the next
    scrape is answered from the same cache."""
    import threading

    from gpucluster_agents.metrics.httploop import MAX_HEAD
    from gpucluster_agents.metrics.server import Exporter, Sources, make_server

    server = make_server(Exporter(Sources(gpus=False, sysfs_root=str(tmp_path), lustre_roots=(str(tmp_path),))), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        cases = {
            b"GET /metrics\r\n\r\n": b"400",
            b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * MAX_HEAD + b"\r\n\r\n": b"431",
            b"POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n": b"411",
            b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello": b"413",  # the exporter takes no body
            "GET /metrics HTTP/1.1\r\nContent-Length: \u00b2\r\n\r\n".encode("latin-1"): b"400",
            b"HEAD /metrics HTTP/1.1\r\n\r\n": b"405",
            b"GET / HTTP/1.1\r\n\r\n": b"404",
        }
        for request, status in cases.items():
            answer = _raw(port, request)
            assert answer.startswith(b"HTTP/1.1 " + status + b" ") and b"Connection: close\r\n" in answer, (
                request[:40],
                answer[:80],
            )
        answer = _raw(port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: n\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"gpucluster_metrics_collector_success" in answer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert not thread.is_alive()
