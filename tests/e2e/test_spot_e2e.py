"""A spot interruption warning end to end with the real Slurm (Debian 22.05, the harness of ``test_slurm_e2e``) and
moto's SQS: a requeueable job runs on p5-1; the warning for p5-1's instance, shaped like AWS's documented EventBridge
event, is put in the queue as the rule's target would (moto does not deliver EventBridge events to SQS); the agent's
``spot-watch`` powers p5-1 down at once with the reason, Slurm requeues the job (it is not lost with the node), its
SuspendProgram (the agent) terminates the instance, the node is back in service (``idle~``) and the message is
deleted."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster_agents.power.spot import SPOT_REASON
from tests.agents.conftest import CLUSTER
from tests.agents.ec2_fault_proxy import FaultProxy
from tests.agents.moto_env import REGION, MotoServer, node_instances
from tests.agents.test_spot import interruption
from tests.e2e import slurm_e2e
from tests.e2e.slurm_e2e import REPO, SlurmCluster
from tests.e2e.slurm_programs import agent_env
from tests.e2e.test_slurm_e2e import E2E_GROUPS, shim, start_cluster  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture
def spot_cluster(
    moto: MotoServer,
    proxy: FaultProxy,
    aws_env: None,
    shim: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[SlurmCluster]:
    monkeypatch.setattr(slurm_e2e, "LOCAL_TIMERS", {**slurm_e2e.LOCAL_TIMERS, "SuspendTime": "600"})
    yield from start_cluster(E2E_GROUPS, moto, proxy, shim)


def test_an_interruption_warning_sets_the_node_down_and_its_job_is_requeued(spot_cluster: SlurmCluster, moto: MotoServer) -> None:
    import boto3

    c = spot_cluster
    sqs = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION).client(
        "sqs", endpoint_url=moto.url
    )
    url = sqs.create_queue(QueueName=f"{CLUSTER}-spot-events")["QueueUrl"]
    c.agent_config["spot_queue_url"] = url
    c.agent_config_path.write_text(json.dumps(c.agent_config, indent=1))
    job = c.sbatch("-p", "p5", "-N", "1", "-w", "p5-1", "--requeue", "--output=job-%j.out", "--wrap", "sleep 600")
    c.wait("job running", lambda: "JobState=RUNNING" in c.scontrol("-o", "show", "job", str(job)), 100)
    (iid,) = node_instances(moto.url, CLUSTER)["p5-1"]

    sqs.send_message(QueueUrl=url, MessageBody=interruption(iid))
    watch = [c.settings["python"], "-m", "gpucluster_agents", "spot-watch", "once"]  # the service, one poll
    assert subprocess.run(watch, env=agent_env(c.settings), cwd=str(REPO), stdin=subprocess.DEVNULL, check=False).returncode == 0
    p5_1 = c.nodes()["p5-1"]
    assert p5_1.reason == SPOT_REASON and any(p5_1.has(f) for f in ("POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN")), c.debug()
    shown = c.scontrol("-o", "show", "job", str(job))
    assert "Restarts=1" in shown and "JobState=RUNNING" not in shown, shown  # requeued, not lost with the node
    left = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0, VisibilityTimeout=0).get("Messages", [])
    assert left == []  # handled and deleted
    c.wait(
        "p5-1 powered down and its instance gone",
        lambda: c.nodes()["p5-1"].powered_down and "p5-1" not in node_instances(moto.url, CLUSTER),
        30,
    )
    assert not c.nodes()["p5-1"].has("DOWN") and not c.nodes()["p5-1"].has("DRAIN"), c.debug()  # back in service
