# pyright: strict
"""The topology pass: the cluster's running instances -> DescribeInstanceTopology -> topology.conf, and
``scontrol reconfigure`` when the file changed. Runs under its own lock (``topology``), after the call's main
lock is released, so a slow DescribeInstanceTopology never holds up resume or suspend."""

from __future__ import annotations

import logging

from ..contract import AgentConfig
from ..contract.topology import render_topology
from .ec2 import Ec2
from .inventory import Inventory
from .names import NameBook
from .slurm import Slurm
from .state import StateDir
from .topology import write_if_changed

log = logging.getLogger("gpucluster_agents")


def refresh_topology(cfg: AgentConfig, state: StateDir, ec2: Ec2, slurm: Slurm, now: float) -> bool:
    """Rewrite ``cfg.topology_conf`` from DescribeInstanceTopology; True when it changed (and Slurm reread it)."""
    path = cfg.topology_conf
    if not path:
        return False
    with state.lock(cfg.lock_timeout_seconds, name="topology"):
        listed = ec2.list_cluster_instances()
        inv = Inventory(NameBook(state.path).apply(listed, now, cfg.orphan_grace_seconds, prune=False))
        by_id: dict[str, str] = {}
        for inst in inv.all():
            if inst.state == "running" and inst.node and cfg.group_of_node(inst.node):
                by_id[inst.id] = inst.node
        try:
            topo = ec2.instance_topology(sorted(by_id)) if by_id else {}
        except Exception as exc:
            log.error("topology: DescribeInstanceTopology failed (%s); keeping %s", exc, path)
            return False
        placements = {by_id[iid]: nodes for iid, nodes in topo.items() if iid in by_id}
        lines = render_topology(placements, [(g.name, g.node_names()) for g in cfg.node_groups])
        changed = write_if_changed(path, lines)
        log.info(
            "decision topology %s placed=%d switches=%d",
            "rewritten" if changed else "unchanged",
            len(placements),
            len(lines) - 2,
        )
        if changed:
            slurm.reconfigure()
        return changed
