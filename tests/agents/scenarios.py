"""Helpers for the agent's fault scenarios (tests/agents/power/test_adoption.py, test_vanished.py): the agent
run in this process with a stepped clock and botocore event hooks on its own EC2 client, and the four
properties every scenario ends with: no running job killed, no stranded node, no unowned instance, no
double launch."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gpucluster_agents import cli
from gpucluster_agents.agent import Agent
from gpucluster_agents.config import load_config
from gpucluster_agents.contract import hostlist
from tests.agents.conftest import CLUSTER, Harness
from tests.agents.moto_env import instances
from tests.agents.power.test_faults import stranded, unowned


class SteppedClock:
    """The head node's wall clock as the agent reads it: the real time when the clock was made, plus an offset,
    moving only when a test steps it (so a busy test machine never adds seconds to a wait)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.base = time.time()
        self.offset = offset

    def __call__(self) -> float:
        return self.base + self.offset

    def step(self, seconds: float) -> None:
        self.offset += seconds


@contextmanager
def in_process(h: Harness, command: str = "maintain", clock: Callable[[], float] | None = None) -> Iterator[Agent]:
    """The agent as ``cli.main`` builds it (same config, log file, EC2 and scontrol), with ``clock``."""
    h.write_config()
    cfg = load_config(str(h.config_path))
    handler = cli.setup_logging(cfg.log_file, command)
    try:
        yield Agent(cfg, clock=clock or time.time)
    finally:
        logging.getLogger("gpucluster_agents").removeHandler(handler)
        handler.close()


def hide_instances(client: Any, hidden: Callable[[str], bool], times: int = -1) -> list[int]:
    """A botocore hook on the agent's own client: DescribeInstances answers lose the instances ``hidden``
    picks (a partial answer), ``times`` answers long (-1: all). Returns a one-item list counting them."""
    left = [times]
    count = [0]

    def drop(parsed: dict[str, Any], **_: Any) -> None:
        if left[0] == 0:
            return
        left[0] -= 1
        for res in parsed.get("Reservations", []):
            kept = [i for i in res.get("Instances", []) if not hidden(i["InstanceId"])]
            count[0] += len(res.get("Instances", [])) - len(kept)
            res["Instances"] = kept

    client.meta.events.register("after-call.ec2.DescribeInstances", drop)
    return count


def slurm_touched(h: Harness, node: str, states: tuple[str, ...] = ("down", "power_down_force", "drain")) -> list[list[str]]:
    """The agent's scontrol updates that took ``node`` out of service."""
    out: list[list[str]] = []
    for call in h.slurm.updates():
        kv = dict(a.split("=", 1) for a in call[1:] if "=" in a)
        if node in hostlist.expand(kv.get("nodename", "")) and kv.get("state", "").lower() in states:
            out.append(call)
    return out


def waiting_without_instance(h: Harness) -> list[str]:
    """Nodes Slurm waits on (POWERING_UP, not DOWN) that have no live instance: with no resume in flight they
    would wait for ResumeTimeout (30 min by default) before Slurm gives up on them."""
    live = h.nodes()
    return sorted(
        n
        for n, st in h.slurm.data()["nodes"].items()
        if "POWERING_UP" in st["state"].split("+") and "DOWN" not in st["state"].split("+") and not live.get(n)
    )


def assert_invariants(h: Harness, running: dict[str, str] | None = None, fleets: int | None = None) -> None:
    """0 running jobs killed (``running``: node -> its instance, still live, the node never set DOWN, drained or
    powered down by the agent), 0 stranded nodes, 0 unowned instances (none without a node, no node with
    two), no double launch (``fleets``: CreateFleet calls the proxy saw since it was last cleared)."""
    live = {i["InstanceId"]: i["tags"].get("gpucluster:node-name") for i in instances(h.moto.url, CLUSTER)}
    for node, iid in (running or {}).items():
        assert iid in live, f"the instance {iid} of {node}, which runs a job, was terminated"
        assert live[iid] == node, f"the instance {iid} of {node} is tagged {live[iid]}"
        assert slurm_touched(h, node) == [], f"the agent took {node}, which runs a job, out of service"
    assert stranded(h) == [], "stranded nodes"
    assert waiting_without_instance(h) == [], "nodes left waiting for ResumeTimeout"
    assert unowned(h) == [], "unowned instances"
    if fleets is not None:
        assert h.proxy.actions()["CreateFleet"] == fleets, "a second launch"
