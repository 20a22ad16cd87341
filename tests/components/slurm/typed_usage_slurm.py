"""What a Python user writes to build a SlurmCluster: dict literals and lists, an Output where a field
names another resource. Never run; ``test_slurm_cluster_args`` has pyright check it."""

import pulumi_aws as aws

from gpucluster.components.slurm.slurm_cluster import SlurmCluster


def program() -> SlurmCluster:
    vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
    subnet = aws.ec2.Subnet("a", vpc_id=vpc.id, cidr_block="10.0.0.0/19", availability_zone="us-east-1a")
    sg = aws.ec2.SecurityGroup("nodes", vpc_id=vpc.id)
    cr = aws.ec2.CapacityReservation(
        "cr", instance_type="p5.48xlarge", instance_platform="Linux/UNIX", availability_zone="us-east-1a", instance_count=2
    )
    return SlurmCluster(
        "slurm",
        {
            "cluster_name": "demo",
            "vpc_id": vpc.id,
            "subnets": [{"id": subnet.id, "availability_zone": "us-east-1a"}],
            "security_group_ids": [sg.id],
            "compute_node_groups": [
                {
                    "name": "p5",
                    "instance_type": "p5.48xlarge",
                    "availability_zones": ["us-east-1a"],
                    "max_size": 2,
                    "capacity": {"type": "capacity-reservation", "reservation_id": cr.id},
                },
                {"name": "dev", "instance_type": "g6e.2xlarge", "availability_zones": ["us-east-1a"], "max_size": 2},
            ],
            "node_groups": [{"name": "dev", "mode": "static"}],
            "head_node": {"instance_type": "m7i.2xlarge"},
            "accounting": {},
            "lustre": {"dns_name": "fs-0123.fsx.us-east-1.amazonaws.com", "mount_name": "abcdefgh"},
            "identity": {
                "admin_group": "hpc-admins",
                "groups": [{"name": "hpc-admins", "gid": 5000}],
                "users": [{"name": "alice", "uid": 10001, "groups": ["hpc-admins"], "home_quota_gib": 100}],
            },
            "login_nodes": {"count": 2, "ssh": {"allowed_cidrs": ["10.20.0.0/16"], "scheme": "internal"}},
            "home": {"storage_capacity_gib": 256, "throughput_capacity": 128},
            "tags": {"team": "ml"},
        },
    )
