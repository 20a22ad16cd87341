"""Login nodes of a Slurm cluster (``gpucluster:slurm.loginNodes``): an Auto Scaling group of client-only nodes in
private subnets, reached through Session Manager as the user and, when asked, SSH behind a network load balancer.

Rules that name a code (private subnets, CIDRs, the identity they need) are the checks of
:mod:`gpucluster.config.checks.slurm.identity`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpucluster.config.base import SpecModel


class LoginSshSpec(SpecModel):
    """SSH to the login nodes through a network load balancer whose security group admits only ``allowedCidrs``."""

    allowed_cidrs: tuple[str, ...] = ()
    """Client networks allowed to reach port 22 (IPv4 or IPv6 CIDRs; not ``0.0.0.0/0``). Required: at least one."""

    scheme: Literal["internal", "internet-facing"] = "internal"
    """``internal`` (reached from the VPC and networks routed to it) or ``internet-facing``. Default ``internal``."""

    public_subnet_ids: tuple[str, ...] = ()
    """With your own VPC and ``internet-facing``: the public subnets of the load balancer, one per login node
    zone. Default: none (a new VPC's public subnets)."""


class LoginNodesSpec(SpecModel):
    """Nodes people log in to, edit, build and submit jobs from (Slurm client, ``sackd``, the shared file systems)."""

    count: int = Field(default=1, ge=1, le=10)
    """How many login nodes. Default 1."""

    instance_type: str = "m7i.2xlarge"
    """EC2 instance type. Default ``m7i.2xlarge`` (8 vCPU, 32 GiB: editors, builds, ``pip install``; no GPU)."""

    subnet_ids: tuple[str, ...] = ()
    """With your own VPC: private subnets listed in ``network.subnets``. Default: the head node's subnet."""

    image_id: str | None = Field(default=None, pattern=r"^ami-[0-9a-f]{8,17}$")
    """AMI; it must be Ubuntu 24.04 (the head node's Slurm). Default: Canonical's latest Ubuntu 24.04 image,
    read from its public SSM parameter at deploy time, like the head node's."""

    root_volume_size_gib: int = Field(default=100, ge=20, le=16384)
    """Root volume (encrypted gp3), GiB. Default 100."""

    grace_period_minutes: int = Field(default=10, ge=3, le=120)
    """On scale-in, how long a login node waits for its users (they are warned, new logins refused) before it
    terminates. Default 10."""

    ssh: LoginSshSpec | None = None
    """SSH through a load balancer. Default: none (Session Manager only)."""
