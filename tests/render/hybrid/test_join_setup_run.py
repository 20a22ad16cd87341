"""The rendered join script, run as cloud-init runs it, against a directory of its own with the system's commands
replaced by recorders: the site's users exist before any package install, the controller's name is resolvable,
the clock is synchronized before munge, slurmd gets --conf-server, and every refusal stops the join early."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpucluster.render.hybrid.compute import JOIN_SETUP, render_hybrid_compute_user_data
from tests.conftest import require_tool
from tests.render.hybrid.join_cases import SECRET_ARN, files, hybrid_spec, p5

STUBS = {
    "curl": """case "$*" in *api/token*) echo token ;; *tags/instance/*) echo "$FAKE_NODE" ;; *) exit 22 ;; esac""",
    "getent": """awk -F: -v k="$2" '$1 == k || $3 == k {print; found = 1} END {exit found ? 0 : 2}' "$GPUCLUSTER_ROOT/etc/$1\"""",
    # groupadd --system --gid GID NAME
    "groupadd": """echo "$4:x:$3:" >>"$GPUCLUSTER_ROOT/etc/group\"""",
    # useradd --system --uid UID --gid GID --home-dir H --no-create-home --shell S NAME
    "useradd": """echo "${11}:x:$3:$5::$7:${10}" >>"$GPUCLUSTER_ROOT/etc/passwd\"""",
    "apt-get": "true",
    "systemctl": "true",
    "chronyc": """exit "${FAKE_CHRONY_RC:-0}\"""",
    "slurmd": """[ "$1" = -V ] && echo "$FAKE_SLURMD\"""",
    "gpucluster-aws": "true",
}


def join_script(version: str = "22.05", containers: bool = False, **changes) -> str:
    """The join script; containers off by default (their build is checked in test_join_user_data.py)."""
    spec = hybrid_spec(controller={"slurmVersion": version}, slurm={"containers": {"enabled": containers}}, **changes)
    return files(render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN))[JOIN_SETUP].text()


class Node:
    """A directory standing in for the instance's root file system, and recorders for its commands."""

    def __init__(self, tmp: Path):
        self.root = tmp / "root"
        self.bin = tmp / "bin"
        self.calls = tmp / "calls.log"
        for d in ("etc/default", "etc/chrony", "usr/sbin", "lib/x86_64-linux-gnu", "bin"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        (self.root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
        (self.root / "etc/group").write_text("root:x:0:\n")
        (self.root / "etc/hosts").write_text("127.0.0.1 localhost\n")
        (self.root / "etc/chrony/chrony.conf").write_text("pool ntp.ubuntu.com iburst\nsourcedir /run/chrony-dhcp\n")
        (self.root / "etc/nsswitch.conf").write_text(
            "passwd:         files systemd\ngroup:          files systemd\nhosts: files dns\n"
        )
        self.bin.mkdir()
        for name, body in STUBS.items():
            stub = self.bin / name
            stub.write_text(f'#!/bin/sh\necho "{name} $*" >>"$CALLS"\n{body}\n')
            stub.chmod(0o755)

    def run(self, script: str, **env: str) -> subprocess.CompletedProcess[str]:
        path = self.root.parent / "join.sh"
        path.write_text(script)
        full = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "CALLS": str(self.calls),
            "GPUCLUSTER_ROOT": str(self.root),
            "GPUCLUSTER_LOG": str(self.root.parent / "log"),
            "GPUCLUSTER_AWS_HELPER": str(self.bin / "gpucluster-aws"),
            "FAKE_NODE": "p5-3",
            "FAKE_SLURMD": "slurm-wlm 21.08.5",
            **env,
        }
        return subprocess.run([require_tool("bash"), str(path)], env=full, capture_output=True, text=True, timeout=60)

    def log(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def file(self, path: str) -> str:
        return (self.root / path).read_text()


def index(calls: list[str], prefix: str) -> int:
    return next(i for i, c in enumerate(calls) if c.startswith(prefix))


def test_join_in_order(tmp_path):
    node = Node(tmp_path)
    (node.root / "lib/x86_64-linux-gnu/libnss_slurm.so.2").write_bytes(b"")
    result = node.run(join_script())
    assert result.returncode == 0, result.stdout + result.stderr
    calls = node.log()
    install = index(calls, "apt-get -o DPkg::Lock::Timeout=600 install")
    # the site's users BEFORE the packages that would otherwise create them with other IDs
    assert index(calls, "groupadd --system --gid 64031 munge") < install
    assert index(calls, "useradd --system --uid 64031 --gid 64031") < install
    assert index(calls, "groupadd --system --gid 64030 slurm") < install
    assert index(calls, "useradd --system --uid 64030 --gid 64030") < install
    assert "munge:x:64031:64031::/nonexistent:/usr/sbin/nologin" in node.file("etc/passwd").splitlines()
    assert "slurm:x:64030:" in node.file("etc/group").splitlines()
    # time, then the key, then munge and slurmd
    sync = index(calls, "chronyc waitsync")
    assert index(calls, "systemctl restart chrony") < sync < index(calls, "gpucluster-aws munge-key")
    assert index(calls, "gpucluster-aws munge-key") < index(calls, "systemctl enable --now munge")
    assert index(calls, "systemctl enable --now munge") < index(calls, "systemctl enable --now slurmd")
    assert "sourcedir /etc/chrony/sources.d" in node.file("etc/chrony/chrony.conf").splitlines()
    assert node.file("etc/hosts").splitlines()[-1] == "10.20.0.10 slurmctl01"
    assert node.file("etc/default/slurmd") == 'SLURMD_OPTIONS="--conf-server 10.20.0.10:6817 -N p5-3"\n'
    ns = node.file("etc/nsswitch.conf").splitlines()
    assert (
        ns[:2] == ["passwd:         slurm files systemd", "group:          slurm files systemd"] and ns[2] == "hosts: files dns"
    )
    assert not (node.root / "usr/sbin/policy-rc.d").exists()
    # a second run (an operator re-running it) finds everything in place and adds nothing twice
    before = {p: node.file(p) for p in ("etc/passwd", "etc/group", "etc/hosts", "etc/nsswitch.conf", "etc/chrony/chrony.conf")}
    result = node.run(join_script())
    assert result.returncode == 0, result.stdout + result.stderr
    assert {p: node.file(p) for p in before} == before


def test_no_nss_slurm_module_leaves_nsswitch_alone(tmp_path):
    node = Node(tmp_path)
    result = node.run(join_script())
    assert result.returncode == 0, result.stderr
    assert "slurm" not in node.file("etc/nsswitch.conf")
    assert "WARNING: the image has no libnss_slurm.so.2" in result.stdout


@pytest.mark.parametrize(
    ("passwd", "group", "message"),
    [
        (
            "munge:x:102:105::/nonexistent:/usr/sbin/nologin\n",
            "munge:x:64031:\n",
            "user munge exists with UID 102, the site's is 64031",
        ),
        ("", "munge:x:105:\n", "group munge exists with GID 105, the site's is 64031"),
        ("ubuntu:x:64031:64031::/home/ubuntu:/bin/bash\n", "", "UID 64031 (the site's munge) is taken by user ubuntu"),
        ("", "docker:x:64030:\n", "GID 64030 (the site's slurm) is taken by group docker"),
    ],
)
def test_id_clash_stops_before_packages(tmp_path, passwd, group, message):
    node = Node(tmp_path)
    with (node.root / "etc/passwd").open("a") as fh:
        fh.write(passwd)
    with (node.root / "etc/group").open("a") as fh:
        fh.write(group)
    result = node.run(join_script())
    assert result.returncode != 0
    assert message in result.stdout
    assert not any(c.startswith("apt-get") for c in node.log())


def test_slurmd_outside_the_window_stops_the_join(tmp_path):
    node = Node(tmp_path)
    result = node.run(join_script("22.05"), FAKE_SLURMD="slurm 23.11.4")
    assert result.returncode != 0
    assert "slurmd 23.11.4 is outside Slurm 22.05's window (20.11, 21.08, 22.05)" in result.stdout
    assert not any("enable --now slurmd" in c for c in node.log())
    # the 24.11 controller takes Ubuntu 24.04's slurmd
    node = Node(tmp_path / "b")
    assert node.run(join_script("24.11"), FAKE_SLURMD="slurm 23.11.4").returncode == 0


def test_unsynchronized_clock_stops_before_munge(tmp_path):
    node = Node(tmp_path)
    result = node.run(join_script(), FAKE_CHRONY_RC="1")
    assert result.returncode != 0
    assert "the clock did not synchronize with 169.254.169.123" in result.stdout
    assert not any("munge-key" in c for c in node.log())


def test_untagged_instance_does_not_join(tmp_path):
    node = Node(tmp_path)
    script = join_script().replace("$(seq 1 180)", "$(seq 1 1)").replace("sleep 5", "true")
    result = node.run(script, FAKE_NODE="")
    assert result.returncode != 0 and "no gpucluster:node-name tag" in result.stdout
    assert not any(c.startswith(("groupadd", "apt-get")) for c in node.log())


def test_a_burst_node_ships_its_logs_like_a_compute_node(tmp_path):
    """With the cluster's monitoring on (the hybrid-slurm stack's), a burst node writes the compute role's shipper
    config and unit and the node package's pointer, and the join installs the package and starts the shipper after
    the munge key and before slurmd; with monitoring off, none of it."""
    from dataclasses import replace

    from gpucluster.render.monitoring.logs import LOGS_CONFIG_PATH, LOGS_UNIT, logs_files, logs_unit
    from gpucluster.render.slurm.agent import node_package_file

    spec = hybrid_spec()
    assert spec.monitoring is not None
    shipped = {p: f.text() for p, f in files(render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN)).items()}
    assert (
        shipped[LOGS_CONFIG_PATH]
        == dict((f.path, f.text()) for f in logs_files("hybrid-slurm", "us-east-1", "compute"))[LOGS_CONFIG_PATH]
    )
    assert shipped[f"/etc/systemd/system/{LOGS_UNIT}"] == logs_unit()
    assert shipped[node_package_file().path] == node_package_file().text()
    node = Node(tmp_path)
    result = node.run(join_script())
    assert result.returncode == 0, result.stdout + result.stderr
    calls = node.log()
    order = ["gpucluster-aws munge-key", "gpucluster-aws install-agent", f"systemctl enable --now {LOGS_UNIT}"]
    assert [index(calls, c) for c in order] == sorted(index(calls, c) for c in order)
    assert index(calls, f"systemctl enable --now {LOGS_UNIT}") < index(calls, "systemctl enable --now slurmd")
    off = replace(spec, monitoring=None)
    quiet = files(render_hybrid_compute_user_data(off, p5(off), SECRET_ARN))
    assert LOGS_CONFIG_PATH not in quiet and node_package_file().path not in quiet
    assert "install-agent" not in quiet[JOIN_SETUP].text() and LOGS_UNIT not in quiet[JOIN_SETUP].text()
