# pyright: strict
"""What the agent starts and stops: one CreateFleet batch for a node group, from the launch journal's
first entry to the node tags and addresses, and every termination. Launch and termination live
together because a launch terminates what it cannot account for (surplus or untaggable instances)
and keeps its journal entry whenever an instance might have escaped, for the next sweep to find."""

from __future__ import annotations

import logging
import uuid

from ..contract import NodeGroup
from .ec2 import AWS_ERRORS, Ec2, Instance
from .error_codes import ICE_CODES
from .inventory import Inventory, fmt_nodes
from .names import NameBook
from .nodemap import NodeMapPublisher
from .state import StateDir

log = logging.getLogger("gpucluster_agents")


def terminate(ec2: Ec2, inv: Inventory, ids: list[str], why: str) -> list[str]:
    """Terminate ``ids`` and drop the ones that went from ``inv``; returns the ids that failed."""
    if not ids:
        return []
    failed = ec2.terminate(ids, why)
    inv.drop(i for i in ids if i not in failed)
    return failed


def launch(
    ec2: Ec2,
    state: StateDir,
    group: NodeGroup,
    batch: list[str],
    inv: Inventory,
    addresses: list[tuple[str, str]],
    failures: dict[str, tuple[str, str]],
    naming: tuple[NodeMapPublisher, NameBook, float] | None = None,
) -> int:
    """Launch one instance per node of ``batch`` (at most one fleet's worth) and name them.

    Naming: with ``naming`` (publisher, name book, now), one PutObject of the batch's node map and an
    entry per instance in the name book, no EC2 call per instance (the tags come later, ``names.py``);
    without it, or if S3 refuses the map, a CreateTags per instance as before.
    Appends the (node, address) pairs it learns to ``addresses`` and ``(code, message)`` for each
    node left without an instance to ``failures``; returns how many instances got their node name."""
    token = uuid.uuid4().hex
    log.info("decision launch group=%s token=%s count=%d nodes=%s", group.name, token, len(batch), fmt_nodes(batch))
    state.journal_begin(token, group.name, batch)
    result = ec2.create_fleet(group, len(batch), token, batch)
    ids = result.instance_ids[: len(batch)]
    extra = result.instance_ids[len(batch) :]
    assignments = dict(zip(ids, batch))
    state.journal_assign(token, assignments)
    # A lost answer may hide launched instances: keep the journal so the next call's sweep finds
    # and terminates them (they carry this launch token) instead of waiting out the grace period.
    clean = not result.uncertain
    if extra:
        log.error("CreateFleet returned %d more instances than asked; terminating %s", len(extra), ",".join(extra))
        clean = not ec2.terminate(extra, "surplus", fresh=True) and clean
    tag_failed: dict[str, str] = {}
    if assignments and naming is not None and naming[0].publish(token, group.name, assignments):
        naming[1].add(assignments, naming[2])
    elif assignments:
        tag_failed = ec2.tag_nodes(assignments)
    if tag_failed:
        bad = sorted(tag_failed)
        log.info("decision terminate instances=%s: could not tag them with their node", ",".join(bad))
        left = ec2.terminate(bad, "untaggable", fresh=True)
        for iid in bad:
            fate = "not terminated yet, the next agent call retries" if iid in left else "terminated"
            failures[assignments[iid]] = (f"CreateTags.{tag_failed[iid]}", f"instance {iid} {fate}")
        clean = not left and clean
    tagged = {iid: node for iid, node in assignments.items() if iid not in tag_failed}
    described: dict[str, Instance] = {}
    if tagged:
        try:
            described = ec2.describe_launch(token, list(tagged))
        except AWS_ERRORS as exc:
            log.error("api DescribeInstances launch-token=%s failed: %s; node addresses left to slurmd", token, exc)
    for iid, node in tagged.items():
        inst = described.get(iid)
        if inst is None:
            log.warning("instance %s of node %s not visible yet; node address left to slurmd registration", iid, node)
            continue
        inv.put(inst)
        inv.tag_node(iid, node)
        if inst.private_ip:
            addresses.append((node, inst.private_ip))
    if len(ids) < len(batch):
        ice = [e for e in result.errors if e[0] in ICE_CODES]
        code, msg = (ice or result.errors or [("NoInstanceReturned", "CreateFleet returned fewer instances")])[0]
        for node in batch[len(ids) :]:
            failures[node] = (code, msg)
    if clean:
        state.journal_end(token)
    return len(tagged)
