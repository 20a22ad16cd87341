"""The IMDS guard tests' node: a network namespace (the node's) linked by a veth pair to a second one that holds IMDS's
addresses, and a run directory; both removed in teardown, also when a test fails. Used by
``test_imds_guard_e2e.py`` (compute nodes) and ``test_head_guard_e2e.py`` (the head node); the fixtures reach them
through this folder's conftest."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import IN_CI, require_tool
from tests.e2e.slurm_harness import SBATCH, SCONTROL, SLURMCTLD, SLURMD, kill_marked
from tests.e2e.slurm_harness import run_dir as run_dir_for


@dataclass
class Namespace:
    name: str
    marker: str
    ip: str = "/usr/sbin/ip"
    nsenter: str = "/usr/bin/nsenter"
    imds: Namespace | None = None  # the node's: where IMDS answers

    def cmd(self, *args: str) -> list[str]:
        """``args`` in the namespace's network (only: ``ip netns exec`` would also remount /sys, where
        slurmd finds its cgroups)."""
        return [self.nsenter, f"--net=/run/netns/{self.name}", *args]

    def run(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.cmd(*args), capture_output=True, text=True, env=env, timeout=60, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def rules(self) -> str:
        return self.run("iptables", "-w", "-S").stdout + self.run("ip6tables", "-w", "-S").stdout


@pytest.fixture
def netns() -> Iterator[Namespace]:
    """The node's network namespace, linked by a veth pair to a second one that holds IMDS's addresses:
    like EC2, where IMDS is off the host (were IMDS's address on the node's own ``lo``, the guard's TCP
    reset would be addressed to that very address and rejected in turn)."""
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail("the IMDS guard end-to-end test needs root (network namespaces, iptables); run CI as root")
        pytest.skip("needs root (network namespaces, iptables)")
    for tool in (
        "iptables",
        "iptables-restore",
        "ip6tables",
        "ip6tables-restore",
        "curl",
        "setpriv",
        SLURMCTLD,
        SLURMD,
        SCONTROL,
        SBATCH,
    ):
        require_tool(tool)
    ip = require_tool("ip")
    marker = f"imds-guard:{os.getpid()}:{time.monotonic_ns()}"
    node = Namespace(f"gcimds-node-{os.getpid()}", marker, ip, require_tool("nsenter"))
    imds = Namespace(f"gcimds-imds-{os.getpid()}", marker, ip, node.nsenter)
    try:
        for ns in (node, imds):
            subprocess.run([ip, "netns", "add", ns.name], check=True, capture_output=True)
        subprocess.run(
            [ip, "link", "add", "gcnode0", "netns", node.name, "type", "veth", "peer", "name", "gcimds0", "netns", imds.name],
            check=True,
            capture_output=True,
        )
        for ns, dev, v4, v6 in (
            (node, "gcnode0", "10.254.0.2/24", "fd00:1::2/64"),
            (imds, "gcimds0", "10.254.0.1/24", "fd00:1::1/64"),
        ):
            ns.run(ip, "link", "set", "lo", "up")
            ns.run(ip, "link", "set", dev, "up")
            ns.run(ip, "addr", "add", v4, "dev", dev)
            ns.run(ip, "-6", "addr", "add", v6, "dev", dev, "nodad")
        imds.run(ip, "addr", "add", "169.254.169.254/32", "dev", "lo")
        imds.run(ip, "-6", "addr", "add", "fd00:ec2::254/128", "dev", "lo", "nodad")
        node.run(ip, "route", "add", "169.254.169.254/32", "via", "10.254.0.1")
        node.run(ip, "-6", "route", "add", "fd00:ec2::254/128", "via", "fd00:1::1")
        node.imds = imds
        yield node
    finally:
        kill_marked(marker, (signal.SIGTERM, signal.SIGKILL, signal.SIGKILL), grace=1)
        for ns in (node, imds):
            subprocess.run([ip, "netns", "del", ns.name], check=False, capture_output=True)


@pytest.fixture
def run_dir() -> Iterator[Path]:
    d = run_dir_for("gcimds-")
    yield d
    shutil.rmtree(d, ignore_errors=True)
