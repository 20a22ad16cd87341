"""A compute node's metrics units (gpucluster/render/slurm/metrics.py): read by systemd-analyze (the sockets, with the
setup's address drop-ins, too), their command run as written, the node exporter kept on its socket, and the setup
script's order: the sockets bound before slurmd starts."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.render.slurm.metrics import (
    HEAD_SNAPSHOT,
    HEAD_SNAPSHOT_DIR,
    HEAD_SNAPSHOT_UNIT,
    METRICS_SOCKET,
    METRICS_UNIT,
    NODE_EXPORTER_DROP_IN,
    NODE_EXPORTER_SOCKET,
    NODE_EXPORTER_UNIT,
    enable_units,
    head_snapshot_unit,
    metrics_files,
    metrics_unit,
    node_exporter_drop_in,
    socket_unit,
)
from gpucluster.render.slurm.names import NODE_SETUP
from gpucluster_agents.metrics import cli
from tests.conftest import ROOT, require_tool
from tests.render.slurm.test_slurm_health import CPU, P5, context, part_files

UNIT_PATH = f"/etc/systemd/system/{METRICS_UNIT}"


def _exec_start(unit: str) -> list[str]:
    [line] = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=") and ln != "ExecStart="]
    return shlex.split(line.removeprefix("ExecStart="))


def test_gpu_and_cpu_nodes_get_the_units_and_the_setup_enables_them_after_the_package():
    ctx = context(P5, CPU, enabled=False)
    gpu, cpu = part_files(ctx, "p5"), part_files(ctx, "cpu")
    serve = _exec_start(gpu[UNIT_PATH])
    assert serve[serve.index("serve") :] == ["serve", "--systemd-socket"]
    assert _exec_start(cpu[UNIT_PATH])[-1] == "--no-gpus"  # no NVML on a CPU node: EFA and Lustre only
    assert "0.0.0.0" not in gpu[UNIT_PATH] + gpu[NODE_EXPORTER_DROP_IN]
    setup = gpu[NODE_SETUP]
    assert "prometheus-node-exporter" in setup.split("install -y")[1].splitlines()[0]
    order = [
        "install-agent",
        "listen-drop-ins /etc/systemd/system --socket gpucluster-metrics.socket=9400",
        f"systemctl stop {METRICS_UNIT} prometheus-node-exporter.service {METRICS_SOCKET} {NODE_EXPORTER_SOCKET}",
        f"systemctl enable --now {METRICS_SOCKET} {NODE_EXPORTER_SOCKET}",
        f"systemctl enable --now {METRICS_UNIT} prometheus-node-exporter.service",
        "systemctl enable --now slurmd",
    ]
    assert [setup.index(line) for line in order] == sorted(setup.index(line) for line in order)
    off = part_files(ctx, "p5", metrics=False)
    assert UNIT_PATH not in off and "prometheus-node-exporter" not in off[NODE_SETUP]


def test_m3_each_exporters_port_is_held_by_a_socket_unit_before_slurmd_and_it_restarts_at_once():
    """The port is systemd's (a .socket unit, bound at sockets.target: before slurmd and any job), never free while
    an exporter restarts; both exporters serve that socket and come back after a second, whatever ended them."""
    files = part_files(context(P5, CPU, enabled=False), "p5")
    for sock, port in ((METRICS_SOCKET, 9400), (NODE_EXPORTER_SOCKET, 9100)):
        unit = files[f"/etc/systemd/system/{sock}"]
        assert f"ListenStream=127.0.0.1:{port}\n" in unit and "FreeBind=yes\n" in unit
        assert "Before=slurmd.service\n" in unit and "WantedBy=sockets.target\n" in unit and "ReusePort" not in unit
    for service, sock in ((files[UNIT_PATH], METRICS_SOCKET), (files[NODE_EXPORTER_DROP_IN], NODE_EXPORTER_SOCKET)):
        assert f"Requires={sock}\n" in service and f"After={sock}" in service
        assert "Restart=always\nRestartSec=1\n" in service
    assert "--systemd-socket" in _exec_start(files[NODE_EXPORTER_DROP_IN])


def test_m2_head_exporter_runs_as_a_dynamic_user_and_only_its_reader_as_slurm():
    """The head node's exporter listens where every job reaches it: it runs as a systemd dynamic user (no IMDS: the
    guard admits root, slurm and the signer; none of SlurmUser's rights in Slurm) and serves the snapshot that
    ``gpucluster-head-snapshot.service`` writes as slurm, which listens on nothing."""
    unit = metrics_unit(False, head="/data/agent")
    serve = _exec_start(unit)
    assert serve[serve.index("--no-gpus") :] == ["--no-gpus", "--head-snapshot", HEAD_SNAPSHOT]
    assert "DynamicUser=yes" in unit.splitlines() and not [x for x in unit.splitlines() if x.startswith(("User=", "Group="))]
    assert "User=" not in metrics_unit(True) and "DynamicUser" not in metrics_unit(True)  # compute: root (NVML, kmsg)
    reader = head_snapshot_unit("/data/agent")
    assert ["User=slurm", "Group=slurm"] == [x for x in reader.splitlines() if x.startswith(("User=", "Group="))]
    words = _exec_start(reader)
    assert words[words.index("head-snapshot") :] == [
        *("head-snapshot", "--slurm-bin-dir", "/usr/bin", "--agent-state", "/data/agent", "--out", HEAD_SNAPSHOT)
    ]
    assert f"RuntimeDirectory={HEAD_SNAPSHOT_DIR.removeprefix('/run/')}" in reader.splitlines()
    assert HEAD_SNAPSHOT.startswith(HEAD_SNAPSHOT_DIR + "/")
    files = {f.path: f.text() for f in metrics_files(None, head="/data/agent")}
    assert files[f"/etc/systemd/system/{HEAD_SNAPSHOT_UNIT}"] == reader
    lines = enable_units(head=True).splitlines()  # the snapshot before the exporters that serve it, after the sockets
    assert lines[-2:] == [
        f"systemctl enable --now {HEAD_SNAPSHOT_UNIT}",
        f"systemctl enable --now {METRICS_UNIT} {NODE_EXPORTER_UNIT}",
    ]


def test_m2_systemd_reads_the_head_snapshot_unit(tmp_path: Path):
    analyze = require_tool("systemd-analyze")
    unit = tmp_path / HEAD_SNAPSHOT_UNIT
    unit.write_text(head_snapshot_unit("/data/agent", agent_lib=str(tmp_path), python=sys.executable))
    verify = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, check=False)
    errors = [e for e in verify.stderr.splitlines() if e and "slurmctld.service" not in e]
    assert errors == [], verify.stderr


def _verify(analyze: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([analyze, "verify", "--man=no", str(path)], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("head", [None, "/data/agent"])
def test_systemd_reads_the_units_the_sockets_and_the_drop_ins(tmp_path: Path, head: str | None):
    analyze = require_tool("systemd-analyze")
    unit = tmp_path / METRICS_UNIT
    unit.write_text(metrics_unit(True, agent_lib=str(tmp_path), python=sys.executable, head=head))
    service = tmp_path / "prometheus-node-exporter.service"  # Debian's unit with our drop-in's lines in place
    debian = "[Unit]\nDescription=x\n[Service]\nUser=daemon\nExecStart=/bin/true $ARGS\n"
    drop_in = node_exporter_drop_in(agent_lib=str(tmp_path), python=sys.executable, head=head is not None)
    unit_lines, service_lines = drop_in.removeprefix("[Unit]\n").split("\n[Service]\n", 1)
    service.write_text(
        debian.replace("[Service]\n", unit_lines + "[Service]\n").replace("ExecStart=/bin/true $ARGS\n", service_lines)
    )
    sockets = [tmp_path / METRICS_SOCKET, tmp_path / NODE_EXPORTER_SOCKET]
    for path, port in zip(sockets, (9400, 9100), strict=True):
        path.write_text(socket_unit("x", port))
    # the setup's drop-ins with a private address, as systemd reads them beside the units
    assert cli.main(["listen-drop-ins", str(tmp_path), "--address", "10.0.3.17", "--socket", f"{METRICS_SOCKET}=9400"]) == 0
    for path in (unit, service, *sockets):
        verify = _verify(analyze, path)
        assert (verify.returncode, verify.stderr) == (0, ""), verify.stderr
    unit.write_text(unit.read_text().replace("ProtectSystem=", "ProtectSytem="))  # the check can fail
    assert "Unknown key" in _verify(analyze, unit).stderr
    address = tmp_path / f"{METRICS_SOCKET}.d" / "address.conf"
    address.write_text(address.read_text().replace("ListenStream=10", "ListenStrem=10"))  # the drop-in is read
    assert "Unknown key" in _verify(analyze, sockets[0]).stderr


def test_the_units_command_runs_the_package_from_its_directory(tmp_path: Path):
    """The unit's interpreter words, run from a package directory as systemd would: the exporter answers."""
    words = _exec_start(metrics_unit(True, python=sys.executable))
    cmd = [*words[: words.index("gpucluster_agents.metrics") + 1], "print", "--no-gpus", "--sysfs-root", str(tmp_path)]
    cmd += ["--lustre-root", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert 'gpucluster_metrics_collector_success{collector="efa"} 1' in proc.stdout


def test_node_exporter_runs_on_its_socket_or_the_given_address_with_debians_args(monkeypatch: pytest.MonkeyPatch):
    calls: list[tuple[str, list[str]]] = []

    def execv(path: str, argv: list[str]) -> None:
        calls.append((path, argv))

    monkeypatch.setattr(cli.os, "execv", execv)
    monkeypatch.setattr(cli, "private_address", lambda: "10.0.3.17")
    words = _exec_start(node_exporter_drop_in())
    args = words[words.index("node-exporter") :]
    assert args[:3] == ["node-exporter", "--systemd-socket", "--"] and args[-1] == "$ARGS"
    debian = ["--collector.systemd", "--web.listen-address=:9100", "--web.systemd-socket"]
    cli.main(["node-exporter", "--systemd-socket", "--", *debian])
    cli.main(["node-exporter", "--port", "9100", "--", *debian])
    flags = [*cli.NODE_EXPORTER_FLAGS, "--collector.systemd"]
    assert calls == [
        (cli.NODE_EXPORTER, [cli.NODE_EXPORTER, "--web.systemd-socket", *flags]),
        (cli.NODE_EXPORTER, [cli.NODE_EXPORTER, "--web.listen-address=10.0.3.17:9100", *flags]),
    ]


def test_the_setup_writes_the_sockets_address_from_the_package_directory():
    lines = enable_units(agent_lib="/opt/gpucluster/lib").splitlines()
    words = shlex.split(lines[0].removeprefix("(").removesuffix(")"))
    assert words[:3] == ["cd", "/opt/gpucluster/lib", "&&"]
    assert words[words.index("listen-drop-ins") :] == [
        "listen-drop-ins",
        "/etc/systemd/system",
        "--socket",
        f"{METRICS_SOCKET}=9400",
        "--socket",
        f"{NODE_EXPORTER_SOCKET}=9100",
    ]
    assert lines[1] == "systemctl daemon-reload"


def test_each_nodes_node_exporter_reads_its_slurm_daemons_units_only(monkeypatch: pytest.MonkeyPatch):
    """The head node's drop-in (as the head node's files carry it) keeps the systemd collector to slurmctld and
    slurmdbd, before Debian's $ARGS; a compute node's to slurmd (Debian's build reads every unit otherwise). The real node exporter takes these
    flags in tests/e2e/test_alerts_e2e.py."""
    calls: list[list[str]] = []
    monkeypatch.setattr(cli.os, "execv", lambda path, argv: calls.append(argv))
    monkeypatch.setattr(cli, "private_address", lambda: "10.0.0.5")
    head_files = {f.path: f.content for f in metrics_files(None, head="/data/agent")}
    gpu_files = part_files(context(P5, CPU, enabled=False), "p5")
    words = _exec_start(head_files[NODE_EXPORTER_DROP_IN])
    include = "--collector.systemd.unit-include=(slurmctld|slurmdbd)[.]service"
    assert words[words.index("--") :] == ["--", "--collector.systemd", include, "$ARGS"]
    compute = _exec_start(gpu_files[NODE_EXPORTER_DROP_IN])
    assert compute[compute.index("--") :] == [
        "--",
        "--collector.systemd",
        "--collector.systemd.unit-include=(slurmd)[.]service",
        "$ARGS",
    ]
    assert re.fullmatch(include.split("=", 1)[1], "slurmdbd.service") and not re.fullmatch(
        include.split("=", 1)[1], "slurmdbdXservice"
    )
    cli.main(words[words.index("node-exporter") :][:-1])  # systemd passes Debian's empty $ARGS as no word
    assert calls[0][-2:] == ["--collector.systemd", include]
