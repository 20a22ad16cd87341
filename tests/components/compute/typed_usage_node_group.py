"""What a Python user writes for a GpuNodeGroup: dict literals and lists, Outputs where resources are
wired in. Never run; pyright checks it (pyproject's include) so the Args stay usable without casts."""

import pulumi_aws as aws

from gpucluster import GpuNodeGroup, GpuNodeGroupArgs


def node_group(vpc: aws.ec2.Vpc, subnet: aws.ec2.Subnet, sg: aws.ec2.SecurityGroup) -> GpuNodeGroup:
    reservation = aws.ec2.CapacityReservation(
        "cr", instance_type="p5.48xlarge", instance_platform="Linux/UNIX", availability_zone="us-east-1a", instance_count=2
    )
    args: GpuNodeGroupArgs = {
        "name": "train",
        "instance_type": "p5.48xlarge",
        "availability_zones": ["us-east-1a"],
        "max_size": 2,
        "subnet_ids": [subnet.id],
        "capacity": {"type": "capacity-reservation", "reservation_id": reservation.id},
        "tags": {"team": "ml"},
        "cluster_name": "research",
        "security_group_ids": [sg.id, vpc.default_security_group_id],
        "user_data": "#cloud-config\n",
    }
    return GpuNodeGroup("train", args)


def plain_lists() -> GpuNodeGroup:
    return GpuNodeGroup(
        "plain",
        {
            "name": "gpu",
            "instance_type": "p5.48xlarge",
            "availability_zones": ["us-east-1a"],
            "max_size": 4,
            "subnet_ids": ["subnet-0aaa1111"],
            "cluster_name": "c",
            "security_group_ids": ["sg-0efa0000000000001"],
        },
    )
