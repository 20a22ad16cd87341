"""A Mermaid picture of the cluster a plan builds: the VPC and its zones, each node group as
``count × instance type``, the head node or EKS control plane, FSx for Lustre (and its storage setup host) and the
buckets.

GitHub renders a ```` ```mermaid ```` block in a pull-request comment, so the reviewer sees the shape of the
cluster next to its diff. Read from the plan JSON's inputs only, so it needs no credentials."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpucluster.tools.plan.diff.disruption import group_name, size
from gpucluster.tools.plan.show.program_estimate import plan_estimate

VPC = "aws:ec2/vpc:Vpc"
SUBNET = "aws:ec2/subnet:Subnet"
ASG = "aws:autoscaling/group:Group"
EKS_NODES = "aws:eks/nodeGroup:NodeGroup"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
ENI = "aws:ec2/networkInterface:NetworkInterface"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
BUCKET = "aws:s3/bucket:Bucket"
EKS = "aws:eks/cluster:Cluster"


def _id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def _label(text: str) -> str:
    return text.replace('"', "#quot;")


def _list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def _group_label(r: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]]) -> tuple[str, list[str]]:
    inputs = r.get("inputs") or {}
    template = templates.get(str((inputs.get("launchTemplate") or {}).get("id")), {})
    types = _list(inputs.get("instanceTypes")) or _list(template.get("instanceType")) or ["?"]
    count = size(r)
    biggest = inputs.get("maxSize", (inputs.get("scalingConfig") or {}).get("maxSize"))
    upto = f" (max {biggest})" if isinstance(biggest, int) and biggest != count else ""
    subnets = _list(inputs.get("vpcZoneIdentifiers")) or _list(inputs.get("subnetIds"))
    return f"{group_name(r)}: {'?' if count is None else count} × {', '.join(types)}{upto}", subnets


def cluster_mermaid(plan: Mapping[str, Any]) -> str:
    """The ```` ```mermaid ```` block for ``plan`` (a plan JSON); empty when it creates no VPC or nodes."""
    resources = [r for r in plan.get("resources", []) if r.get("custom", True)]
    of = {
        t: [r for r in resources if r["type"] == t] for t in (VPC, SUBNET, ASG, EKS_NODES, LT, INSTANCE, ENI, LUSTRE, BUCKET, EKS)
    }
    zone_of = {str(r.get("id")): str((r.get("inputs") or {}).get("availabilityZone", "?")) for r in of[SUBNET]}
    templates = {str(r.get("id")): r.get("inputs") or {} for r in of[LT]}
    eni_subnet = {str(r.get("id")): str((r.get("inputs") or {}).get("subnetId")) for r in of[ENI]}
    by_zone: dict[str, list[str]] = {z: [] for z in sorted(set(zone_of.values()))}
    loose: list[str] = []

    def place(node: str, subnets: list[str]) -> None:
        zones = sorted({zone_of[s] for s in subnets if s in zone_of})
        (by_zone[zones[0]] if len(zones) == 1 else loose).append(node)

    for r in of[ASG] + of[EKS_NODES]:
        label, subnets = _group_label(r, templates)
        place(f'{_id(r["name"])}["{_label(label)}"]', subnets)
    shown = {group_name(r) for r in of[ASG] + of[EKS_NODES]}
    estimate = plan_estimate(plan)
    for g in estimate.get("nodeGroups") or []:  # groups without an Auto Scaling group: Slurm launches them
        if isinstance(g, Mapping) and g.get("nodeGroup") not in shown:
            label = f"{g.get('nodeGroup')}: 0–{g.get('max')} × {g.get('instanceType')} (launched by Slurm)"
            loose.append(f'{_id("group_" + str(g.get("nodeGroup")))}["{_label(label)}"]')
    for r in of[INSTANCE]:
        inputs = r.get("inputs") or {}
        subnets = [eni_subnet.get(str(n.get("networkInterfaceId")), "") for n in inputs.get("networkInterfaces") or []]
        role = "storage setup host" if str(r["name"]).endswith("-lustre-setup") else "head node"  # LustreStorage's admin host
        place(
            f'{_id(r["name"])}["{role} {r["name"]}: {inputs.get("instanceType", "?")}"]',
            subnets + _list(inputs.get("subnetId")),
        )
    for r in of[LUSTRE]:
        inputs = r.get("inputs") or {}
        efa = ", EFA" if inputs.get("efaEnabled") else ""
        label = f"FSx for Lustre {inputs.get('storageCapacity', '?')} GiB {inputs.get('deploymentType', '')}{efa}"
        place(f'{_id(r["name"])}[("{_label(label.strip())}")]', _list(inputs.get("subnetIds")))
    if not (of[VPC] or by_zone or loose):
        return ""
    lines = ["```mermaid", "flowchart TB"]
    vpc = (of[VPC][0].get("inputs") or {}).get("cidrBlock", "") if of[VPC] else ""
    lines.append(f'  subgraph vpc["VPC {_label(str(vpc))}"]' if of[VPC] else '  subgraph vpc["your VPC"]')
    for zone, nodes in by_zone.items():
        lines.append(f'    subgraph {_id("zone_" + zone)}["{_label(zone)}"]')
        lines += [f"      {n}" for n in nodes] or [f'      {_id("empty_" + zone)}[" "]']
        lines.append("    end")
    lines += [f"    {n}" for n in loose]
    lines.append("  end")
    for r in of[EKS]:
        version = (r.get("inputs") or {}).get("version", "")
        lines.append(f'  {_id(r["name"])}{{{{"EKS control plane {_label(str(version))}"}}}}')
    for r in of[BUCKET]:
        lines.append(f'  {_id(r["name"])}[("S3 bucket {_label(r["name"])}")]')
    lines.append("```")
    return "\n".join(lines)
