"""Network: a new VPC (private subnets per zone, NAT, S3 gateway endpoint, optional interface
endpoints) or your own VPC and subnets — plus the security groups every node group uses, the VPC's
flow log and, for a new VPC, its default security group emptied."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.components._aws.buckets import private_bucket
from gpucluster.components._aws.security import BOTH_WAYS, allow
from gpucluster.config.naming import with_name
from gpucluster.config.network import FlowLogsSpec, NetworkSpec, plan_subnets

TOKEN = "gpucluster:index:Network"


@dataclass
class NetworkArgs:
    """Inputs of :class:`Network`."""

    network: NetworkSpec
    """The resolved network spec (``availabilityZones`` lists every zone that needs a subnet)."""

    cluster_name: str
    """Cluster name: prefix of resource names."""

    region: str
    """AWS region, for endpoint service names."""

    tags: dict[str, str] = field(default_factory=dict)
    """Tags on every taggable child. Default: none."""


FLOW_LOGS_SERVICE = "vpc-flow-logs.amazonaws.com"
LOG_DELIVERY_SERVICE = "delivery.logs.amazonaws.com"


def flow_log_group_name(cluster_name: str) -> str:
    return f"/gpucluster/{cluster_name}/vpc-flow-logs"


def flow_log_trust_policy(*, partition: str, region: str, account: str) -> dict[str, Any]:
    """Who may assume the flow-log role: VPC Flow Logs, and only for flow logs of this account and
    region (``aws:SourceAccount`` / ``aws:SourceArn`` stop another account's flow log from using
    the role: the confused-deputy guard AWS documents for this role)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "VpcFlowLogsOfThisAccount",
                "Effect": "Allow",
                "Principal": {"Service": FLOW_LOGS_SERVICE},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {"aws:SourceArn": f"arn:{partition}:ec2:{region}:{account}:vpc-flow-log/*"},
                },
            }
        ],
    }


def flow_log_role_policy(log_group_arn: str) -> dict[str, Any]:
    """What the flow-log role may do: write streams and events into the cluster's log group only.
    The group exists (this program makes it, with its retention), so no ``logs:CreateLogGroup``."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "WriteTheClustersFlowLogGroup",
                "Effect": "Allow",
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                "Resource": [log_group_arn, f"{log_group_arn}:log-stream:*"],
            },
            {
                # Flow Logs checks the destination with DescribeLogGroups, a list call that cannot be
                # narrowed to one group: the account's and region's groups.
                "Sid": "FindTheLogGroup",
                "Effect": "Allow",
                "Action": "logs:DescribeLogGroups",
                "Resource": log_group_arn.rsplit(":log-group:", 1)[0] + ":log-group:*",
            },
        ],
    }


def flow_log_bucket_statements(bucket_arn: str, *, partition: str, region: str, account: str) -> list[dict[str, Any]]:
    """Bucket-policy statements that let the log delivery service write this account's flow logs
    (and nobody else's: ``aws:SourceAccount`` and ``aws:SourceArn``) under ``AWSLogs/<account>/``."""
    source = {
        "StringEquals": {"aws:SourceAccount": account},
        "ArnLike": {"aws:SourceArn": f"arn:{partition}:logs:{region}:{account}:*"},
    }
    return [
        {
            "Sid": "FlowLogDeliveryWrite",
            "Effect": "Allow",
            "Principal": {"Service": LOG_DELIVERY_SERVICE},
            "Action": "s3:PutObject",
            "Resource": f"{bucket_arn}/AWSLogs/{account}/*",
            "Condition": {
                "StringEquals": {"aws:SourceAccount": account, "s3:x-amz-acl": "bucket-owner-full-control"},
                "ArnLike": source["ArnLike"],
            },
        },
        {
            "Sid": "FlowLogDeliveryCheck",
            "Effect": "Allow",
            "Principal": {"Service": LOG_DELIVERY_SERVICE},
            "Action": ["s3:GetBucketAcl", "s3:ListBucket"],
            "Resource": bucket_arn,
            "Condition": source,
        },
    ]


class Network(pulumi.ComponentResource):
    """Private subnets for GPU nodes and the EFA security group.

    The EFA security group allows all traffic in and out between its own members (EFA's OS-bypass
    traffic needs both rules, referencing the group itself); the node security group allows all
    outbound traffic. Node interfaces carry both. A new VPC's default security group keeps no rule
    (nothing should use it; Security Hub EC2.2). The VPC's flow log (traffic type ALL) goes to a
    CloudWatch log group with a retention, or to a private bucket that expires records; either is
    protected and retained like the cluster's other data unless ``flowLogs.protect`` says otherwise.
    """

    vpc_id: pulumi.Output[str]
    vpc_cidr: pulumi.Output[str]
    private_subnet_ids: dict[str, pulumi.Output[str]]
    """Private subnet id per Availability Zone."""
    efa_security_group_id: pulumi.Output[str]
    node_security_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        self._name = name
        self._args = args
        self._child = pulumi.ResourceOptions(parent=self)
        spec = args.network
        if spec.create_vpc:
            self._create_vpc(spec)
        else:
            assert spec.vpc_id is not None
            self.vpc_id = pulumi.Output.from_input(spec.vpc_id)
            self.vpc_cidr = aws.ec2.get_vpc_output(id=spec.vpc_id, opts=pulumi.InvokeOutputOptions(parent=self)).cidr_block
            self.private_subnet_ids = {}
            for subnet in spec.subnets:
                # The first subnet listed for a zone is the zone's default; node groups may pick others.
                self.private_subnet_ids.setdefault(subnet.availability_zone, pulumi.Output.from_input(subnet.id))
        self._create_security_groups()
        self.flow_log_id: pulumi.Output[str] | None = None
        if spec.flow_logs.enabled:
            self.flow_log_id = self._create_flow_log(spec.flow_logs)
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "efaSecurityGroupId": self.efa_security_group_id,
                "nodeSecurityGroupId": self.node_security_group_id,
            }
        )

    def _tags(self, suffix: str) -> dict[str, str]:
        return with_name(self._args.tags, f"{self._args.cluster_name}-{suffix}")

    def _create_vpc(self, spec: NetworkSpec) -> None:
        name, opts = self._name, self._child
        zones = list(spec.availability_zones)
        cidrs = plan_subnets(spec.vpc_cidr, zones, spec.private_subnet_prefix_length, spec.public_subnet_prefix_length)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=self._tags("vpc"),
            opts=opts,
        )
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        # Adopt the VPC's default security group and leave it without rules: instances launched
        # without a group get no traffic at all, instead of the default's "all from members, all out".
        aws.ec2.DefaultSecurityGroup(
            f"{name}-default-sg", vpc_id=vpc.id, ingress=[], egress=[], tags=self._tags("default-closed"), opts=opts
        )
        self.private_subnet_ids = {}
        private_tables: list[aws.ec2.RouteTable] = []
        nat_ids: dict[str, pulumi.Output[str]] = {}
        if spec.enable_nat_gateway:
            igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=self._tags("igw"), opts=opts)
            public_rt = aws.ec2.RouteTable(
                f"{name}-public-rt",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
                tags=self._tags("public"),
                opts=opts,
            )
            nat_zones = zones if spec.one_nat_gateway_per_az else zones[:1]
            for zone in zones:
                public = aws.ec2.Subnet(
                    f"{name}-public-{zone}",
                    vpc_id=vpc.id,
                    cidr_block=cidrs[zone][1],
                    availability_zone=zone,
                    map_public_ip_on_launch=False,
                    tags=self._tags(f"public-{zone}"),
                    opts=opts,
                )
                aws.ec2.RouteTableAssociation(
                    f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_rt.id, opts=opts
                )
                if zone in nat_zones:
                    eip = aws.ec2.Eip(f"{name}-nat-{zone}", domain="vpc", tags=self._tags(f"nat-{zone}"), opts=opts)
                    nat = aws.ec2.NatGateway(
                        f"{name}-nat-{zone}",
                        allocation_id=eip.id,
                        subnet_id=public.id,
                        tags=self._tags(f"nat-{zone}"),
                        opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
                    )
                    nat_ids[zone] = nat.id
        for zone in zones:
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                cidr_block=cidrs[zone][0],
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={**self._tags(f"private-{zone}"), "kubernetes.io/role/internal-elb": "1"},
                opts=opts,
            )
            routes = []
            if nat_ids:
                nat_id = nat_ids.get(zone, next(iter(nat_ids.values())))
                routes.append(aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat_id))
            table = aws.ec2.RouteTable(
                f"{name}-private-{zone}", vpc_id=vpc.id, routes=routes, tags=self._tags(f"private-{zone}"), opts=opts
            )
            aws.ec2.RouteTableAssociation(f"{name}-private-{zone}", subnet_id=private.id, route_table_id=table.id, opts=opts)
            private_tables.append(table)
            self.private_subnet_ids[zone] = private.id
        if spec.enable_s3_gateway_endpoint:
            aws.ec2.VpcEndpoint(
                f"{name}-s3",
                vpc_id=vpc.id,
                service_name=f"com.amazonaws.{self._args.region}.s3",
                vpc_endpoint_type="Gateway",
                route_table_ids=[t.id for t in private_tables],
                tags=self._tags("s3"),
                opts=opts,
            )
        if spec.interface_endpoints:
            endpoint_sg = aws.ec2.SecurityGroup(
                f"{name}-endpoints",
                vpc_id=vpc.id,
                description=f"HTTPS from {self._args.cluster_name} to AWS interface endpoints",
                tags=self._tags("endpoints"),
                opts=opts,
            )
            allow(
                f"{name}-endpoints-https",
                "in",
                endpoint_sg.id,
                cidr=vpc.cidr_block,
                protocol="tcp",
                ports=(443, 443),
                description="HTTPS from the VPC",
                tags=self._tags("endpoints-https"),
                opts=opts,
            )
            for service in spec.interface_endpoints:
                aws.ec2.VpcEndpoint(
                    f"{name}-{service.replace('.', '-')}",
                    vpc_id=vpc.id,
                    service_name=f"com.amazonaws.{self._args.region}.{service}",
                    vpc_endpoint_type="Interface",
                    private_dns_enabled=True,
                    subnet_ids=list(self.private_subnet_ids.values()),
                    security_group_ids=[endpoint_sg.id],
                    tags=self._tags(service),
                    opts=opts,
                )

    def _create_security_groups(self) -> None:
        name, opts = self._name, self._child
        efa = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=self.vpc_id,
            description=f"EFA and intra-cluster traffic of {self._args.cluster_name}: all traffic between members",
            tags=self._tags("efa"),
            opts=opts,
        )
        for direction, word in BOTH_WAYS:
            allow(f"{name}-efa-{direction}-self", direction, efa.id, peer_security_group_id=efa.id,
                  description=f"All traffic {word} members of this group (EFA needs it)",
                  tags=self._tags(f"efa-{direction}-self"), opts=opts)  # fmt: skip
        node = aws.ec2.SecurityGroup(
            f"{name}-node",
            vpc_id=self.vpc_id,
            description=f"Outbound traffic of {self._args.cluster_name} nodes",
            tags=self._tags("node"),
            opts=opts,
        )
        allow(f"{name}-node-out", "out", node.id, cidr="0.0.0.0/0",
              description="Outbound to AWS APIs and package mirrors (through NAT or endpoints)",
              tags=self._tags("node-out"), opts=opts)  # fmt: skip
        self.efa_security_group_id = efa.id
        self.node_security_group_id = node.id

    def _create_flow_log(self, flow: FlowLogsSpec) -> pulumi.Output[str]:
        name, args = self._name, self._args
        protect = flow.protect if flow.protect is not None else True
        keep = pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        account = aws.get_caller_identity_output(opts=invoke).account_id
        partition = aws.get_partition_output(opts=invoke).partition
        common: dict[str, Any] = {
            "vpc_id": self.vpc_id,
            "traffic_type": "ALL",
            "max_aggregation_interval": flow.max_aggregation_interval,
            "tags": self._tags("flow-log"),
        }
        if flow.destination == "cloudwatch":
            group = aws.cloudwatch.LogGroup(
                f"{name}-flow-logs",
                name=flow_log_group_name(args.cluster_name),
                retention_in_days=flow.retention_days,
                tags=self._tags("flow-logs"),
                opts=keep,
            )
            role = aws.iam.Role(
                f"{name}-flow-logs",
                assume_role_policy=pulumi.Output.all(partition, account).apply(
                    lambda v: json.dumps(flow_log_trust_policy(partition=v[0], region=args.region, account=v[1]))
                ),
                description=f"VPC Flow Logs of {args.cluster_name}: write to its log group",
                tags=self._tags("flow-logs"),
                opts=self._child,
            )
            aws.iam.RolePolicy(
                f"{name}-flow-logs",
                role=role.id,
                policy=group.arn.apply(lambda arn: json.dumps(flow_log_role_policy(arn))),
                opts=self._child,
            )
            log = aws.ec2.FlowLog(
                f"{name}-flow-log",
                log_destination_type="cloud-watch-logs",
                log_destination=group.arn,
                iam_role_arn=role.arn,
                opts=self._child,
                **common,
            )
            return log.id

        def delivery(bucket_arn: str) -> pulumi.Output[list[dict[str, Any]]]:
            return pulumi.Output.all(partition, account).apply(
                lambda v: flow_log_bucket_statements(bucket_arn, partition=v[0], region=args.region, account=v[1])
            )

        bucket = private_bucket(
            f"{name}-flow-logs",
            f"{name}-flow-logs",
            bucket_prefix=f"{args.cluster_name[:27]}-flowlogs-",
            force_destroy=not protect,
            tags=self._tags("flow-logs"),
            bucket_opts=keep,
            child_opts=self._child,
            policy_statements=delivery,
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-flow-logs-expiry",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-flow-logs",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=flow.retention_days),
                )
            ],
            opts=self._child,
        )
        # Flow Logs delivers to S3 through the log delivery service, which the bucket policy admits;
        # no IAM role is involved.
        log = aws.ec2.FlowLog(
            f"{name}-flow-log",
            log_destination_type="s3",
            log_destination=bucket.arn,
            opts=self._child,
            **common,
        )
        return log.id
