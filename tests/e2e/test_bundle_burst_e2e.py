"""End to end on real Slurm 22.05: a site's slurmctld with the bundle included (``bundle_e2e``) bursts into
AWS (moto) through the bundle's own agent package, wrappers, config and Roles Anywhere profile.

- A job to the site's partition runs on its own nodes: no Resume/Suspend program runs, no instance.
- A job to the cloud partition makes slurmctld run the bundle's ResumeProgram; the agent launches through moto
  with the session the fake ``aws_signing_helper`` prints (no AWS variable in its environment, no key in any
  file), the cloud node's slurmd registers, the job runs there, and after the cloud partition's SuspendTime the
  agent terminates the instance and the node is powered down.
- A job asking for more nodes than either side has is refused at submission, not spread across the sites.
- The site's own power saving still gets its nodes: powering a site node down and up runs the site's programs
  with that node's hostlist, and the agent makes no EC2 call for it.

Set GPUCLUSTER_E2E_KEEP=1 to keep the run directory (/tmp/gchy-*)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.e2e import slurm_harness
from tests.e2e.bundle_e2e import (
    CLUSTER,
    SCONTROL,
    SLURMCTLD,
    SLURMD,
    HybridSite,
    MotoServer,
    build_uptime_shim,
    instances,
    make_world,
    node_instances,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def site(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HybridSite]:
    for tool in (SLURMCTLD, SLURMD, SCONTROL, "/usr/bin/gcc"):
        require_tool(tool)
    moto_server.reset()
    shim = build_uptime_shim(tmp_path_factory.mktemp("shim"))
    world = make_world(moto_server.url, {"p5": "p5.48xlarge"})
    run_dir = slurm_harness.run_dir("gchy-")
    s = HybridSite(run_dir, world, moto_server.url, shim)
    try:
        s.start()
        yield s
    finally:
        s.stop()
        leftover = s.leftover()
        s.cleanup()
        assert leftover == [], f"processes left running: {leftover}"


def test_burst_to_aws_and_back(site: HybridSite, moto_server: MotoServer) -> None:
    url = moto_server.url
    # 1. the site's own partition: its own nodes, no program, no instance
    site.wait("site nodes idle", lambda: all(site.nodes()[n].has("IDLE") for n in ("onprem-1", "onprem-2")), 60)
    fabric = "echo ran-on-$SLURMD_NODENAME net=$NCCL_NET fi=$FI_PROVIDER"  # what the bundle's TaskProlog set
    sub = site.submit("-p", "gpu", "-N", "2", "--output=job-%j.out", "--wrap", fabric)
    assert sub.returncode == 0, sub.stderr
    job = int(sub.stdout.strip())
    info = site.wait_job(job, 60)
    assert (info["JobState"], info["NodeList"]) == ("COMPLETED", "onprem-[1-2]"), site.debug()
    assert (site.dir / f"job-{job}.out").read_text().strip() == "ran-on-onprem-1 net=IB fi="
    assert site.log("programs.log") == "" and instances(url, CLUSTER) == []

    # 2. more nodes than either side has (2 + 2): refused, never spread over the two sites
    sub = site.submit("-p", "gpu,aws-p5", "-N", "3", "--wrap", "true")
    assert sub.returncode != 0 and "Requested node configuration is not available" in sub.stderr, sub.stdout + sub.stderr

    # 3. the cloud partition: the bundle's agent launches in moto with the helper's session
    sub = site.submit("-p", "aws-p5", "-N", "1", "--gres=gpu:h100:1", "--output=job-%j.out", "--wrap", fabric)
    assert sub.returncode == 0, sub.stderr
    job = int(sub.stdout.strip())
    info = site.wait_job(job, 120)
    assert (info["JobState"], info["NodeList"]) == ("COMPLETED", "p5-1"), site.debug()
    # the TaskProlog took p5-1 for a cloud node: not the site's RoCE environment, and EFA's only from the nccl.env
    # a cloud node's user data writes (this machine has none)
    assert (site.dir / f"job-{job}.out").read_text().strip() == "ran-on-p5-1 net= fi="
    launched = node_instances(url, CLUSTER)
    assert list(launched) == ["p5-1"] and len(launched["p5-1"]) == 1
    agent_log = site.log("agent.log")
    assert "api CreateFleet group=p5" in agent_log, site.debug()
    # no AWS variable reached the agent; its session is the one aws_signing_helper printed
    assert re.search(r"resume p5-1 aws_env=\[\]", site.log("programs.log")), site.log("programs.log")
    helper_args = site.helper_calls.read_text().splitlines()
    assert helper_args and all("--role-arn arn:aws:iam::123456789012:role/hybrid-slurm-site-agent" in a for a in helper_args)
    for f in (Path(site.site.etc_dir) / "aws-config", Path(site.site.etc_dir) / "agent.json"):
        assert not re.search(r"aws_access_key_id|aws_secret_access_key|AKIA|ASIA", f.read_text(), re.I)

    # 4. idle for the cloud partition's SuspendTime (8 s): the agent terminates the instance, the node powers down
    site.wait("instance terminated", lambda: node_instances(url, CLUSTER) == {}, 60)
    site.wait("p5-1 powered down", lambda: site.nodes()["p5-1"].has("POWERED_DOWN"), 40)
    assert "decision suspend node=p5-1" in site.log("agent.log")
    assert not site.nodes()["onprem-1"].has("POWERED_DOWN")  # the site's nodes keep the site's SuspendTime

    # 5. the site's own power saving: its programs get its hostlists, the agent makes no EC2 call for them
    calls_before = site.log("agent.log").count("api ")
    site.scontrol("update", "nodename=onprem-2", "state=power_down_force")
    suspend_calls = site.dir / "site" / "site-suspend.calls"
    site.wait("site SuspendProgram", lambda: suspend_calls.exists() and "onprem-2" in suspend_calls.read_text(), 30)
    assert suspend_calls.read_text() == "onprem-2\n"
    assert "hostlist='onprem-2'" not in site.log("agent.log")
    assert site.log("agent.log").count("api ") == calls_before
    site.wait("onprem-2 powered down", lambda: site.nodes()["onprem-2"].has("POWERED_DOWN"), 60)
    site.scontrol("update", "nodename=onprem-2", "state=power_up")
    resume_calls = site.dir / "site" / "site-resume.calls"
    site.wait("site ResumeProgram", lambda: resume_calls.exists() and "onprem-2" in resume_calls.read_text(), 30)
    assert resume_calls.read_text() == "onprem-2\n"
    assert "hostlist='onprem-2'" not in site.log("agent.log")
    assert site.log("agent.log").count("api ") == calls_before and node_instances(url, CLUSTER) == {}
