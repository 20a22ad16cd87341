"""The cloud nodes' security group towards an on-premises Slurm site: the ports Slurm needs, both ways.

Slurm opens connections in both directions and NAT anywhere between the sites breaks it, so every rule names
the site's own addresses:

- in, TCP 6818 (slurmd) from ``onPremCidrs``: slurmctld pings, launches and signals; srun on the site's login
  nodes starts steps.
- in, TCP ``srunPortRange`` from the controller: slurmctld's messages to an srun running on a cloud node
  (a batch script's srun).
- out, TCP ``controller.port`` (6817) to the controller: registration, ``--conf-server``, step completion.
- out, TCP ``controller.slurmdbdPort`` to the controller, only when set (``sacct``/``sreport`` from cloud jobs).
- out, TCP ``srunPortRange`` to ``loginNodeCidrs``: slurmstepd's I/O and messages back to an interactive srun
  (forgetting it shows only as a hung srun).

The site's firewall needs the mirror image (the bundle's INSTALL checklist lists it). Traffic between cloud
nodes (EFA, slurmd fan-out) is the cluster's EFA group's; DNS to the Resolver endpoints is the link's.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.security import Direction, allow
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.naming import with_name

SLURMD_PORT = 6818


def cidr_key(cidr: str) -> str:
    """A network or address as a resource-name key: ``10.20.0.0/16`` → ``10-20-0-0-16`` (stable, not a position)."""
    return cidr.replace(".", "-").replace("/", "-")


def hybrid_node_security_group(
    name: str, spec: HybridSpec, *, vpc_id: pulumi.Input[str], cluster: str, tags: dict[str, str], opts: pulumi.ResourceOptions
) -> aws.ec2.SecurityGroup:
    """``<name>-onprem``: the Slurm rules between the cloud nodes and ``spec``'s site (which has a controller)."""
    controller = spec.controller
    if controller is None:
        raise ValueError("the Slurm rules are for a site with a controller (hybrid.controller)")
    sg = aws.ec2.SecurityGroup(
        f"{name}-onprem",
        vpc_id=vpc_id,
        description=f"Slurm between {cluster} cloud nodes and site {spec.site}",
        tags=with_name(tags, f"{cluster}-{spec.site}-slurm"),
        opts=opts,
    )
    ctld = f"{controller.address}/32"
    low, high = spec.srun_ports

    def rule(suffix: str, direction: Direction, cidr: str, ports: tuple[int, int], description: str) -> None:
        allow(f"{name}-onprem-{suffix}", direction, sg.id, cidr=cidr, protocol="tcp",
              ports=ports, description=description, tags=with_name(tags, f"{cluster}-{spec.site}-{suffix}"),
              opts=opts)  # fmt: skip

    for cidr in spec.on_prem_cidrs:
        rule(
            f"slurmd-in-{cidr_key(cidr)}",
            "in",
            cidr,
            (SLURMD_PORT, SLURMD_PORT),
            f"slurmd from site {spec.site} (slurmctld, srun)",
        )
    rule("srun-in-ctld", "in", ctld, (low, high), "slurmctld to an srun on a cloud node (SrunPortRange)")
    rule("slurmctld-out", "out", ctld, (controller.port, controller.port), "slurmd to the site's slurmctld")
    if controller.slurmdbd_port is not None:
        port = controller.slurmdbd_port
        rule("slurmdbd-out", "out", ctld, (port, port), "sacct/sreport to the site's slurmdbd")
    for cidr in spec.login_node_cidrs:
        rule(
            f"srun-out-{cidr_key(cidr)}", "out", cidr, (low, high), "slurmstepd to srun on the site's login nodes (SrunPortRange)"
        )
    return sg
