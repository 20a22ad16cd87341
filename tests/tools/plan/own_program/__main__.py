"""Two p5.48xlarge nodes and a 2,400 GiB FSx for Lustre file system in a VPC that exists already.

The subnet is looked up (``aws.ec2.get_subnets``), not created; the security group is this program's own (EFA and
Lustre need all traffic between the nodes and the file system's ports open to them)."""

import pulumi
import pulumi_aws as aws

from gpucluster import GpuNodeGroup, LustreStorage

CLUSTER = "mine"
ZONE = "us-east-1a"

vpc_id = pulumi.Config().require("vpcId")
subnets = aws.ec2.get_subnets(
    filters=[
        aws.ec2.GetSubnetsFilterArgs(name="vpc-id", values=[vpc_id]),
        aws.ec2.GetSubnetsFilterArgs(name="availability-zone", values=[ZONE]),
    ]
)
nodes = aws.ec2.SecurityGroup(
    "nodes",
    vpc_id=vpc_id,
    description="GPU nodes: all traffic between members",
    ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True}],
    egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"]}],
)

lustre = LustreStorage(
    "lustre",
    {
        "cluster_name": CLUSTER,
        "vpc_id": vpc_id,
        "subnet_id": subnets.ids[0],
        "client_security_group_id": nodes.id,
        "availability_zone": ZONE,
        "storage_capacity_gib": 2400,
        "throughput_per_unit_storage": 250,
        "protect": False,
    },
)

gpus = GpuNodeGroup(
    "p5",
    {
        "cluster_name": CLUSTER,
        "name": "p5",
        "instance_type": "p5.48xlarge",
        "availability_zones": [ZONE],
        "subnet_ids": [subnets.ids[0]],
        "min_size": 2,
        "max_size": 2,
        "desired_size": 2,
        "security_group_ids": [nodes.id],
        # The nodes boot as a GpuCluster's do (EFA check, NCCL environment, health thresholds) and mount the file system.
        "shared_storage": [lustre.shared_storage],
    },
)

pulumi.export("launchTemplateId", gpus.launch_template_id)
pulumi.export("fileSystemId", lustre.file_system_id)
