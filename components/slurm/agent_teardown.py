# pyright: strict, reportMissingTypeStubs=false
"""Teardown: terminate every instance the agent launched for a cluster and wait until they are gone.

The agent's instances are not Pulumi resources, so deleting a Slurm cluster would leave them running
(and their network interfaces would block the deletion of the subnets and security groups). The
SlurmCluster component runs :func:`teardown` from a ``before_delete`` resource hook
(``components/slurm/_teardown.py`` says why a hook). It is also a command for a person:
``python -m gpucluster.components.slurm.agent_teardown --cluster NAME --region REGION``.

Which instances: the cluster tag *and* a launch-token tag, which only the agent's CreateFleet sets. The
head node and static groups' Auto Scaling instances carry the cluster tag too, but they are Pulumi's to
delete. Idempotent: a second run finds nothing and returns at once. New instances that appear while
it waits (an agent still running) are terminated too, until the deadline.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from boto3.session import Session

from gpucluster_agents.contract import TAG_CLUSTER, TAG_LAUNCH_TOKEN

log = logging.getLogger("gpucluster_agents")

NOT_GONE = ("pending", "running", "shutting-down", "stopping", "stopped")
BATCH = 1000  # TerminateInstances takes at most 1000 ids


class TeardownTimeout(RuntimeError):
    """Instances were still not terminated at the deadline."""


def _not_gone(client: Any, cluster: str) -> dict[str, str]:
    """{instance id: state} of the cluster's agent-launched instances not yet terminated."""
    out: dict[str, str] = {}
    for page in client.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
            {"Name": "tag-key", "Values": [TAG_LAUNCH_TOKEN]},
            {"Name": "instance-state-name", "Values": list(NOT_GONE)},
        ]
    ):
        for res in cast("list[dict[str, Any]]", page.get("Reservations", [])):
            for inst in cast("list[dict[str, Any]]", res.get("Instances", [])):
                out[str(inst["InstanceId"])] = str(inst.get("State", {}).get("Name", ""))
    return out


def teardown(
    cluster: str,
    region: str,
    *,
    client: Any = None,
    profile: str | None = None,
    endpoint_url: str | None = None,
    timeout: float = 900.0,
    poll: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Terminate the agent's instances of ``cluster`` and wait until EC2 shows them terminated.
    Returns the ids it terminated (empty when there were none); raises TeardownTimeout at ``timeout``."""
    if client is None:
        session = Session(profile_name=profile, region_name=region)
        client = cast(Any, session.client("ec2", region_name=region, endpoint_url=endpoint_url))  # pyright: ignore[reportUnknownMemberType]
    deadline = clock() + timeout
    terminated: list[str] = []
    while True:
        left = _not_gone(client, cluster)
        live = sorted(i for i, s in left.items() if s != "shutting-down" and i not in terminated)
        if live:
            for k in range(0, len(live), BATCH):
                client.terminate_instances(InstanceIds=live[k : k + BATCH])
            log.info("teardown cluster=%s: terminating %s", cluster, ",".join(live))
            terminated.extend(live)
            continue
        if not left:
            log.info("teardown cluster=%s: no agent instance left (%d terminated)", cluster, len(terminated))
            return terminated
        if clock() >= deadline:
            raise TeardownTimeout(f"cluster {cluster}: instances still not terminated: {', '.join(sorted(left))}")
        sleep(poll)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m gpucluster.components.slurm.agent_teardown",
        description="Terminate every instance the node agent launched for a cluster, and wait.",
    )
    p.add_argument("--cluster", required=True)
    p.add_argument("--region", required=True)
    p.add_argument("--profile")
    p.add_argument("--endpoint-url")
    p.add_argument("--timeout", type=float, default=900.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        done = teardown(args.cluster, args.region, profile=args.profile, endpoint_url=args.endpoint_url, timeout=args.timeout)
    except TeardownTimeout as exc:
        sys.stderr.write(f"teardown: {exc}\n")
        return 1
    print(f"terminated {len(done)} instance(s) of cluster {args.cluster}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
