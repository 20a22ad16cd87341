"""Checks of the network section: zones in the region, a VPC CIDR large enough for the planned subnets,
and flow logs (a retention CloudWatch accepts, a warning for an unlogged VPC)."""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error, info, warning
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.regions import zone_in_region


def check_network(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    for zone in spec.network.availability_zones:
        if not zone_in_region(zone, spec.region):
            yield error(
                "gpucluster:network.availabilityZones",
                f"zone {zone!r} is not in region {spec.region}",
                f"use zones of {spec.region}, e.g. {spec.region}a",
                zone,
                "zone-region",
            )
    for j, subnet in enumerate(spec.network.subnets):
        if not zone_in_region(subnet.availability_zone, spec.region):
            yield error(
                f"gpucluster:network.subnets[{j}].availabilityZone",
                f"zone {subnet.availability_zone!r} of {subnet.id} is not in region {spec.region}",
                "give the subnet's real zone, or change aws:region",
                subnet.availability_zone,
                "zone-region",
            )
    if spec.network.create_vpc:
        from gpucluster.config.network import plan_subnets

        try:
            plan_subnets(
                spec.network.vpc_cidr,
                spec.zones,
                spec.network.private_subnet_prefix_length,
                spec.network.public_subnet_prefix_length,
            )
        except ValueError as exc:
            yield error(
                "gpucluster:network.vpcCidr",
                str(exc),
                "use a larger vpcCidr or smaller subnet prefix lengths",
                spec.network.vpc_cidr,
                "vpc-too-small",
            )


def check_flow_logs(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Flow logs: a retention CloudWatch accepts; say so when a new VPC goes unlogged, or when the flow
    log of your own VPC records more than the cluster."""
    from gpucluster.config.network import CLOUDWATCH_RETENTION_DAYS

    net, flow = spec.network, spec.network.flow_logs
    path = "gpucluster:network.flowLogs"
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
