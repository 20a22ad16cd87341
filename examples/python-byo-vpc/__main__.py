"""Slurm on a p5 capacity reservation, in a VPC this program owns.

gpucluster's components take plain dicts (typed as their ``*Args``); fields that name another resource
(subnet, security group, reservation ids) take that resource's Outputs directly. Each component runs the
same checks and defaults as a gpucluster stack before it creates anything, so a mistake fails the preview
naming the field (``args.computeNodeGroups[0].maxSize: …``).
"""

import pulumi
import pulumi_aws as aws

from gpucluster import LustreStorage, SlurmCluster

CLUSTER = "byo"
ZONE = "us-east-1a"  # the zone the reservation holds capacity in: nodes, file system and head node live there
GPU_NODES = 2

# --- your network: one private subnet in the reservation's zone, one security group -------------------------
vpc = aws.ec2.Vpc("vpc", cidr_block="10.40.0.0/16", enable_dns_hostnames=True, enable_dns_support=True)
# A /18: a p5.48xlarge takes 32 EFA interfaces, each with its own private address.
private = aws.ec2.Subnet("private-a", vpc_id=vpc.id, cidr_block="10.40.0.0/18", availability_zone=ZONE)
# EFA and Slurm (slurmctld, slurmd, srun) need all traffic between members, and nothing else in.
nodes = aws.ec2.SecurityGroup(
    "nodes",
    vpc_id=vpc.id,
    description="GPU nodes and Slurm head node: all traffic between members",
    ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True}],
    egress=[
        {"protocol": "-1", "from_port": 0, "to_port": 0, "self": True},
        {"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"]},
    ],
)

# --- the GPUs: a capacity reservation you own (On-Demand Capacity Reservation) ------------------------------
reservation = aws.ec2.CapacityReservation(
    "p5",
    instance_type="p5.48xlarge",
    instance_platform="Linux/UNIX",
    availability_zone=ZONE,
    instance_count=GPU_NODES,
    instance_match_criteria="targeted",  # only launch templates that name it use it
)

# --- shared storage: FSx for Lustre sized from the workload (gpucluster picks capacity and throughput) -----
lustre = LustreStorage(
    "lustre",
    {
        "cluster_name": CLUSTER,
        "vpc_id": vpc.id,
        "subnet_id": private.id,
        "client_security_group_id": nodes.id,
        "workload": {
            "gpu_count": GPU_NODES * 8,
            "dataset_size_tib": 20,
            "read_mb_per_second_per_gpu": 200,
            "checkpoint_size_gib": 1000,  # ~70B parameters with Adam in mixed precision
            "checkpoint_write_seconds": 300,
        },
        # Set protect True for data you keep: the file system then survives `pulumi destroy`.
        "protect": False,
    },
)

# --- Slurm: a head node and the p5 group as a static partition on the reservation --------------------------
# SlurmCluster builds each compute group on GpuNodeGroup's launch template (EFA interfaces per card, the
# reservation targeted); a static group gets its Auto Scaling group, and the nodes' user data
# (SlurmCluster.compute_user_data) mounts the file system and joins slurmctld.
slurm = SlurmCluster(
    "slurm",
    {
        "cluster_name": CLUSTER,
        "vpc_id": vpc.id,
        "subnets": [{"id": private.id, "availability_zone": ZONE}],
        "security_group_ids": [nodes.id],
        "compute_node_groups": [
            {
                "name": "p5",
                "instance_type": "p5.48xlarge",
                "availability_zones": [ZONE],
                "min_size": GPU_NODES,
                "desired_size": GPU_NODES,
                "max_size": GPU_NODES,
                "capacity": {"type": "capacity-reservation", "reservation_id": reservation.id},
            },
        ],
        "node_groups": [{"name": "p5", "partition": "train", "mode": "static"}],
        "head_node": {"instance_type": "m7i.2xlarge"},
        "lustre": {"dns_name": lustre.dns_name, "mount_name": lustre.mount_name, "file_system_id": lustre.file_system_id},
        "tags": {"project": "byo-vpc-example"},
    },
)

pulumi.export("vpcId", vpc.id)
pulumi.export("capacityReservationId", reservation.id)
pulumi.export("lustreDnsName", lustre.dns_name)
pulumi.export("headNodeId", slurm.head_instance_id)
pulumi.export("slurmctld", slurm.controller_address)
