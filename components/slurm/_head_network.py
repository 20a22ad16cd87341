"""The head node's own security group: what the controller admits, and what it may open on the compute nodes.

The head node is not a member of the cluster's "all traffic between members" group (the compute nodes' EFA group):
a member admits every other member on every port, so a job on any compute node could reach the head node's sshd,
its exporters and anything else that listens there. It carries ``<name>-head-sg`` instead, plus the groups that give
it egress (the node group's "all outbound") and, with people, the login side's head group. The rules, each naming
its peer group (no CIDR):

- in, TCP 6817 (slurmctld) from the compute nodes' group: slurmd registers and fetches its configuration
  (``--conf-server``), srun, sbatch and scontrol in jobs;
- in, TCP 6819 (slurmdbd, with accounting) from the compute nodes' group: sacct and sreport in jobs;
- in, TCP 988 and 1018-1023 from the Lustre file system's group, and the file system's mirror rules to and from this
  group, when the head node mounts ``/fsx`` (LNet connects both ways, as for the login nodes);
- on the compute nodes' group, in from this group: TCP 6818 (slurmctld to slurmd), srun's listeners (slurmctld's
  messages to an srun or salloc in a job: ``SrunPortRange`` with login nodes, else the kernel's ephemeral range) and,
  when the head node runs the metrics collector, TCP 9400 and 9100 (its scrapes).

Nothing else needs a rule here: the VPC's interface endpoints admit HTTPS from the VPC's CIDR, DNS and the S3 gateway
endpoint are not subject to security groups, and a hybrid site with its own controller has no head node at all.

No rule admits SSH: the head node is reached with Session Manager, and its sshd admits only the admin group
(``gpucluster.render.slurm.pam``). The login nodes' rules (6817, 6819) stay in the login side's group; the shared
``/home`` admits NFS from that group, which the head node still carries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.security import BOTH_WAYS, allow
from gpucluster.components.slurm._args import HeadNetwork, SlurmBuild
from gpucluster.components.slurm._login_network import SLURMCTLD, SLURMD, SLURMDBD
from gpucluster.components.storage.lustre_storage import LUSTRE_PORTS
from gpucluster.config.naming import with_name
from gpucluster.render.monitoring.collection import EXPORTER_PORTS
from gpucluster.render.slurm.names import SlurmContext

EPHEMERAL_PORTS = (32768, 60999)
"""Where srun and salloc listen without ``SrunPortRange``: they bind port 0, so the kernel picks from
``net.ipv4.ip_local_port_range``, 32768-60999 by default on Linux."""


@dataclass(frozen=True)
class HeadRules:
    """What the head node's rules depend on, resolved."""

    accounting: bool
    srun_ports: tuple[int, int] | None
    """``SrunPortRange`` when rendered (login nodes); None: the kernel's ephemeral range."""
    collector: bool
    """The head node scrapes the compute nodes' exporters."""


def head_security_group(
    name: str,
    network: HeadNetwork,
    rules: HeadRules,
    *,
    cluster: str,
    vpc_id: pulumi.Input[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> tuple[aws.ec2.SecurityGroup, pulumi.Output[str]]:
    """``<name>-head-sg`` and every rule of the module's list; the group's id once every rule exists (what the head
    node's interface takes, so it leaves the EFA group only after the rules that replace it are in place)."""
    sg = aws.ec2.SecurityGroup(
        f"{name}-head-sg",
        vpc_id=vpc_id,
        description=f"Slurm head node of {cluster}: slurmctld and slurmdbd from compute nodes; no SSH",
        tags=with_name(tags, f"{cluster}-slurm-head"),
        opts=opts,
    )
    compute = network.compute_group_id
    made: list[pulumi.CustomResource] = []

    def rule(suffix: str, group: pulumi.Input[str], peer: pulumi.Input[str], ports: tuple[int, int], why: str) -> None:
        made.append(allow(f"{name}-{suffix}", "in", group, peer_security_group_id=peer, protocol="tcp", ports=ports,
                          description=why, tags=with_name(tags, f"{cluster}-{suffix}"), opts=opts))  # fmt: skip

    rule("head-sg-in-slurmctld", sg.id, compute, (SLURMCTLD, SLURMCTLD), "slurmctld from compute nodes (slurmd, jobs)")
    if rules.accounting:
        rule("head-sg-in-slurmdbd", sg.id, compute, (SLURMDBD, SLURMDBD), "slurmdbd from compute nodes (sacct in jobs)")
    rule("compute-in-slurmd-head", compute, sg.id, (SLURMD, SLURMD), "slurmd from the head node (slurmctld)")
    low, high = rules.srun_ports or EPHEMERAL_PORTS
    what = "SrunPortRange" if rules.srun_ports else "the kernel's ephemeral range"
    rule("compute-in-srun-head", compute, sg.id, (low, high), f"srun and salloc in jobs from slurmctld ({what})")
    if rules.collector:
        for port in EXPORTER_PORTS:
            rule(f"compute-in-scrape-{port}", compute, sg.id, (port, port), f"exporter {port} from the head node's collector")
    if network.lustre_group_id is not None:
        lustre = network.lustre_group_id
        for low, high in LUSTRE_PORTS:
            rule(f"head-sg-in-lustre-{low}", sg.id, lustre, (low, high), f"Lustre {low}-{high} from the file system")
            for direction, word in BOTH_WAYS:
                made.append(allow(f"{name}-lustre-fs-{direction}-head-{low}", direction, lustre, peer_security_group_id=sg.id,
                                  protocol="tcp", ports=(low, high), description=f"Lustre {low}-{high} {word} the head node",
                                  tags=with_name(tags, f"{cluster}-lustre-head"), opts=opts))  # fmt: skip
    return sg, pulumi.Output.all(sg.id, *[r.id for r in made]).apply(lambda ids: str(ids[0]))


def placed_head_groups(
    name: str, args: SlurmBuild, ctx: SlurmContext, parent: pulumi.Resource
) -> tuple[pulumi.Input[Sequence[pulumi.Input[str]]], pulumi.Output[str] | None]:
    """The head node's security groups and its own group's id: its own group and egress groups when the stack placed
    it (``args.wiring.head_network``), else the compute nodes' groups and none (a standalone SlurmCluster)."""
    network = args.wiring.head_network
    if network is None:
        return args.wiring.security_group_ids, None
    mounts_lustre = args.slurm.head_node.mount_shared_storage and any(s.fs_type == "lustre" for s in args.wiring.shared_storage)
    if not mounts_lustre:
        network = dataclasses.replace(network, lustre_group_id=None)
    monitoring = ctx.monitoring
    rules = HeadRules(
        accounting=args.slurm.accounting is not None,
        srun_ports=ctx.srun_ports,
        collector=monitoring is not None and monitoring.slurm_collector and args.wiring.metrics_workspace_id is not None,
    )
    opts = pulumi.ResourceOptions(parent=parent)
    sg, ready = head_security_group(
        name, network, rules, cluster=args.cluster_name, vpc_id=args.wiring.vpc_id, tags=dict(args.wiring.tags), opts=opts
    )
    return [ready, *network.egress_group_ids], sg.id
