"""topology after resume: DescribeInstanceTopology (moto lacks it: the proxy answers from moto's
DescribeInstances, with 3 network-node layers per instance), topology.conf, scontrol reconfigure."""

from __future__ import annotations

import pytest

from gpucluster_agents.contract.topology import HEADER
from tests.agents.conftest import Harness


@pytest.fixture(autouse=True)
def _topology_on(harness: Harness) -> None:
    harness.config["topology_conf"] = str(harness.tmp / "topology.conf")


def reconfigures(harness: Harness) -> int:
    return sum(1 for c in harness.slurm.calls() if c == ["reconfigure"])


def test_resume_writes_topology_and_reconfigures_once(harness: Harness) -> None:
    assert harness.slurm_resume("p5-[1-3],g6e-[1-2]") == 0
    assert (harness.tmp / "topology.conf").read_text().splitlines() == [
        *HEADER,
        "SwitchName=nn-g6e-1 Nodes=g6e-[1-2]",
        "SwitchName=nn-p5-1 Nodes=p5-[1-2]",
        "SwitchName=nn-p5-2 Nodes=p5-3",
        "SwitchName=nn-g6e Switches=nn-g6e-1",
        "SwitchName=nn-p5 Switches=nn-p5-1,nn-p5-2",
        "SwitchName=nn-top Switches=nn-g6e,nn-p5",
        "SwitchName=unplaced-g6e Nodes=g6e-[3-8]",
        "SwitchName=unplaced-p5 Nodes=p5-[4-16]",
        "SwitchName=root Switches=nn-top,unplaced-g6e,unplaced-p5",
    ]
    assert reconfigures(harness) == 1
    # nothing changed: no rewrite, no reconfigure
    assert harness.run("topology") == 0
    assert reconfigures(harness) == 1
    # a suspended node goes back to unplaced
    assert harness.slurm_suspend("p5-3") == 0
    assert harness.run("topology") == 0
    assert reconfigures(harness) == 2
    text = (harness.tmp / "topology.conf").read_text()
    assert "SwitchName=unplaced-p5 Nodes=p5-[3-16]" in text and "nn-p5-2" not in text


def test_topology_pages_and_batches_of_100(harness: Harness) -> None:
    # The proxy rejects more than 100 instance ids per call (as EC2 does) and pages 40 per answer.
    harness.proxy.topology_page_size = 40
    harness.group("p5")["max_nodes"] = 150
    harness.slurm = type(harness.slurm)(harness.tmp / "slurm-150", [f"p5-{i}" for i in range(1, 151)])
    harness.config["slurm_bin_dir"] = str(harness.slurm.bin_dir)
    harness.config["api_concurrency"] = 16
    assert harness.slurm_resume("p5-[1-150]") == 0
    calls = harness.proxy.requests("DescribeInstanceTopology")
    sizes = [len([k for k in c if k.startswith("InstanceId.")]) for c in calls]
    assert sizes == [100, 100, 100, 50, 50]  # 100 ids: pages of 40, 40, 20; then 50 ids: 40, 10
    assert [c.get("NextToken") for c in calls] == [None, "40", "80", None, "40"]
    text = (harness.tmp / "topology.conf").read_text()
    assert "unplaced-p5" not in text
    assert "SwitchName=nn-p5-75 Nodes=p5-[149-150]" in text


def test_topology_api_failure_keeps_the_old_file(harness: Harness) -> None:
    assert harness.slurm_resume("p5-1") == 0
    before = (harness.tmp / "topology.conf").read_text()
    # Injected: DescribeInstanceTopology is refused (e.g. the head node's role lacks the permission).
    harness.proxy.fail("DescribeInstanceTopology", "UnauthorizedOperation", n=1)
    assert harness.slurm_resume("p5-2") == 0
    assert (harness.tmp / "topology.conf").read_text() == before
    assert reconfigures(harness) == 1
    assert "DescribeInstanceTopology failed" in harness.log_text()
    assert sorted(harness.nodes()) == ["p5-1", "p5-2"]  # the launch itself went through
