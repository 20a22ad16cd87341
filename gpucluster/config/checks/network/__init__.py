"""Checks of the network section: zones in the region, a VPC CIDR large enough for the planned subnets,
and flow logs (a retention CloudWatch accepts, a warning for an unlogged VPC)."""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error, info, warning
from gpucluster.config.network import NetworkSpec
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.regions import zone_in_region


def check_network(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    yield from check_network_section(spec.network, spec.region, spec.zones)


def check_network_section(
    network: NetworkSpec, region: str, zones: list[str], path: str = "gpucluster:network"
) -> Iterator[Finding]:
    """Zones in ``region`` and a new VPC's room for ``zones``: shared by the stack and a standalone ``Network``."""
    for zone in network.availability_zones:
        if not zone_in_region(zone, region):
            yield error(
                f"{path}.availabilityZones",
                f"zone {zone!r} is not in region {region}",
                f"use zones of {region}, e.g. {region}a",
                zone,
                "zone-region",
            )
    for j, subnet in enumerate(network.subnets):
        if not zone_in_region(subnet.availability_zone, region):
            yield error(
                f"{path}.subnets[{j}].availabilityZone",
                f"zone {subnet.availability_zone!r} of {subnet.id} is not in region {region}",
                "give the subnet's real zone, or change aws:region",
                subnet.availability_zone,
                "zone-region",
            )
    if network.create_vpc:
        from gpucluster.config.network import plan_subnets

        try:
            plan_subnets(
                network.vpc_cidr,
                zones,
                network.private_subnet_prefix_length,
                network.public_subnet_prefix_length,
            )
        except ValueError as exc:
            yield error(
                f"{path}.vpcCidr",
                str(exc),
                "use a larger vpcCidr or smaller subnet prefix lengths",
                network.vpc_cidr,
                "vpc-too-small",
            )


def check_flow_logs(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    yield from check_flow_logs_section(spec.network)


def check_flow_logs_section(net: NetworkSpec, path: str = "gpucluster:network") -> Iterator[Finding]:
    """Flow logs: a retention CloudWatch accepts; say so when a new VPC goes unlogged, or when the flow
    log of your own VPC records more than the cluster."""
    from gpucluster.config.network import CLOUDWATCH_RETENTION_DAYS

    flow = net.flow_logs
    path = f"{path}.flowLogs"
    if not flow.enabled:
        if net.create_vpc:
            yield warning(
                f"{path}.enabled",
                "flow logs are off for the new VPC: none of its traffic is recorded (Security Hub EC2.6 flags the VPC)",
                "remove enabled: false (the default logs to CloudWatch), or use destination: s3 for cheaper storage",
                False,
                "flow-logs-off",
            )
        return
    if flow.destination == "cloudwatch" and flow.retention_days not in CLOUDWATCH_RETENTION_DAYS:
        below = [d for d in CLOUDWATCH_RETENTION_DAYS if d < flow.retention_days][-1:]
        above = [d for d in CLOUDWATCH_RETENTION_DAYS if d > flow.retention_days][:1]
        nearest = " or ".join(str(d) for d in below + above)
        yield error(
            f"{path}.retentionDays",
            f"retentionDays {flow.retention_days} is not a retention period CloudWatch Logs accepts",
            f"use {nearest} (CloudWatch takes {', '.join(map(str, CLOUDWATCH_RETENTION_DAYS))}), "
            "or destination: s3, which keeps records any number of days",
            flow.retention_days,
            "flow-log-retention",
        )
    if not net.create_vpc:
        yield info(
            f"{path}.enabled",
            f"a flow log is created for your VPC {net.vpc_id}: it records all of that VPC's traffic, not only the cluster's",
            "set network.flowLogs.enabled: false if the VPC already has a flow log",
            True,
            "flow-log-own-vpc",
        )
