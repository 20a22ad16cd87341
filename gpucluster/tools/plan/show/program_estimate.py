"""The estimate of any plan: the stack program's own (its ``estimate`` output, from the resolved config), else one
worked out from the resources a program of your own registered with gpucluster's components.

A program that uses the components as a library (``GpuNodeGroup``, ``LustreStorage``, ``SlurmCluster``,
``EksCluster`` …) exports no estimate, but its plan holds what one needs, as AWS would be asked for it:

- node groups: each Auto Scaling group (its sizes) on its launch template (the instance type; spot, a capacity
  block or a reservation from the market options and the reservation it targets), each EKS managed node group
  (its scaling config), and each group the Slurm node agent launches itself (its ``agent.json``: instance type,
  most nodes, capacity); named by the ``gpucluster:node-group`` tag. A reservation made in the same program
  bills its ``instanceCount``, one made elsewhere the group's maximum;
- fixed items, as the stack's estimate has them: NAT gateways, interface endpoints (one ENI per subnet), each
  FSx for Lustre file system made (capacity × the tier's price), the Slurm head node, its login nodes, their SSH
  load balancer and the OpenZFS home, the Secrets Manager secrets, Image Builder's builds (one per image, on the
  build infrastructure's instance type), a hybrid site's link (VPN connections, Transit Gateway attachments,
  Resolver endpoint ENIs), an EKS control plane and its system node group, monitoring at the desired and the
  maximum size.

Prices and power come from the same catalog and price book as the stack's estimate
(:mod:`gpucluster.resolve.cost.estimate`), so a stack's plan worked out this way gives the figures the stack exports
(tests/tools/plan/test_program_estimate.py holds every shipped stack to it)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from gpucluster.config.storage.sizing import USD_PER_GB_MONTH
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.facts.prices import REFERENCE_REGION, PriceBook, load_prices
from gpucluster.resolve.cost.estimate import (
    HOURS_PER_MONTH,
    Estimate,
    GroupEstimate,
    LineItem,
    group_price,
)
from gpucluster.resolve.cost.services import (
    EKS_CONTROL_PLANE_USD_PER_HOUR,
    INTERFACE_ENDPOINT_USD_PER_HOUR_PER_ZONE,
    NAT_GATEWAY_USD_PER_HOUR,
    image_builds_part,
    nlb_part,
    openzfs_part,
    secrets_part,
)
from gpucluster.tools.plan.show.program_services import hourly_line, hybrid_lines, list_price, monitoring_lines, of_type, tags

LT = "aws:ec2/launchTemplate:LaunchTemplate"
ASG = "aws:autoscaling/group:Group"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NODE_GROUP_TAG = "gpucluster:node-group"
SYSTEM_GROUP = "system"
"""The EKS system node group's tag value (components/kubernetes/_eks_node_groups.py): a fixed item, not a GPU group."""
HEAD_ROLE = ("gpucluster:role", "head")


def plan_estimate(doc: Mapping[str, Any], catalog: Catalog | None = None, prices: PriceBook | None = None) -> dict[str, Any]:
    """The estimate of a plan JSON, as :meth:`Estimate.as_dict` shapes it: the program's own ``estimate`` output
    where it has one, else the one worked out from its resources (``{}`` when nothing in it is priced)."""
    own = (doc.get("outputs") or {}).get("estimate")
    if isinstance(own, Mapping) and own:
        return dict(own)
    if doc.get("error"):
        return {}
    estimate = estimate_from_resources(doc, catalog, prices)
    return estimate.as_dict() if estimate.groups or estimate.fixed else {}


def estimate_from_resources(doc: Mapping[str, Any], catalog: Catalog | None = None, prices: PriceBook | None = None) -> Estimate:
    """Cost and power of what a plan JSON creates (see the module doc)."""
    catalog = catalog if catalog is not None else load_catalog()
    book = prices if prices is not None else load_prices()
    region = str(doc.get("region") or REFERENCE_REGION)
    order = {str(g.get("name")): n for n, g in enumerate(_agent_groups(doc))}  # a Slurm cluster's: the config's order
    found = sorted(_groups(doc), key=lambda g: order.get(g["name"], len(order)))
    groups = [_priced(g, catalog, book, region) for g in found]
    priced = tuple(g for g in groups if g is not None)
    fixed = (*_fixed(doc, catalog, book, region), *monitoring_lines(doc, priced, catalog, book, region))
    return Estimate(priced, fixed, region)


# --- node groups ----------------------------------------------------------------------------------------


def _capacity(lt: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(capacity type, reservation id)`` of a launch template, from its market options and reservation target."""
    inputs = lt.get("inputs") or {}
    market = str((inputs.get("instanceMarketOptions") or {}).get("marketType") or "")
    target = ((inputs.get("capacityReservationSpecification") or {}).get("capacityReservationTarget")) or {}
    reservation = target.get("capacityReservationId") or target.get("capacityReservationResourceGroupArn")
    if market in ("spot", "capacity-block"):
        return market, reservation
    return ("capacity-reservation", reservation) if reservation else ("on-demand", None)


def _group(name: str, instance_type: Any, desired: Any, maximum: Any, capacity: tuple[str, str | None]) -> dict[str, Any]:
    return {
        "name": name,
        "instanceType": str(instance_type or ""),
        "desired": int(desired or 0),
        "max": int(maximum or desired or 0),
        "capacity": capacity[0],
        "reservation": capacity[1],
    }


def _groups(doc: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The node groups of a plan, each once: Auto Scaling groups and EKS node groups, then the groups only the Slurm
    node agent launches (in its config)."""
    templates = {str(r.get("id")): r for r in of_type(doc, LT)}
    seen: set[str] = set()
    reserved = {
        str(r.get("id")): (r.get("inputs") or {}).get("instanceCount")
        for r in of_type(doc, "aws:ec2/capacityReservation:CapacityReservation")
    }
    for r in [*of_type(doc, ASG), *of_type(doc, EKS_NODE_GROUP)]:
        if tags(r).get(HEAD_ROLE[0]) == "login":
            continue  # a Slurm cluster's login nodes: a fixed item (:func:`_people`)
        inputs = r.get("inputs") or {}
        lt = templates.get(str((inputs.get("launchTemplate") or {}).get("id")), {})
        name = str(tags(r).get(NODE_GROUP_TAG) or tags(lt).get(NODE_GROUP_TAG) or r.get("name"))
        if r.get("type") == EKS_NODE_GROUP and name == SYSTEM_GROUP:
            continue  # a fixed item (:func:`_fixed`)
        instance_type = (lt.get("inputs") or {}).get("instanceType") or (inputs.get("instanceTypes") or [None])[0]
        if r.get("type") == ASG:
            sizes = (inputs.get("desiredCapacity", inputs.get("minSize")), inputs.get("maxSize"))
        else:
            scaling = inputs.get("scalingConfig") or {}
            sizes = (scaling.get("desiredSize"), scaling.get("maxSize"))
        seen.add(name)
        yield {**_group(name, instance_type, *sizes, _capacity(lt)), "reserved": reserved}
    for g in _agent_groups(doc):
        if str(g.get("name")) not in seen:
            capacity = g.get("capacity") or {}
            desired = g.get("max_nodes") if g.get("mode") == "static" else 0
            group = _group(
                str(g.get("name")),
                g.get("instance_type"),
                desired,
                g.get("max_nodes"),
                (str(capacity.get("type") or "on-demand"), capacity.get("reservation_id")),
            )
            seen.add(group["name"])
            yield {**group, "reserved": reserved}


def _agent_groups(doc: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The node groups of every Slurm node agent config the plan renders (``…/etc/gpucluster/agent.json``)."""
    for path, text in sorted((doc.get("files") or {}).items()):
        if path.endswith("/etc/gpucluster/agent.json"):
            try:
                agent = json.loads(text)
            except json.JSONDecodeError:
                continue
            yield from (g for g in agent.get("node_groups") or [] if isinstance(g, Mapping))


def _priced(g: Mapping[str, Any], catalog: Catalog, book: PriceBook, region: str) -> GroupEstimate | None:
    facts = catalog.get(g["instanceType"])
    if not g["instanceType"]:
        return None
    capacity = g["capacity"]
    quote = book.quote(g["instanceType"], region, capacity)
    price, source = group_price(capacity, quote)
    reserved = 0
    if capacity in ("capacity-reservation", "capacity-block"):
        count = g["reserved"].get(str(g["reservation"]))
        reserved = int(count) if isinstance(count, int) else g["max"]
    return GroupEstimate(
        node_group=g["name"],
        instance_type=g["instanceType"],
        desired=g["desired"],
        maximum=g["max"],
        usd_per_node_hour=price,
        price_source=source if price is not None else f"no list price for {g['instanceType']} in the catalog",
        kw_per_node=facts.estimated_power_kw if facts else None,
        accelerators_per_node=facts.accelerator_count if facts else 0,
        reserved=reserved,
        capacity_type=capacity,
        price_date=quote.date if price is not None else None,
    )


# --- fixed items ----------------------------------------------------------------------------------------


def _fixed(doc: Mapping[str, Any], catalog: Catalog, book: PriceBook, region: str) -> Iterator[LineItem]:
    nats = len(of_type(doc, "aws:ec2/natGateway:NatGateway"))
    if nats:
        what = "VPC pricing, per hour (data processed is extra)"
        yield hourly_line(f"{nats} NAT gateway(s)", nats, NAT_GATEWAY_USD_PER_HOUR, region, what, "nat-gateways")
    endpoints = [
        r
        for r in of_type(doc, "aws:ec2/vpcEndpoint:VpcEndpoint")
        if (r.get("inputs") or {}).get("vpcEndpointType") == "Interface"
    ]
    enis = sum(len((r.get("inputs") or {}).get("subnetIds") or []) for r in endpoints)
    if enis:
        what = "PrivateLink pricing, per endpoint per zone"
        yield hourly_line(
            f"{enis} interface endpoint ENIs", enis, INTERFACE_ENDPOINT_USD_PER_HOUR_PER_ZONE, region, what, "interface-endpoints"
        )
    yield from hybrid_lines(doc, region)
    for fs in of_type(doc, "aws:fsx/lustreFileSystem:LustreFileSystem"):
        inputs = fs.get("inputs") or {}
        size, tier = inputs.get("storageCapacity"), inputs.get("perUnitStorageThroughput")
        price = USD_PER_GB_MONTH.get(str(inputs.get("deploymentType")), {}).get(tier if isinstance(tier, int) else 0)
        usd = None if price is None or not isinstance(size, int) else round(size * price / HOURS_PER_MONTH, 2)
        yield LineItem(
            f"FSx for Lustre {size or '?'} GiB", usd, 0.0, list_price(region, "FSx pricing, per GB-month / 730"), "fsx-lustre"
        )
    for head in of_type(doc, "aws:ec2/instance:Instance"):
        if tags(head).get(HEAD_ROLE[0]) == HEAD_ROLE[1]:
            instance_type = str((head.get("inputs") or {}).get("instanceType"))
            facts, quote = catalog.get(instance_type), book.quote(instance_type, region)
            kw = round(facts.estimated_power_kw or 0.0, 2) if facts else 0.0
            yield LineItem(
                f"Slurm head node {instance_type}",
                quote.usd_per_hour,
                kw,
                f"{quote.source}; its EBS volumes are extra",
                "slurm-head-node",
                quote.date,
            )
    yield from _people(doc, catalog, book, region)
    yield from _eks(doc, catalog, book, region)


def _people(doc: Mapping[str, Any], catalog: Catalog, book: PriceBook, region: str) -> Iterator[LineItem]:
    """A Slurm cluster's login nodes, their SSH load balancer and the OpenZFS home, as
    :mod:`gpucluster.resolve.cost.people` prices them (the last two: unknown, no price data)."""
    templates = {str(r.get("id")): r for r in of_type(doc, LT)}
    for asg in of_type(doc, ASG):
        if tags(asg).get(HEAD_ROLE[0]) != "login":
            continue
        inputs = asg.get("inputs") or {}
        lt = templates.get(str((inputs.get("launchTemplate") or {}).get("id")), {})
        instance_type, count = str((lt.get("inputs") or {}).get("instanceType")), int(inputs.get("desiredCapacity") or 0)
        facts, quote = catalog.get(instance_type), book.quote(instance_type, region)
        yield LineItem(
            f"Slurm login nodes {count} × {instance_type}",
            None if quote.usd_per_hour is None else round(quote.usd_per_hour * count, 3),
            round((facts.estimated_power_kw or 0.0) * count, 2) if facts else 0.0,
            f"{quote.source}; their EBS volumes are extra",
            "slurm-login-nodes",
            quote.date,
        )
    for nlb in of_type(doc, "aws:lb/loadBalancer:LoadBalancer"):
        inputs = nlb.get("inputs") or {}
        if inputs.get("loadBalancerType") == "network" and str(inputs.get("name", "")).endswith("-login"):
            yield LineItem(*nlb_part(book, region, "internal" if inputs.get("internal") is True else "internet-facing"))
    for fs in of_type(doc, "aws:fsx/openZfsFileSystem:OpenZfsFileSystem"):
        inputs = fs.get("inputs") or {}
        iops = inputs.get("diskIopsConfiguration") or {}
        provisioned = iops.get("iops") if iops.get("mode") == "USER_PROVISIONED" else None
        part = openzfs_part(
            book,
            region,
            deployment_type=str(inputs.get("deploymentType")),
            storage_gib=int(inputs.get("storageCapacity") or 0),
            throughput_mbps=int(inputs.get("throughputCapacity") or 0),
            provisioned_iops=int(provisioned) if isinstance(provisioned, int) else None,
            backup_days=int(inputs.get("automaticBackupRetentionDays") or 0),
        )
        yield LineItem(*part)
    secrets = len(of_type(doc, "aws:secretsmanager/secret:Secret"))
    if secrets:
        yield LineItem(*secrets_part(book, region, secrets))
    images = len(of_type(doc, "aws:imagebuilder/image:Image"))
    infra = of_type(doc, "aws:imagebuilder/infrastructureConfiguration:InfrastructureConfiguration")
    if images and infra:
        types = (infra[0].get("inputs") or {}).get("instanceTypes") or ["?"]
        yield LineItem(*image_builds_part(book, region, images, str(types[0])))


def _eks(doc: Mapping[str, Any], catalog: Catalog, book: PriceBook, region: str) -> Iterator[LineItem]:
    if not of_type(doc, "aws:eks/cluster:Cluster"):
        return
    yield LineItem(
        "EKS control plane",
        EKS_CONTROL_PLANE_USD_PER_HOUR,
        0.0,
        list_price(region, "EKS pricing, standard support"),
        "eks-control-plane",
    )
    templates = {str(r.get("id")): r for r in of_type(doc, LT)}
    for mng in of_type(doc, EKS_NODE_GROUP):
        if tags(mng).get(NODE_GROUP_TAG) != SYSTEM_GROUP:
            continue
        inputs = mng.get("inputs") or {}
        lt = templates.get(str((inputs.get("launchTemplate") or {}).get("id")), {})
        instance_type = str((lt.get("inputs") or {}).get("instanceType") or (inputs.get("instanceTypes") or ["?"])[0])
        nodes = int((inputs.get("scalingConfig") or {}).get("desiredSize") or 0)
        facts, quote = catalog.get(instance_type), book.quote(instance_type, region)
        usd = None if quote.usd_per_hour is None else round(quote.usd_per_hour * nodes, 3)
        kw = round((facts.estimated_power_kw or 0.0) * nodes, 2) if facts else 0.0
        yield LineItem(f"EKS system nodes {nodes} × {instance_type}", usd, kw, quote.source, "eks-system-nodes", quote.date)
