"""The login nodes' network: the security-group matrix (docs/slurm.md, "Who can reach what, per node role") and, with SSH, the network load balancer.

Three groups, so each side admits exactly its row of the matrix and nothing the cluster's shared groups allow:

- ``<name>-login`` on the login nodes: in, TCP ``SrunPortRange`` from the head and compute sides (slurmstepd's
  I/O, slurmctld's messages to srun), TCP 6818 from the compute side (pam_slurm_adopt's caller-id RPC is then
  refused at once with a RST instead of timing out: the login node runs no slurmd), TCP 22 from the load
  balancer's group (SSH); out, TCP 6817/6819 to the head side, TCP 6818 and 22 to the compute side, TCP 443 (SSM,
  Secrets Manager), TCP 80 (Ubuntu's archive: signed packages over HTTP) and TCP/UDP 53 anywhere.
- ``<name>-login-head`` on the head node: in, TCP 6817 (slurmctld: clients, sackd) and 6819 (slurmdbd: sacct)
  from the login side. No SSH: users have no business on the head node.
- ``<name>-login-compute`` on compute nodes: in, TCP 6818 (srun → slurmd) and 22 (SSH into one's own job,
  admitted by pam_slurm_adopt only while it runs) from the login side.

Login nodes are not members of the cluster's "all traffic between members" group. No rule admits 0.0.0.0/0.
The load balancer's group (a network load balancer takes security groups only at creation) admits TCP 22 from
each allowed CIDR only and sends TCP 22 to the login group only (traffic and health checks; client IP preservation,
on for instance targets, still lets the targets reference the balancer's group).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.security import Direction, allow
from gpucluster.config.naming import with_name
from gpucluster.resolve.slurm.identity import ResolvedLoginSsh

SLURMCTLD, SLURMD, SLURMDBD, SSH = 6817, 6818, 6819, 22
LB_NAME_LIMIT = 32
"""Elastic Load Balancing's limit on load balancer and target group names."""


@dataclass(frozen=True)
class LoginGroups:
    """The three groups of the matrix."""

    login: aws.ec2.SecurityGroup
    head_side: aws.ec2.SecurityGroup
    """Attach to the head node: what it admits from login nodes."""
    compute_side: aws.ec2.SecurityGroup
    """Attach to compute nodes: what they admit from login nodes."""


def _group(
    name: str, vpc_id: pulumi.Input[str], description: str, tags: dict[str, str], opts: pulumi.ResourceOptions
) -> aws.ec2.SecurityGroup:
    return aws.ec2.SecurityGroup(name, vpc_id=vpc_id, description=description, tags=with_name(tags, name), opts=opts)


def login_groups(
    name: str,
    *,
    cluster: str,
    vpc_id: pulumi.Input[str],
    srun_ports: tuple[int, int],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> LoginGroups:
    """The login, head-side and compute-side groups and every rule between them (the module's table)."""
    login = _group(f"{name}-login", vpc_id, f"Login nodes of Slurm cluster {cluster}", tags, opts)
    head = _group(f"{name}-login-head", vpc_id, f"What the head node of {cluster} admits from its login nodes", tags, opts)
    compute = _group(f"{name}-login-compute", vpc_id, f"What compute nodes of {cluster} admit from its login nodes", tags, opts)
    g = LoginGroups(login, head, compute)

    def rule(
        suffix: str,
        direction: Direction,
        sg: aws.ec2.SecurityGroup,
        peer: aws.ec2.SecurityGroup,
        ports: tuple[int, int],
        why: str,
    ) -> None:
        allow(f"{name}-{suffix}", direction, sg.id, peer_security_group_id=peer.id, protocol="tcp", ports=ports,
              description=why, tags=tags, opts=opts)  # fmt: skip

    srun = f"srun's listeners (SrunPortRange {srun_ports[0]}-{srun_ports[1]})"
    # the head side
    rule("head-in-slurmctld", "in", head, login, (SLURMCTLD, SLURMCTLD), "slurmctld from login nodes (clients, sackd)")
    rule("head-in-slurmdbd", "in", head, login, (SLURMDBD, SLURMDBD), "slurmdbd from login nodes (sacct)")
    rule("login-out-slurmctld", "out", login, head, (SLURMCTLD, SLURMCTLD), "to slurmctld")
    rule("login-out-slurmdbd", "out", login, head, (SLURMDBD, SLURMDBD), "to slurmdbd")
    rule("login-in-srun-head", "in", login, head, srun_ports, f"{srun} from the head node")
    # the compute side
    rule("compute-in-slurmd", "in", compute, login, (SLURMD, SLURMD), "slurmd from login nodes (srun step launch)")
    rule("compute-in-ssh", "in", compute, login, (SSH, SSH), "SSH from login nodes into one's own job (pam_slurm_adopt)")
    rule("login-out-slurmd", "out", login, compute, (SLURMD, SLURMD), "to slurmd")
    rule("login-out-ssh", "out", login, compute, (SSH, SSH), "SSH into one's own job")
    rule("login-in-srun-compute", "in", login, compute, srun_ports, f"{srun} from compute nodes")
    rule("login-in-slurmd", "in", login, compute, (SLURMD, SLURMD), "pam_slurm_adopt's caller-id RPC: refused at once (RST)")
    # out to the world: AWS APIs, packages, names
    for suffix, protocol, port, why in (
        ("https", "tcp", 443, "HTTPS to AWS APIs (SSM, Secrets Manager) through NAT or endpoints"),
        ("http", "tcp", 80, "Ubuntu's package archive (signed packages over HTTP)"),
        ("dns-udp", "udp", 53, "DNS"),
        ("dns-tcp", "tcp", 53, "DNS"),
    ):
        allow(f"{name}-login-out-{suffix}", "out", login.id, cidr="0.0.0.0/0", protocol=protocol, ports=(port, port),
              description=why, tags=tags, opts=opts)  # fmt: skip
    return g


@dataclass(frozen=True)
class LoginBalancer:
    """The SSH entry: the balancer, its target group and its DNS name."""

    load_balancer: aws.lb.LoadBalancer
    target_group: aws.lb.TargetGroup
    dns_name: pulumi.Output[str]


def check_balancer_name(lb_name: str) -> None:
    """Elastic Load Balancing refuses names over 32 characters, halfway through ``pulumi up``: refuse before."""
    if len(lb_name) > LB_NAME_LIMIT:
        raise ValueError(
            f"the login nodes' load balancer would be named {lb_name!r} ({len(lb_name)} characters): Elastic Load "
            f"Balancing allows {LB_NAME_LIMIT}; use a cluster name of at most {LB_NAME_LIMIT - len('-login')} characters "
            "or leave loginNodes.ssh out"
        )


def login_balancer(
    name: str,
    *,
    lb_name: str,
    ssh: ResolvedLoginSsh,
    vpc_id: pulumi.Input[str],
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    login_group: aws.ec2.SecurityGroup,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> LoginBalancer:
    """The network load balancer ``lb_name`` (internal or internet-facing), its security group (set at creation),
    a TCP target group of instances with a TCP health check, and the listener."""
    check_balancer_name(lb_name)
    sg = _group(f"{name}-login-lb", vpc_id, f"SSH to the login nodes from {', '.join(ssh.allowed_cidrs)}", tags, opts)
    port = (ssh.port, ssh.port)
    for cidr in ssh.allowed_cidrs:  # named by the CIDR: adding one renames no other rule
        key = re.sub(r"[^0-9a-fA-F]+", "-", cidr)
        allow(f"{name}-login-lb-in-{key}", "in", sg.id, cidr=cidr, protocol="tcp", ports=port,
              description=f"SSH from {cidr}", tags=tags, opts=opts)  # fmt: skip
    allow(f"{name}-login-lb-out", "out", sg.id, peer_security_group_id=login_group.id, protocol="tcp", ports=port,
          description="SSH and health checks to the login nodes", tags=tags, opts=opts)  # fmt: skip
    allow(f"{name}-login-in-lb", "in", login_group.id, peer_security_group_id=sg.id, protocol="tcp", ports=port,
          description="SSH and health checks from the load balancer", tags=tags, opts=opts)  # fmt: skip
    lb = aws.lb.LoadBalancer(
        f"{name}-login-lb",
        name=lb_name,
        load_balancer_type="network",
        internal=ssh.scheme == "internal",
        subnets=subnet_ids,
        security_groups=[sg.id],
        tags=with_name(tags, lb_name),
        opts=opts,
    )
    tg = aws.lb.TargetGroup(
        f"{name}-login-tg",
        name=lb_name,
        port=ssh.port,
        protocol="TCP",
        target_type="instance",
        vpc_id=vpc_id,
        health_check=aws.lb.TargetGroupHealthCheckArgs(protocol="TCP", port="traffic-port"),
        tags=with_name(tags, lb_name),
        opts=opts,
    )
    aws.lb.Listener(
        f"{name}-login-ssh",
        load_balancer_arn=lb.arn,
        port=ssh.port,
        protocol="TCP",
        default_actions=[aws.lb.ListenerDefaultActionArgs(type="forward", target_group_arn=tg.arn)],
        tags=with_name(tags, lb_name),
        opts=opts,
    )
    return LoginBalancer(lb, tg, lb.dns_name)
