"""Capacity holds with the real Slurm (Debian 22.05, the project's rendered slurm.conf, ``slurm_e2e``):
insufficient capacity while slurmctld restarts. The agent's ResumeProgram call answers the job's node
with InsufficientInstanceCapacity (injected by the proxy, with CreateFleet slowed so the restart lands
in it) while slurmctld is stopped, so ``scontrol update state=down`` fails and Slurm restarts with the
node still POWERING_UP and the job waiting on it. One ``maintain`` pass (the head node's timer) after
slurmctld is back must set the node DOWN with the capacity reason, so the job fails over to the second
partition at once, not after ResumeTimeout (120 s in these tests; 1800 s by default)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpucluster_agents.contract import hostlist
from tests.agents.ec2_fault_proxy import FaultProxy
from tests.agents.moto_env import MotoServer, node_instances
from tests.e2e.slurm_e2e import SlurmCluster
from tests.e2e.test_slurm_e2e import E2E_GROUPS, assert_no_unowned_instance, shim, start_cluster

pytestmark = pytest.mark.slow
__all__ = ["shim"]  # the fixture, imported for this module's tests

RESUME_TIMEOUT = 120  # slurm_e2e.LOCAL_TIMERS


@pytest.fixture
def cluster(moto: MotoServer, proxy: FaultProxy, aws_env: None, shim: Path) -> Iterator[SlurmCluster]:
    yield from start_cluster(E2E_GROUPS, moto, proxy, shim)


def wait_for(what: str, check: Callable[[], object], timeout: float, c: SlurmCluster) -> None:
    c.wait(what, check, timeout, interval=0.2)


def test_capacity_failure_during_a_slurmctld_restart_fails_over_within_one_maintain_pass(
    cluster: SlurmCluster, moto: MotoServer, proxy: FaultProxy
) -> None:
    c = cluster
    agent_log = Path(c.agent_config["log_file"])
    proxy.capacity("p5", fulfil=0)
    proxy.delay("CreateFleet", 8.0)  # slurmctld stops well inside it
    job = c.sbatch("-p", "p5,g6e", "-N", "1", "--output=job-%j.out", "--wrap", "echo ran-on-$SLURMD_NODENAME")
    # slurmctld runs the ResumeProgram for a p5 node (the higher PriorityTier); stop slurmctld while the
    # agent waits on CreateFleet
    wait_for("a CreateFleet for p5", lambda: proxy.requests("CreateFleet"), 30, c)
    c.stop_ctld()
    wait_for("the agent's resume to end", lambda: agent_log.exists() and "end resume" in agent_log.read_text(), 120, c)
    log = agent_log.read_text()
    assert "state=down reason=gpucluster: InsufficientInstanceCapacity" in log, log
    assert "Unable to contact slurm controller" in log, log  # the DOWN never reached Slurm
    c.start()  # slurmctld recovers its state: the node is still POWERING_UP, the job waits on it
    (node,) = [n for n, st in c.nodes().items() if n.startswith("p5-") and st.has("POWERING_UP")]
    assert not c.nodes()[node].has("DOWN"), c.debug()

    started = time.monotonic()
    assert c.run_agent("maintain") == 0  # the head node's timer, once
    st = c.nodes()[node]
    assert st.has("DOWN") and (st.reason or "").startswith("gpucluster: InsufficientInstanceCapacity p5.48xlarge"), c.debug()
    info = c.wait_job(job, timeout=RESUME_TIMEOUT - 30)  # well before ResumeTimeout could have moved it
    took = time.monotonic() - started
    assert info["JobState"] == "COMPLETED" and info["Partition"] == "g6e", c.debug()
    ran_on = hostlist.expand(info["NodeList"])
    assert (c.dir / f"job-{job}.out").read_text().strip() == f"ran-on-{ran_on[0]}"
    assert took < RESUME_TIMEOUT / 2, f"the job failed over {took:.0f}s after maintain"
    # nothing launched twice, nothing left unowned: only the g6e node the job ran on has an instance
    assert list(node_instances(moto.url, "testcl")) == ran_on
    assert len([r for r in proxy.requests("CreateFleet") if "p5" in r.values()]) == 1
    assert_no_unowned_instance(c, moto.url)
