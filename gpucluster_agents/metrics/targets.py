# pyright: strict, reportUnknownMemberType=false, reportUnknownArgumentType=false, reportUnknownVariableType=false
# (boto3 has no types: the three checks of what it returns are off here only)
"""The head node's collector's targets, listed by the signer (``remote-write-signer --targets-dir``): the cluster's
running instances, written as Prometheus file-based discovery files (``<job>.json`` for the jobs ``gpu``, ``node``
and ``head``) that the collector's config names.

Why here and not Prometheus's own ``ec2_sd_configs``: that discovery needs the instance role's credentials, so
Prometheus (which parses the answers of every compute node's exporters, ports a job can squat) would need IMDS. The
signer's user already has them, for the signatures, and listens on nothing but 127.0.0.1 for Prometheus alone.
Why not the node agent's maintain pass, which lists the cluster's instances too: it lists the node groups' instances
only (not the head node), runs under the agent's lock every minute for power decisions that must not wait on
monitoring, and its files are slurm's.

What is listed is what the EC2 discovery selected: instances tagged ``gpucluster:cluster`` = the cluster, running;
the head node by ``gpucluster:role`` = head, a GPU node by its ``gpucluster:node-group`` tag (login nodes and anything
else: not scraped). Each target carries the labels the alert rules and dashboards select on: ``instance_id``,
``role`` (head or compute), and on a GPU node ``node_group`` and ``node`` (its Slurm name, once tagged). A failed
listing leaves the files as they are (the targets of the last good listing stay scraped); each write is atomic.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..contract import TAG_CLUSTER, TAG_NODE_GROUP, TAG_NODE_NAME, TAG_ROLE
from ..contract.metrics import JOB_PORTS

LOG = logging.getLogger("gpucluster-metrics.targets")
"""Each job's file and the ports its instances are scraped on (the ``head`` job: both exporters of the head node)."""
TargetGroups = list[dict[str, Any]]


def _tags(instance: dict[str, Any]) -> dict[str, str]:
    return {str(t.get("Key")): str(t.get("Value", "")) for t in instance.get("Tags") or []}


def target_groups(instances: Iterable[dict[str, Any]], cluster: str) -> dict[str, TargetGroups]:
    """``{job: file_sd target groups}`` of DescribeInstances' instances: one group a target, sorted."""
    jobs: dict[str, TargetGroups] = {job: [] for job in JOB_PORTS}
    for inst in instances:
        tags, address = _tags(inst), inst.get("PrivateIpAddress")
        if tags.get(TAG_CLUSTER) != cluster or (inst.get("State") or {}).get("Name") != "running" or not address:
            continue
        labels = {"instance_id": str(inst["InstanceId"])}
        if tags.get(TAG_ROLE) == "head":
            names = ("head",)
            labels["role"] = "head"
        elif TAG_NODE_GROUP in tags:
            names = ("gpu", "node")
            labels |= {"role": "compute", "node_group": tags[TAG_NODE_GROUP]}
            if tags.get(TAG_NODE_NAME):
                labels["node"] = tags[TAG_NODE_NAME]
        else:
            continue
        for job in names:
            jobs[job] += [{"targets": [f"{address}:{port}"], "labels": labels} for port in JOB_PORTS[job]]
    return {job: sorted(groups, key=lambda g: g["targets"]) for job, groups in jobs.items()}


def list_instances(ec2: Any, cluster: str) -> list[dict[str, Any]]:
    """The cluster's running instances (every page)."""
    filters = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]}, {"Name": "instance-state-name", "Values": ["running"]}]
    return [
        inst
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters)
        for reservation in page.get("Reservations", [])
        for inst in reservation.get("Instances", [])
    ]


def write_targets(directory: str, jobs: dict[str, TargetGroups]) -> None:
    """Each job's file, whole or not at all (a temp file renamed over it), readable by Prometheus (0644)."""
    for job, groups in jobs.items():
        fd, tmp = tempfile.mkstemp(prefix=f".{job}-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(groups, fh, indent=1, sort_keys=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, os.path.join(directory, f"{job}.json"))
        except BaseException:
            os.unlink(tmp)
            raise


def refresh(ec2: Any, cluster: str, directory: str) -> bool:
    """List and write once; False (files kept) when the listing or a write failed."""
    try:
        write_targets(directory, target_groups(list_instances(ec2, cluster), cluster))
        return True
    except Exception as exc:  # AWS unreachable, throttled, no credentials: the last good targets stay
        LOG.warning("collector targets not refreshed: %s", exc)
        return False


def start_refresher(make_ec2: Callable[[], Any], cluster: str, directory: str, every: float) -> threading.Event:
    """Refresh now and every ``every`` seconds in a daemon thread; set the returned event to stop it."""
    stop = threading.Event()

    def loop() -> None:
        ec2 = None
        while True:
            try:
                ec2 = ec2 or make_ec2()
                refresh(ec2, cluster, directory)
            except Exception as exc:  # the client could not be made: try again next time
                LOG.warning("collector targets not refreshed: %s", exc)
            if stop.wait(every):
                return

    threading.Thread(target=loop, name="collector-targets", daemon=True).start()
    return stop
