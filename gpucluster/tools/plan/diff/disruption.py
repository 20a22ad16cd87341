"""Which changes disrupt running work, said as a sentence a reviewer can weigh.

A step's ``disruption`` lists what happens to running instances: a node group whose instances are
replaced or terminated (an Auto Scaling group or EKS node group replaced, removed or shrunk), an EKS
node group rolled onto a new launch template version, the Slurm head node restarted (pulumi-aws stops
and starts an instance to change its type or user data) or replaced. Auto Scaling groups take a new
launch template version for the nodes they launch from then on; running ones keep theirs, so that is
a note, not a disruption. The offline plan cannot see a template's version number move (the mock
engine answers ``1``), so a template that changes marks the groups that use it as updated here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gpucluster.tools.plan.diff.safety import safety_of
from gpucluster.tools.plan.diff.step import Step

ASG = "aws:autoscaling/group:Group"
EKS_NODES = "aws:eks/nodeGroup:NodeGroup"
INSTANCE = "aws:ec2/instance:Instance"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
RESTARTS = ("instanceType", "userData", "userDataBase64")
RECIPE = "aws:imagebuilder/imageRecipe:ImageRecipe"
AGENT_CONFIG = "/etc/gpucluster/agent.json"
"""The Slurm node agent's config in the head node's files: its ``updates`` say how a roll proceeds."""


def _inputs(doc: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (doc or {}).get("inputs") or {}


def group_name(doc: Mapping[str, Any] | None) -> str:
    """The gpucluster node group a Auto Scaling group / EKS node group belongs to (its tag), else its name."""
    tags = _inputs(doc).get("tags")
    if isinstance(tags, list):
        tags = {t.get("key"): t.get("value") for t in tags if isinstance(t, Mapping)}
    if isinstance(tags, Mapping) and tags.get("gpucluster:node-group"):
        return str(tags["gpucluster:node-group"])
    return str((doc or {}).get("name", "?"))


def size(doc: Mapping[str, Any] | None) -> int | None:
    """Running nodes a group keeps (desired capacity)."""
    inputs = _inputs(doc)
    value = inputs.get("desiredCapacity", (inputs.get("scalingConfig") or {}).get("desiredSize"))
    return value if isinstance(value, int) else None


def _nodes(n: int | None) -> str:
    return "its nodes" if n is None else f"the {n} instance{'s' if n != 1 else ''}"


def _group(step: Step) -> None:
    doc = step.old or step.new
    name, before, after = group_name(doc), size(step.old), size(step.new)
    if step.op == "replace":
        step.disruption.append(f"replaces {_nodes(before)} of node group {name} (forced by {step.because()})")
    elif step.op == "delete":
        what = "its nodes are" if before is None else f"its {before} running node{'s are' if before != 1 else ' is'}"
        step.disruption.append(f"removes node group {name}: {what} terminated")
    elif step.op == "update" and before is not None and after is not None and after < before:
        gone = before - after
        step.disruption.append(
            f"shrinks {name} from {before} to {after} nodes: {gone} running node{'s' if gone != 1 else ''} terminated"
        )


HEAD_ROLE = ("gpucluster:role", "head")
"""The tag the Slurm head node carries (components/slurm/_head_node.py): other instances are not the controller."""


def _is_head(step: Step) -> bool:
    tags = _inputs(step.new or step.old).get("tags")
    return isinstance(tags, Mapping) and tags.get(HEAD_ROLE[0]) == HEAD_ROLE[1]


def _head(step: Step) -> None:
    head = _is_head(step)
    what = f"the head node {step.name}" if head else f"instance {step.name}"
    if step.op == "replace":
        step.disruption.append(
            f"replaces {what} (forced by {step.because()}): "
            + (
                "the Slurm controller is down until the new instance has booted, and running jobs lose their controller"
                if head
                else "a new instance boots from the new user data"
            )
        )
    elif step.op == "update":
        props = sorted({p for p in step.diff_reasons if p in RESTARTS})
        if props:
            step.disruption.append(
                f"restarts {what} to change {', '.join(props)} (stop and start)"
                + (": the Slurm controller is down meanwhile" if head else "")
            )


def _base_images(steps: Sequence[Step]) -> dict[str, tuple[str, str]]:
    """``{group: (old base AMI, new base AMI)}`` of each baked group whose image recipe starts from another base image:
    the image a person chose (or locked), where the launch template shows only the baked image's id."""
    out: dict[str, tuple[str, str]] = {}
    for s in steps:
        if s.type == RECIPE and s.old is not None and s.new is not None:
            before, after = _inputs(s.old).get("parentImage"), _inputs(s.new).get("parentImage")
            if before and after and before != after:
                out[group_name(s.new)] = (str(before), str(after))
    return out


def roll_policy(files: Mapping[str, str]) -> Mapping[str, Any] | None:
    """The ``updates`` of the Slurm node agent's config among the plan's files (the head node's), or None."""
    text = next((t for path, t in files.items() if path.endswith(AGENT_CONFIG)), None)
    try:
        updates = json.loads(text).get("updates") if text else None
    except (ValueError, AttributeError):
        return None
    return updates if isinstance(updates, Mapping) else None


def _how_it_rolls(group: str, updates: Mapping[str, Any]) -> str:
    """How the node agent rolls ``group``: its share, its window, the re-baseline that goes first."""
    window = updates.get("maintenance_window")
    parts = [
        f"at most {updates.get('max_drained_percent')} % of the group drained at a time, each node once idle",
        f"inside the maintenance window {window}" if window else "at any hour (no maintenance window)",
    ]
    baseline = updates.get("baseline")
    if isinstance(baseline, Mapping) and group in (baseline.get("groups") or []):
        parts.append(
            f"first {baseline.get('nodes')} nodes measured for {baseline.get('duration_minutes')} min against the last "
            "good image (the roll stops if the new one is slower)"
        )
    return "; ".join(parts)


def _image_change(
    step: Step, consumers: Sequence[Step], bases: Mapping[str, tuple[str, str]], updates: Mapping[str, Any] | None
) -> None:
    """A launch template that names a new AMI: said as what it is (the base image that changed, for a baked group),
    with the nodes that will roll onto it (a group's desired size; a Slurm group the agent launches has no size the plan
    knows: its running nodes) and, for a Slurm group, how the node agent rolls it."""
    before, after = _inputs(step.old).get("imageId"), _inputs(step.new).get("imageId")
    if step.op != "update" or not before or not after or before == after:
        return
    sizes = [n for n in (size(c.new) for c in consumers) if n is not None]
    group = group_name(step.new)
    if sizes:
        count = sum(sizes)
        nodes = f"{count} running node{'s' if count != 1 else ''} will roll"
    else:
        nodes = "its running nodes will roll (the node agent replaces them a share at a time)"
    image = (
        f"base image {bases[group][0]} → {bases[group][1]} (baked: {before} → {after})"
        if group in bases
        else (f"image {before} → {after}")
    )
    how = f": {_how_it_rolls(group, updates)}" if updates is not None else ""
    step.disruption.append(f"{group}: {image}, {nodes}{how}")


def _template_rollout(
    step: Step, consumers: Sequence[Step], bases: Mapping[str, tuple[str, str]], updates: Mapping[str, Any] | None
) -> None:
    if step.op != "update":
        return
    _image_change(step, consumers, bases, updates)
    for consumer in consumers:
        if consumer.op == "same":
            consumer.op = "update"
            consumer.changed = ["launchTemplate.version"]
            consumer.diff_reasons = ["launchTemplate"]
        name, n = group_name(consumer.new), size(consumer.new)
        if consumer.type == EKS_NODES and consumer.op == "update":
            update = _inputs(consumer.new).get("updateConfig") or {}
            at_once = (
                f"{update['maxUnavailablePercentage']} %"
                if "maxUnavailablePercentage" in update
                else update.get("maxUnavailable", 1)
            )
            consumer.disruption.append(
                f"rolls node group {name} onto the new version of launch template {step.name}: "
                f"{_nodes(n)} are replaced, {at_once} at a time"
            )
        elif consumer.type == ASG:
            consumer.notes.append(
                f"a new version of launch template {step.name}: nodes launched from now on use it, "
                f"{'running nodes' if n is None else f'the {n} running nodes'} keep the old one until replaced"
            )


def add_disruption(steps: Sequence[Step], files: Mapping[str, str] | None = None) -> None:
    """Fill ``disruption`` (and the notes of groups on a changed launch template) of every step; ``files``, the new
    plan's rendered files, say how the Slurm node agent rolls a group onto a new image."""
    bases, updates = _base_images(steps), roll_policy(files or {})
    by_template: dict[str, list[Step]] = {}
    for s in steps:
        if s.type in (ASG, EKS_NODES) and s.new is not None:
            template = _inputs(s.new).get("launchTemplate") or {}
            if isinstance(template, Mapping) and template.get("id"):
                by_template.setdefault(str(template["id"]), []).append(s)
    for s in steps:
        if s.type == LT and s.new is not None:
            _template_rollout(s, by_template.get(str(s.new.get("id")), []), bases, updates)
    for s in steps:
        if s.type in (ASG, EKS_NODES):
            _group(s)
        elif s.type == INSTANCE:
            _head(s)
        elif s.op in ("replace", "delete"):
            verb = "replaces" if s.op == "replace" else "deletes"
            if s.type == "aws:ec2/placementGroup:PlacementGroup":
                s.disruption.append(f"{verb} placement group {s.name}: the instances in it must be terminated first")
            elif s.type == "aws:eks/cluster:Cluster":
                s.disruption.append(f"{verb} the EKS cluster {s.name}: every node and workload on it is rebuilt")
            elif s.type == "aws:ec2/capacityReservation:CapacityReservation":
                s.disruption.append(f"{verb} capacity reservation {s.name}: the reserved capacity is released")
            elif (entry := safety_of(s.type)) is not None and entry.disruption == "site-link":
                s.disruption.append(
                    f"{verb} {s.type.split(':')[-1]} {s.name}: the on-premises site is cut off (link or credentials) "
                    "until it is reconfigured from the new hybrid outputs"
                )
            elif s.type == "aws:ec2/volumeAttachment:VolumeAttachment":
                s.disruption.append(f"{verb} volume attachment {s.name}: the volume is detached from the running head node")
