"""An Amazon Managed Grafana workspace (``monitoring.grafana.enabled``): reachable only through an interface endpoint
in the cluster's VPC (``network_access_control``: no public access), service-managed permissions, AMP and
CloudWatch as data sources, a role that reads this cluster's workspace and logs only.

The dashboards go into the workspace through the Grafana provider (:mod:`._grafana_dashboards`).
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from gpucluster.components.monitoring._wiring import MonitoringWiring
from gpucluster.config.naming import with_name
from gpucluster.render.iam import policy_json
from gpucluster.render.monitoring.policies import grafana_policy
from gpucluster.resolve.cluster import ResolvedCluster


def grafana_workspace(
    parent: pulumi.Resource,
    name: str,
    cluster: ResolvedCluster,
    wiring: MonitoringWiring,
    workspace_arn: pulumi.Input[str],
    log_group_arn: pulumi.Input[str] | None,
    account: pulumi.Input[str],
) -> aws.grafana.Workspace:
    """The workspace, its role and its VPC endpoint; the workspace (its ``endpoint`` is a host name)."""
    monitoring = cluster.monitoring
    if monitoring is None:
        raise ValueError("grafana_workspace: the cluster's monitoring is off")
    child = pulumi.ResourceOptions(parent=parent)
    tags, region = dict(wiring.tags), cluster.region
    trust = pulumi.Output.from_input(account).apply(
        lambda acct: json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "grafana.amazonaws.com"},
                        "Action": "sts:AssumeRole",
                        "Condition": {"StringEquals": {"aws:SourceAccount": acct}},
                    }
                ],
            }
        )
    )
    role = aws.iam.Role(
        f"{name}-grafana-role", assume_role_policy=trust, tags=with_name(tags, f"{cluster.name}-grafana"), opts=child
    )
    aws.iam.RolePolicy(
        f"{name}-grafana-read",
        role=role.id,
        policy=pulumi.Output.all(workspace_arn, log_group_arn).apply(lambda v: policy_json(grafana_policy(v[0], v[1]))),
        opts=child,
    )
    endpoint_sg = aws.ec2.SecurityGroup(
        f"{name}-grafana-endpoint",
        vpc_id=wiring.vpc_id,
        description=f"Managed Grafana endpoint of {cluster.name}: HTTPS from the VPC",
        ingress=[
            aws.ec2.SecurityGroupIngressArgs(
                protocol="tcp",
                from_port=443,
                to_port=443,
                cidr_blocks=[wiring.vpc_cidr] if wiring.vpc_cidr is not None else [],
                description="HTTPS from the cluster's VPC",
            )
        ],
        tags=with_name(tags, f"{cluster.name}-grafana-endpoint"),
        opts=child,
    )
    endpoint = aws.ec2.VpcEndpoint(
        f"{name}-grafana-vpce",
        vpc_id=wiring.vpc_id,
        service_name=f"com.amazonaws.{region}.grafana-workspace",
        vpc_endpoint_type="Interface",
        subnet_ids=list(wiring.private_subnet_ids),
        security_group_ids=[endpoint_sg.id],
        private_dns_enabled=True,
        tags=with_name(tags, f"{cluster.name}-grafana"),
        opts=child,
    )
    return aws.grafana.Workspace(
        f"{name}-grafana",
        name=f"{cluster.name}-grafana",
        description=f"gpucluster {cluster.name}: fleet dashboards",
        account_access_type="CURRENT_ACCOUNT",
        authentication_providers=[monitoring.spec.grafana.authentication],
        permission_type="SERVICE_MANAGED",
        data_sources=["PROMETHEUS", "CLOUDWATCH"],
        role_arn=role.arn,
        network_access_control={"prefix_list_ids": [], "vpce_ids": [endpoint.id]},
        configuration=json.dumps({"unifiedAlerting": {"enabled": True}}),
        tags=with_name(tags, f"{cluster.name}-grafana"),
        opts=child,
    )
