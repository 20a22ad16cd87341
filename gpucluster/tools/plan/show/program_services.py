"""The lines of a plan's estimate that come from its services rather than its instances, as
:mod:`gpucluster.tools.plan.show.program_estimate` works them out from a plan's resources: a hybrid site's link
(:mod:`gpucluster.resolve.cost.hybrid` prices it) and monitoring (:mod:`gpucluster.resolve.monitoring`), with the
helpers that read a plan's resources."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpucluster.facts.catalog import Catalog
from gpucluster.facts.prices import REFERENCE_REGION, PriceBook
from gpucluster.resolve.cost.estimate import GroupEstimate, LineItem
from gpucluster.resolve.cost.hybrid import RESOLVER_ENI_USD_PER_HOUR, TGW_ATTACHMENT_USD_PER_HOUR, VPN_CONNECTION_USD_PER_HOUR


def of_type(doc: Mapping[str, Any], token: str) -> list[Mapping[str, Any]]:
    return [r for r in doc.get("resources") or [] if r.get("type") == token]


def tags(r: Mapping[str, Any]) -> dict[str, Any]:
    tags = (r.get("inputs") or {}).get("tags") or {}
    if isinstance(tags, list):  # an Auto Scaling group's tags: [{key, value, propagateAtLaunch}]
        return {str(t.get("key")): t.get("value") for t in tags if isinstance(t, Mapping)}
    return dict(tags) if isinstance(tags, Mapping) else {}


def list_price(region: str, what: str) -> str:
    """The source of a fixed price the catalog only knows for us-east-1 (the stack's estimate says the same)."""
    where = "" if region == REFERENCE_REGION else f"; the catalog has no {region} figure"
    return f"us-east-1 list price, {what}{where}"


def hourly_line(name: str, count: int, usd_per_hour: float, region: str, what: str, key: str) -> LineItem:
    """``count`` units at a fixed hourly list price (a NAT gateway, an endpoint ENI, a VPN connection): no power."""
    return LineItem(name, round(count * usd_per_hour, 3), 0.0, list_price(region, what), key)


def hybrid_lines(doc: Mapping[str, Any], region: str) -> Iterator[LineItem]:
    """A hybrid site's link, as :mod:`gpucluster.resolve.cost.hybrid` prices it: VPN connections, Transit Gateway
    attachments (the VPC's, and a VPN's on a Transit Gateway), Resolver endpoint ENIs."""
    vpns = of_type(doc, "aws:ec2/vpnConnection:VpnConnection")
    if vpns:
        yield hourly_line(
            "Site-to-Site VPN connection" if len(vpns) == 1 else f"{len(vpns)} Site-to-Site VPN connections",
            len(vpns),
            VPN_CONNECTION_USD_PER_HOUR,
            region,
            "VPN pricing, per connection-hour (standard tunnels)",
            "hybrid-vpn",
        )
    attachments = len(of_type(doc, "aws:ec2transitgateway/vpcAttachment:VpcAttachment"))
    attachments += sum(1 for v in vpns if (v.get("inputs") or {}).get("transitGatewayId"))
    if attachments:
        yield hourly_line(
            f"{attachments} Transit Gateway attachment(s)",
            attachments,
            TGW_ATTACHMENT_USD_PER_HOUR,
            region,
            "Transit Gateway pricing, per attachment-hour (data processed is extra)",
            "hybrid-tgw-attachments",
        )
    enis = sum(
        len((r.get("inputs") or {}).get("ipAddresses") or [])
        for r in of_type(doc, "aws:route53/resolverEndpoint:ResolverEndpoint")
    )
    if enis:
        yield hourly_line(
            f"{enis} Route 53 Resolver endpoint ENIs",
            enis,
            RESOLVER_ENI_USD_PER_HOUR,
            region,
            "Route 53 pricing, per Resolver endpoint ENI-hour (queries are extra)",
            "hybrid-resolver",
        )


def monitoring_lines(
    doc: Mapping[str, Any], groups: tuple[GroupEstimate, ...], catalog: Catalog, book: PriceBook, region: str
) -> Iterator[LineItem]:
    """The monitoring line where the plan has an AMP workspace: samples from the node groups at their desired size
    (the head node's own where a Slurm head node is), the scrape interval from the EKS scraper's configuration (30 s,
    the default, where the collector's file is no resource), logs (the nodes', the head node's and each login node's
    of the login Auto Scaling group, each EKS managed node group's where Fluent Bit ships them) and their retention
    from the node log group."""
    import yaml

    from gpucluster.render.kubernetes.logs import FLUENT_BIT_RELEASE
    from gpucluster.resolve.monitoring import (
        SECONDS_PER_MONTH,
        SERIES_PER_NODE,
        MonitoringUsage,
        monitoring_line,
        series_per_node,
    )

    if not of_type(doc, "aws:amp/workspace:Workspace"):
        return
    scrapers = of_type(doc, "aws:amp/scraper:Scraper")
    interval = 30
    if scrapers:
        text = str((scrapers[0].get("inputs") or {}).get("scrapeConfiguration") or "")
        interval = int(str((yaml.safe_load(text) or {}).get("global", {}).get("scrape_interval", "30s")).rstrip("s"))
    head = any(tags(r).get("gpucluster:role") == "head" for r in of_type(doc, "aws:ec2/instance:Instance"))
    logins = sum(
        int((r.get("inputs") or {}).get("desiredCapacity") or 0)
        for r in of_type(doc, "aws:autoscaling/group:Group")
        if tags(r).get("gpucluster:role") == "login"
    )
    node_groups = [r for r in of_type(doc, "aws:cloudwatch/logGroup:LogGroup") if _is_node_log_group(r)]
    retention = int((node_groups[0].get("inputs") or {}).get("retentionInDays") or 0) if node_groups else 0

    releases = of_type(doc, "kubernetes:helm.sh/v3:Release")
    fluent_bit = any((r.get("inputs") or {}).get("name") == FLUENT_BIT_RELEASE for r in releases)
    eks = of_type(doc, "aws:eks/nodeGroup:NodeGroup") if fluent_bit else []
    eks_groups = {tags(r).get("gpucluster:node-group") for r in eks}
    eks_sizes = [(r.get("inputs") or {}).get("scalingConfig") or {} for r in eks]

    def usage(at_max: bool) -> MonitoringUsage:
        def size(g: GroupEstimate) -> int:
            return g.maximum if at_max else g.desired

        series = sum(series_per_node(catalog[g.instance_type]) * size(g) for g in groups if g.instance_type in catalog)
        series += SERIES_PER_NODE if head else 0
        nodes = sum(size(g) for g in groups if g.node_group not in eks_groups)
        log_gb = nodes * book.usage("LogGbPerNodeMonth") + (book.usage("LogGbHeadMonth") if head else 0.0)
        log_gb += sum(int(c.get("maxSize" if at_max else "desiredSize") or 0) for c in eks_sizes) * book.usage(
            "LogGbEksNodeMonth"
        )
        log_gb += logins * book.usage("LogGbLoginMonth")
        return MonitoringUsage(series * (SECONDS_PER_MONTH / interval), log_gb if node_groups else 0.0)

    line = monitoring_line(
        book,
        region,
        now=usage(False),
        at_max=usage(True),
        interval_seconds=interval,
        eks_scraper=bool(scrapers),
        retention_days=retention,
        grafana=bool(of_type(doc, "aws:grafana/workspace:Workspace")),
    )
    yield LineItem(*line)


def _is_node_log_group(r: Mapping[str, Any]) -> bool:
    """The Slurm nodes' log group: ``/gpucluster/<cluster>`` (not its ``/amp`` or ``/vpc-flow-logs`` children)."""
    name = str((r.get("inputs") or {}).get("name") or "")
    return name.startswith("/gpucluster/") and name.count("/") == 2
