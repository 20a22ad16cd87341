"""The cluster in a dozen lines, at the top of every plan: scheduler, nodes × instance type per node group,
GPUs, EFA per node, zones, partitions or node groups, storage, cost and region.

A reviewer otherwise assembles this from the tree, the estimate and ``slurm.conf``. It is computed from the
plan JSON (:func:`gpucluster.tools.plan.run.json.to_json`), not from the live :class:`Plan`, so a saved
``--json`` plan summarizes the same way and the PR comment can reuse :func:`markdown`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gpucluster.config.storage.sizing import delivered_mbps
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.tools.plan.diff.teams import summary_row
from gpucluster.tools.plan.show.people import people
from gpucluster.tools.plan.show.people import rows as people_rows
from gpucluster.tools.plan.show.program_estimate import plan_estimate

HOURS_PER_MONTH = 730
"""The month the estimate's monthly figures use (AWS's pricing pages and Infracost use 730 h too)."""

LT = "aws:ec2/launchTemplate:LaunchTemplate"
ASG = "aws:autoscaling/group:Group"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
BUCKET = "aws:s3/bucket:Bucket"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
NODE_GROUP_TAG = "gpucluster:node-group"


@dataclass(frozen=True)
class GroupSummary:
    """One node group: how many of which instance, with what GPUs, EFA and zones, and its role."""

    name: str
    instance_type: str
    desired: int | None
    max: int | None
    gpus_per_node: int
    gpu_model: str | None
    efa_per_node: int
    zones: tuple[str, ...]
    role: str = ""
    """How the scheduler uses the group: a Slurm partition's mode, an EKS node group, a plain ASG."""


@dataclass(frozen=True)
class Summary:
    stack: str
    region: str | None
    scheduler: str
    groups: tuple[GroupSummary, ...] = ()
    zones: tuple[str, ...] = ()
    storage: tuple[str, ...] = ()
    usd_per_hour: float | None = None
    usd_per_hour_at_max: float | None = None
    usd_per_month: float | None = None
    usd_per_month_at_max: float | None = None
    kw: float | None = None
    kw_at_max: float | None = None
    unpriced: tuple[str, ...] = ()
    """The estimate's lines without a price, left out of the dollar figures."""
    error: str | None = None
    extra: tuple[tuple[str, str], ...] = field(default=())
    """Scheduler-specific lines (label, text): the Slurm controller, the EKS version and endpoint."""

    @property
    def gpus_now(self) -> int:
        return sum(g.gpus_per_node * (g.desired or 0) for g in self.groups)

    @property
    def gpus_at_max(self) -> int:
        return sum(g.gpus_per_node * (g.max or 0) for g in self.groups)


# --- reading the plan JSON -------------------------------------------------------------------------------


def _tags(r: dict[str, Any]) -> dict[str, Any]:
    tags = r.get("inputs", {}).get("tags") or {}
    if isinstance(tags, list):  # an Auto Scaling group's tags are a list of {key, value, propagateAtLaunch}
        return {str(t.get("key")): t.get("value") for t in tags if isinstance(t, dict)}
    return tags if isinstance(tags, dict) else {}


def _of_type(doc: dict[str, Any], token: str) -> list[dict[str, Any]]:
    return [r for r in doc.get("resources", []) if r.get("type") == token]


def _by_group(doc: dict[str, Any], token: str) -> dict[str, dict[str, Any]]:
    return {str(_tags(r)[NODE_GROUP_TAG]): r for r in _of_type(doc, token) if _tags(r).get(NODE_GROUP_TAG)}


def _agent_subnets(doc: dict[str, Any]) -> dict[str, list[str]]:
    """Subnets of Slurm groups the node agent launches itself (dynamic groups have no Auto Scaling group): from the
    head node's agent config, or for a hybrid site's agent from the ``hybrid`` output its bundle is made of."""
    out: dict[str, list[str]] = {}
    hybrid = (doc.get("outputs") or {}).get("hybrid")
    slurm = hybrid.get("slurm") if isinstance(hybrid, dict) else None
    groups = slurm.get("burstNodeGroups") if isinstance(slurm, dict) else None
    for name, g in (groups or {}).items() if isinstance(groups, dict) else ():
        if isinstance(g, dict):
            out[str(name)] = [str(s) for s in g.get("subnetIds") or []]
    for path, text in (doc.get("files") or {}).items():
        if not path.endswith("/etc/gpucluster/agent.json"):
            continue
        try:
            agent = json.loads(text)
        except json.JSONDecodeError:
            continue
        for g in agent.get("node_groups") or []:
            out[str(g.get("name"))] = [str(s) for s in g.get("subnet_ids") or []]
    return out


def _agent_modes(doc: dict[str, Any]) -> dict[str, str]:
    """``{group: mode}`` of the groups in the plan's node agent configs (a program of your own exports no ``slurm``)."""
    out: dict[str, str] = {}
    for path, text in (doc.get("files") or {}).items():
        if path.endswith("/etc/gpucluster/agent.json"):
            try:
                agent = json.loads(text)
            except json.JSONDecodeError:
                continue
            out.update({str(g.get("name")): str(g.get("mode")) for g in agent.get("node_groups") or [] if isinstance(g, dict)})
    return out


def _efa(lt: dict[str, Any] | None) -> int:
    nics = (lt or {}).get("inputs", {}).get("networkInterfaces") or []
    return sum(1 for n in nics if str(n.get("interfaceType", "")).startswith("efa"))


def summarize(doc: dict[str, Any], catalog: Catalog | None = None) -> Summary:
    """The :class:`Summary` of a plan JSON (``gpucluster plan --json``): of the stack program, or of any program that
    uses gpucluster's components (its estimate then comes from its resources:
    :mod:`~gpucluster.tools.plan.show.program_estimate`)."""
    outputs = doc.get("outputs") or {}
    if doc.get("error"):
        return Summary(stack=str(doc.get("stack")), region=doc.get("region"), scheduler="unknown", error=str(doc["error"]))
    catalog = catalog if catalog is not None else load_catalog()
    est = plan_estimate(doc, catalog)
    groups = _groups(doc, est, catalog)
    scheduler, extra = _scheduler(doc, groups)
    return Summary(
        stack=str(doc.get("stack")),
        region=doc.get("region"),
        scheduler=scheduler,
        groups=tuple(groups),
        zones=tuple(sorted({z for g in groups for z in g.zones})),
        storage=tuple(_storage(doc, outputs)),
        usd_per_hour=est.get("usdPerHour"),
        usd_per_hour_at_max=est.get("usdPerHourAtMax"),
        usd_per_month=_monthly(est, "usdPerMonth", "usdPerHour"),
        usd_per_month_at_max=_monthly(est, "usdPerMonthAtMax", "usdPerHourAtMax"),
        kw=est.get("kw"),
        kw_at_max=est.get("kwAtMax"),
        unpriced=tuple(str(n) for n in est.get("unpriced") or ()),
        extra=tuple(extra),
    )


def _groups(doc: dict[str, Any], est: dict[str, Any], catalog: Catalog) -> list[GroupSummary]:
    """One line's facts per node group of the estimate: zones from its subnets, its role in the scheduler."""
    outputs = doc.get("outputs") or {}
    zone_of = {r.get("id"): str(r["inputs"].get("availabilityZone")) for r in _of_type(doc, SUBNET)}
    lts, asgs, mngs = _by_group(doc, LT), _by_group(doc, ASG), _by_group(doc, EKS_NODE_GROUP)
    agent_subnets, agent_modes = _agent_subnets(doc), _agent_modes(doc)
    slurm = outputs.get("slurm") if isinstance(outputs.get("slurm"), dict) else None
    partitions = (slurm or {}).get("partitions") or {}
    partition_of = {str(p.get("nodeGroup")): (name, p) for name, p in partitions.items() if isinstance(p, dict)}
    groups: list[GroupSummary] = []
    for g in est.get("nodeGroups", []):
        name = str(g.get("nodeGroup"))
        facts = catalog.get(str(g.get("instanceType")))
        subnets: list[str] = list((asgs.get(name) or {}).get("inputs", {}).get("vpcZoneIdentifiers") or [])
        subnets += (mngs.get(name) or {}).get("inputs", {}).get("subnetIds") or []
        subnets += agent_subnets.get(name, [])
        role = ""
        if name in partition_of:
            pname, p = partition_of[name]
            role = f"partition {pname} ({p.get('mode')}{', default' if p.get('default') else ''})"
        elif name in mngs:
            role = f"EKS node group {mngs[name]['inputs'].get('nodeGroupName')}"
        elif name in agent_modes:  # a SlurmCluster of a program of your own (no `slurm` output to name partitions)
            how = "an Auto Scaling group" if name in asgs else "launched by the node agent"
            role = f"Slurm {agent_modes[name]} group ({how})"
        elif name in asgs:
            role = "Auto Scaling group"
        groups.append(
            GroupSummary(
                name=name,
                instance_type=str(g.get("instanceType")),
                desired=g.get("desired"),
                max=g.get("max"),
                gpus_per_node=facts.gpu_count if facts else int(g.get("acceleratorsPerNode") or 0),
                gpu_model=facts.gpus[0].model if facts and facts.gpus else None,
                efa_per_node=_efa(lts.get(name)),
                zones=tuple(sorted({zone_of[s] for s in subnets if s in zone_of})),
                role=role,
            )
        )
    return groups


def _scheduler(doc: dict[str, Any], groups: list[GroupSummary]) -> tuple[str, list[tuple[str, str]]]:
    """The scheduler line and its extra rows: Slurm's controller, EKS's system nodes and teams."""
    outputs = doc.get("outputs") or {}
    slurm = outputs.get("slurm") if isinstance(outputs.get("slurm"), dict) else None
    kubernetes = outputs.get("kubernetes") if isinstance(outputs.get("kubernetes"), dict) else None
    extra: list[tuple[str, str]] = []
    if slurm or _of_type(doc, "gpucluster:index:SlurmCluster"):  # a program of your own may export no `slurm`
        if slurm:
            hybrid = outputs.get("hybrid")
            site = hybrid.get("site") if isinstance(hybrid, dict) else None
            where = f"site {site}'s own slurmctld, no head node" if site else f"head node {_head_type(doc)}"
            extra.append(("controller", f"{slurm.get('controller')} ({where})"))
        extra += people_rows(people(doc))
        teams = summary_row(doc.get("files") or {})
        if teams:
            extra.append(teams)
        return "Slurm", extra
    if kubernetes or _of_type(doc, "aws:eks/cluster:Cluster"):
        lts, mngs = _by_group(doc, LT), _by_group(doc, EKS_NODE_GROUP)
        for name, mng in sorted(mngs.items()):
            if name not in {g.name for g in groups}:
                sc = mng["inputs"].get("scalingConfig") or {}
                lt = lts.get(name, {}).get("inputs", {})
                extra.append(("system", f"{name}: {sc.get('desiredSize')} × {lt.get('instanceType')} (max {sc.get('maxSize')})"))
        teams = sorted(((kubernetes or {}).get("teams") or {}).keys())
        if teams:
            extra.append(("teams", ", ".join(teams) + " (a namespace and a Kueue queue each)"))
        return f"Kubernetes {(kubernetes or {}).get('version', '')} on EKS".replace("  ", " "), extra
    return "none (Auto Scaling groups)", extra


def _monthly(est: dict[str, Any], key: str, hourly_key: str) -> float | None:
    """The estimate's monthly figure where it has one, else 730 × its hourly figure."""
    if est.get(key) is not None:
        return float(est[key])
    hourly = est.get(hourly_key)
    return None if hourly is None else round(float(hourly) * HOURS_PER_MONTH, 2)


def _head_type(doc: dict[str, Any]) -> str:
    heads = [r for r in _of_type(doc, "aws:ec2/instance:Instance") if str(r.get("name", "")).endswith("-head")]
    return str(heads[0]["inputs"].get("instanceType")) if heads else "unknown"


def _lustre_line(where: str, size: Any, fs: dict[str, Any], efa: bool) -> str:
    tput = fs.get("perUnitStorageThroughput")
    parts = [f"FSx for Lustre {where}", f"{size:,} GiB" if isinstance(size, int) else "attached"]
    if fs.get("deploymentType"):
        parts.append(str(fs["deploymentType"]))
    if isinstance(tput, int) and isinstance(size, int):
        parts.append(f"{tput} MB/s/TiB ({delivered_mbps(size, tput):,.0f} MB/s)")
    parts.append("EFA" if efa else "no EFA")
    return " · ".join(parts)


def _storage(doc: dict[str, Any], outputs: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    fsx = {r.get("id"): r.get("inputs", {}) for r in _of_type(doc, LUSTRE)}
    if "storage" not in outputs:  # a program of your own: its file systems as it creates them
        for r in _of_type(doc, LUSTRE):
            fs = r.get("inputs", {})
            lines.append(_lustre_line(str(r.get("name")), fs.get("storageCapacity"), fs, bool(fs.get("efaEnabled"))))
    for s in outputs.get("storage") or []:
        if not isinstance(s, dict):
            continue
        if s.get("type") == "lustre":
            fs = fsx.get(s.get("fileSystemId"), {})
            lines.append(
                _lustre_line(str(s.get("mountPoint")), s.get("capacityGiB") or fs.get("storageCapacity"), fs, bool(s.get("efa")))
            )
        elif s.get("type") == "nvme":
            lines.append(f"instance-store NVMe RAID 0 at {s.get('mountPoint')} on each node")
        else:
            lines.append(f"{s.get('type')} at {s.get('mountPoint')}")
    for b in _of_type(doc, BUCKET):
        i = b.get("inputs", {})
        name = i.get("bucket") or f"{i.get('bucketPrefix')}…, set by AWS at create"
        lines.append(f"S3 bucket {b.get('name')} (name {name})")
    return lines


# --- showing it ------------------------------------------------------------------------------------------


def money(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.2f}"


def _month(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.0f}"


def _kw(v: float | None) -> str:
    return "unknown" if v is None else f"{v:,.1f} kW"


def _unpriced(s: Summary) -> str:
    """The lines the dollar figures leave out, counted (each is named in the Estimate section, with its fix)."""
    n = len(s.unpriced)
    return f" · plus {n} unpriced line{'s' if n > 1 else ''} ({', '.join(s.unpriced)}; see Estimate)" if n else ""


def _count(g: GroupSummary) -> str:
    if g.desired == g.max:
        return f"{g.desired} × {g.instance_type}"
    return f"{g.desired} × {g.instance_type} now, max {g.max}"


def _group_text(g: GroupSummary) -> str:
    gpus = f"{g.gpus_per_node} × {g.gpu_model}" if g.gpu_model else "no GPU"
    efa = f"{g.efa_per_node} EFA" if g.efa_per_node else "no EFA"
    zones = ", ".join(g.zones) or "zones unknown"
    role = f" · {g.role}" if g.role else ""
    return f"{g.name}: {_count(g)} · {gpus} per node · {efa} · {zones}{role}"


def _gpu_totals(s: Summary) -> str:
    models: dict[str, int] = {}
    for g in s.groups:
        if g.gpu_model:
            models[g.gpu_model] = models.get(g.gpu_model, 0) + g.gpus_per_node * (g.max or 0)
    detail = ", ".join(f"{n} {m}" for m, n in models.items())
    return f"{s.gpus_now} now, {s.gpus_at_max} at max size" + (f" ({detail} at max)" if detail else "")


def rows(s: Summary) -> list[tuple[str, str]]:
    """(label, text) rows, shared by the text and the markdown form."""
    if s.error:
        return [("stack", s.stack), ("region", str(s.region)), ("config", "invalid: `pulumi up` would stop (below)")]
    out: list[tuple[str, str]] = [("scheduler", s.scheduler), *[(k, v) for k, v in s.extra if k == "controller"]]
    for n, g in enumerate(s.groups):
        out.append(("nodes" if n == 0 else "", _group_text(g)))
    if not s.groups:
        out.append(("nodes", "none"))
    out += [(k, v) for k, v in s.extra if k != "controller"]
    out.append(("GPUs", _gpu_totals(s)))
    out.append(("zones", f"{', '.join(s.zones) or 'unknown'} (region {s.region})"))
    for n, line in enumerate(s.storage or ("none",)):
        out.append(("storage" if n == 0 else "", line))
    out.append(
        (
            "cost",
            f"{money(s.usd_per_hour)}/h now, {money(s.usd_per_hour_at_max)}/h at max size · "
            f"≈ {_month(s.usd_per_month)} and {_month(s.usd_per_month_at_max)} a month ({HOURS_PER_MONTH} h) · "
            f"{_kw(s.kw)} and {_kw(s.kw_at_max)}" + _unpriced(s),
        )
    )
    return out


def text_lines(s: Summary) -> list[str]:
    """The summary for the text plan: a heading, then one aligned row per fact."""
    return [f"  {label:<10} {text}" for label, text in rows(s)]


def markdown(s: Summary) -> str:
    """The summary as a two-column GitHub markdown table (for the PR comment)."""
    lines = [f"**Cluster `{s.stack}`**", "", "| | |", "|---|---|"]
    for label, text in rows(s):
        lines.append(f"| {label} | {text.replace('|', '&#124;')} |")
    return "\n".join(lines) + "\n"
