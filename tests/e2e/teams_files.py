"""The teams' files as a head node gets them, for :class:`tests.e2e.slurmdbd.AccountingSlurm`: slurm.conf,
slurmdbd.conf and the accounts contract rendered by ``gpucluster.render.slurm`` from a stack's config (the shipped
``slurm-p5`` by default, its teams as they are), for Debian's Slurm 22.05, which runs here.

The local patch (:func:`local_slurm_conf`) only makes slurm.conf run on one machine without compute nodes: the node
programs (health check, prologs, per-job /tmp) exist on real nodes only and are dropped; the power-saving programs
become ``/bin/true`` (nothing is launched: the tests' jobs are held or pend); topology.conf is written next to it.
The accounting keys themselves (AccountingStorageTRES, Enforce, priority, preemption) stay as rendered.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.slurm_e2e import CONTAINER_KEYS, HEALTH_KEYS, LOCAL_SLURM

__all__ = ["TeamsFiles", "local_slurm_conf", "render_teams"]

NODE_ONLY_KEYS = HEALTH_KEYS | CONTAINER_KEYS | {"TaskProlog", "Prolog", "Epilog", "PrologFlags", "PrologEpilogTimeout"}
POWER_KEYS = ("ResumeProgram", "SuspendProgram", "ResumeFailProgram")


@dataclass(frozen=True)
class TeamsFiles:
    cluster: str
    slurm_conf: str
    slurmdbd_conf: str
    topology_conf: str
    contract: dict[str, Any]


def render_teams(stack: str = "slurm-p5", teams: list[dict[str, Any]] | None = None, version: str = LOCAL_SLURM) -> TeamsFiles:
    """The files of ``stack`` (its ``gpucluster:slurm.teams`` replaced by ``teams`` when given) for Slurm ``version``."""
    from gpucluster.load import load_spec
    from gpucluster.render.slurm.accounts import accounts_contract
    from gpucluster.render.slurm.conf import slurm_conf, slurmdbd_conf, topology_conf
    from gpucluster.render.slurm.names import SlurmContext
    from gpucluster.tools.plan.run.stackfile import read_stack_file

    config = copy.deepcopy(read_stack_file(stack)["config"])
    if teams is not None:
        config["gpucluster:slurm"]["teams"] = teams
    ctx = SlurmContext.of(load_spec(config, stack=stack).cluster, slurm_version=version)
    contract = accounts_contract(ctx, f"{stack}-artifacts")
    assert contract is not None, f"stack {stack} has no teams"
    return TeamsFiles(ctx.cluster, slurm_conf(ctx), slurmdbd_conf(ctx), topology_conf(ctx), contract)


def local_slurm_conf(conf: str) -> str:
    """The rendered slurm.conf without the compute nodes' programs and with no-op power-saving programs; the keys
    the fixture sets (paths, ports, auth, AccountingStorage*) are set over it by the fixture."""
    out: list[str] = []
    for line in conf.splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else ""
        if key in NODE_ONLY_KEYS:
            continue
        if key in POWER_KEYS:
            line = f"{key}=/bin/true"
        out.append(line)
    return "\n".join(out) + "\n"


def write_contract(path: Path, contract: dict[str, Any]) -> Path:
    path.write_text(json.dumps(contract, indent=2) + "\n")
    return path
