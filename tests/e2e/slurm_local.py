"""A one-node Slurm (Debian's 22.05) on the shared harness (``slurm_harness``), enough to watch what Slurm does with
the health program: slurmctld and one slurmd (``gpu-1``) as root on private ports, no munge, no cgroups, with
HealthCheckProgram and/or Prolog set to wrappers that run ``python -m gpucluster_agents.health``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import ROOT
from tests.e2e.slurm_harness import SCONTROL, SLURMCTLD, SLURMD, LocalSlurm, conf_lines, free_port, local_keys, node_line

__all__ = ["NODE", "SCONTROL", "SLURMCTLD", "SLURMD", "HealthSlurm", "wrapper"]

NODE = "gpu-1"


def wrapper(path: Path, mode: str, config: Path, scenario: Path, slurm_conf: Path) -> str:
    """What the node image would hold: an absolute-path script (slurmd runs it with an empty PATH). The
    local patch: SLURM_CONF, which a configless node's scontrol finds in slurmd's cache instead."""
    path.write_text(
        "#!/bin/sh\n"
        f"export PYTHONPATH={ROOT} PATH=/usr/bin:/bin SLURM_CONF={slurm_conf}\n"
        f"exec {sys.executable} -m gpucluster_agents.health {mode} --config {config} --fake-nvml {scenario}"
        f' --node "${{SLURMD_NODENAME:-{NODE}}}"\n'
    )
    path.chmod(0o755)
    return str(path)


class HealthSlurm(LocalSlurm):
    """The cluster, its slurm.conf at ``run_dir/slurm.conf`` with ``settings`` (the health keys) last."""

    def __init__(self, run_dir: Path, settings: dict[str, str]) -> None:
        super().__init__(run_dir, run_dir / "slurm.conf")
        keys = {
            "ClusterName": "health",
            **local_keys(run_dir, free_port()),
            "AuthInfo": "cred_expire=10",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_Core",
            "SchedulerParameters": "sched_interval=2,bf_interval=2",
            "ReturnToService": "2",
            "SlurmctldDebug": "debug",
            "SlurmdDebug": "debug",
            **settings,
        }
        lines = conf_lines(keys)
        lines.append(node_line(NODE, free_port(), memory_mb=256, State="UNKNOWN"))
        lines.append(f"PartitionName=gpu Nodes={NODE} Default=YES State=UP MaxTime=INFINITE")
        self.write_conf(lines)

    def start(self) -> None:
        """slurmctld, then the node's slurmd."""
        self.start_ctld()
        self.start_slurmd(NODE)

    def node(self, name: str = NODE) -> dict[str, str]:
        return super().node(name)

    def debug(self, logs: Sequence[str] = ("slurmctld.log", f"slurmd-{NODE}.log"), lines: int = 40) -> str:
        return super().debug(logs, lines)
