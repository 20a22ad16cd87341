"""From :class:`~gpucluster.components.slurm.slurm_cluster.SlurmClusterArgs` to what the builder places.

A standalone ``SlurmCluster`` must get exactly the stack's defaults and refusals, so its Args are turned
into the stack's own shape — a cluster of your own VPC (``network.vpcId`` + ``network.subnets``) whose
node groups are the Slurm groups — and run through the same model, checks
(:func:`~gpucluster.config.checks.cluster.validate_cluster`) and resolution
(:func:`~gpucluster.resolve.cluster.resolve`) as a stack config. Findings are renamed to the Args' fields
(``gpucluster:slurm.headNode.instanceType`` → ``args.headNode.instanceType``) so the error names what
the program wrote. Outputs in reference fields stand in through :class:`Inputs` and come back in
the launch templates (the node groups' :class:`NodeWiring` carries them) and the rendered files.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

from gpucluster.components._shared.config_types import NetworkConfig, NodeGroupConfig, SlurmConfig
from gpucluster.components._shared.edge import Adapted, Renames, renamed, validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.components.slurm._people import People
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.base import FIX_MARK
from gpucluster.config.checks.cluster import validate_cluster
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.errors import ConfigError, Finding, error, errors_in
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.naming import cluster_tags
from gpucluster.config.slurm import SlurmSpec
from gpucluster.config.storage import LustreSpec
from gpucluster.config.storage.mounts import check_mount_options, check_mount_point
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.compute.node import LustreMount, lustre_part, node_cloud_config, user_data_title
from gpucluster.render.core import render_cloud_config
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.cluster import ResolvedCluster, ResolvedSlurm, resolve, with_groups
from gpucluster.resolve.compute.node_group import SlurmGroup, with_shared_fs
from gpucluster.resolve.storage import SharedFs

SOURCE = "SlurmCluster args"
# Stack config path → Args path (first match wins): the Args flatten the Slurm section and the network.
RENAMES: Renames = (
    (re.compile(r"^gpucluster:slurm\.?"), "args."),
    (re.compile(r"^gpucluster:nodeGroups"), "args.computeNodeGroups"),
    (re.compile(r"^gpucluster:network\."), "args."),
    (re.compile(r"^gpucluster:name"), "args.clusterName"),
    (re.compile(r"^aws:region"), "args.region"),
    (re.compile(r"^args\.slurm\.?"), "args."),
    (re.compile(r"^args\.nodeGroups"), "args.computeNodeGroups"),
    (re.compile(r"^args\.network\."), "args."),
    (re.compile(r"^args\.name\b"), "args.clusterName"),
)


def _renamed(findings: Sequence[Finding]) -> list[Finding]:
    return renamed(findings, RENAMES)


@dataclass(frozen=True)
class HeadNetwork:
    """Where the head node's own group sits (the stack's network): who its peers are (``_head_network``)."""

    compute_group_id: pulumi.Input[str]
    """The group every compute node carries and whose members admit each other (the Network's EFA group)."""
    egress_group_ids: Sequence[pulumi.Input[str]] = field(default_factory=tuple)
    """Groups the head node keeps for its outbound traffic (the Network's node group: all outbound)."""
    lustre_group_id: pulumi.Input[str] | None = None
    """The Lustre file system's group, when the head node mounts it."""


@dataclass(frozen=True)
class SlurmWiring:
    """Where the Slurm cluster is placed and what it is connected to: the stack builds it from its own resources, a
    program's ``from_args`` from the Args."""

    vpc_id: pulumi.Input[str]
    head_subnet_id: pulumi.Input[str]
    node_group_subnet_ids: Mapping[str, pulumi.Input[Sequence[pulumi.Input[str]]]]
    security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    user_data: Mapping[str, pulumi.Input[str]]
    """cloud-config per group, the slurmd part included."""
    shared_storage: Sequence[SharedStorage]
    tags: dict[str, str]
    inputs: Inputs = field(default_factory=lambda: Inputs("SlurmCluster"))
    """Maps the stand-ins in the resolved specs back to the Outputs they replaced (none in the stack)."""
    people: People = field(default_factory=People)
    """Who logs in, where, and their ``/home``: nothing by default."""
    hybrid: HybridSpec | None = None
    """A site whose own slurmctld is the controller (``hybrid.controller`` set): no head node; the site writes
    the munge key (:mod:`gpucluster.components.slurm._hybrid`). The stack's path only."""
    metrics_workspace_id: pulumi.Input[str] | None = None
    """The cluster's AMP workspace, where the head node's collector remote-writes (docs/monitoring-aws.md); none (the
    standalone SlurmCluster, or monitoring off): no collector."""
    head_network: HeadNetwork | None = None
    """The head node's own security group's peers (the stack's network): the head node then carries that group and
    ``head_network.egress_group_ids``, not ``security_group_ids``. None (the standalone SlurmCluster, whose groups are
    the program's): the head node carries ``security_group_ids`` as the compute nodes do."""


class SlurmBuild(Adapted[ResolvedCluster, SlurmWiring]):
    """What the builder's parts read: the resolved cluster (its Slurm section: one entry per group, head node zone
    and subnet, protection, the Slurm version the files are rendered for) and its wiring, with short names for
    what they read most."""

    @property
    def section(self) -> ResolvedSlurm:
        """The resolved Slurm section."""
        if self.resolved.slurm is None:
            raise ValueError(f"cluster {self.resolved.name!r} has no Slurm section")
        return self.resolved.slurm

    @property
    def cluster_name(self) -> str:
        return self.resolved.name

    @property
    def region(self) -> str:
        return self.resolved.region

    @property
    def slurm(self) -> SlurmSpec:
        """The resolved Slurm section's settings."""
        return self.section.spec

    @property
    def node_groups(self) -> tuple[SlurmGroup, ...]:
        """The resolved ``scheduler: slurm`` groups, config order."""
        return self.section.node_groups


def _split(args: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: args[k] for k in keys if k in args}


def from_args(args: Mapping[str, Any]) -> Adapted[ResolvedCluster, SlurmWiring]:
    """Validate, check and resolve ``args`` as the stack would; a :class:`~gpucluster.config.errors.ConfigError`
    naming ``args.<field>`` (paths renamed here, :data:`RENAMES`) before any resource when something is wrong."""
    catalog = load_catalog()
    region = args.get("region") or pulumi.Config("aws").get("region") or "us-east-1"
    inputs = Inputs("SlurmCluster", region)
    slurm_plain = inputs.prepare(_split(args, list(SlurmConfig.__annotations__)), SlurmConfig)
    network_plain = inputs.prepare(_split(args, ["vpc_id", "subnets"]), NetworkConfig)
    groups = args.get("compute_node_groups", [])
    groups_plain = (
        [inputs.prepare(g, NodeGroupConfig, f"args.computeNodeGroups[{i}]") for i, g in enumerate(groups)]
        if isinstance(groups, (list, tuple))
        else groups
    )
    raw = {
        "name": args.get("cluster_name"),
        "region": region,
        # The cluster's network is the program's; its flow logs are the program's business.
        "network": {**network_plain, "flow_logs": {"enabled": False}},
        "node_groups": groups_plain,
        "slurm": slurm_plain,
        "tags": dict(args.get("tags", {})),
    }
    # The wiring the stack always has: without it the model would read "a new VPC" and judge that instead.
    missing = [
        error(f"args.{camel}", "is required", "pass it (an Output of another resource is fine)")
        for key, camel in (("vpc_id", "vpcId"), ("subnets", "subnets"), ("security_group_ids", "securityGroupIds"))
        if args.get(key) is None or (key == "subnets" and not args.get(key))
    ]
    if missing:
        raise ConfigError(missing, SOURCE)
    try:
        spec = validate(ClusterSpec, raw, SOURCE)
    except ConfigError as exc:
        raise ConfigError(_renamed(exc.findings), SOURCE) from None
    findings = _renamed(validate_cluster(spec, catalog))
    findings += [
        error(
            f"args.computeNodeGroups[{i}].scheduler",
            f"node group {g.name!r} is not run by Slurm (scheduler {g.scheduler!r})",
            "remove scheduler (Slurm runs every group of a SlurmCluster), or build this group elsewhere",
            g.scheduler,
        )
        for i, g in enumerate(spec.node_groups)
        if g.scheduler not in (None, "slurm")
    ]
    if errors_in(findings):
        raise ConfigError(errors_in(findings), SOURCE)
    for finding in findings:
        pulumi.log.warn(finding.render())
    cluster = resolve(spec, catalog)
    resolved = cluster.spec
    resolved_slurm = cluster.slurm
    if resolved_slurm is None:
        raise ValueError("a SlurmCluster's spec has a Slurm section")
    slurm, groups = resolved_slurm.spec, resolved_slurm.node_groups
    head_subnet = slurm.head_node.subnet_id
    if head_subnet is None:  # resolution chose your own VPC's subnet in the head node's zone (the zone is checked)
        raise ValueError("the resolved Slurm section names the head node's subnet (your own VPC's, in its zone)")
    lustre = _lustre(args.get("lustre"), inputs)
    if lustre is not None:  # the Args' file system is mounted on every compute node: their health checks expect it
        cluster = with_groups(cluster, lambda g: with_shared_fs(g, SharedFs(lustre[1].mount_point, "lustre")))
        groups = cluster.slurm.node_groups if cluster.slurm is not None else groups
    ctx = SlurmContext.of(cluster)
    user_data = {g.name: compute_user_data(cluster, g, ctx, lustre, inputs) for g in groups}
    wiring = SlurmWiring(
        vpc_id=inputs.real(str(resolved.network.vpc_id)),
        head_subnet_id=inputs.real(head_subnet),
        node_group_subnet_ids={g.name: _group_subnets(resolved, g.spec, inputs) for g in groups},
        security_group_ids=args["security_group_ids"],
        user_data=user_data,
        shared_storage=[lustre[0]] if lustre is not None else [],
        tags=cluster_tags(resolved.name, resolved.tags),
        inputs=inputs,
        people=_people(resolved_slurm, inputs),
    )
    return Adapted(cluster, wiring)


def _people(slurm: ResolvedSlurm, inputs: Inputs) -> People:
    """The people part with your own VPC's subnets (a SlurmCluster's network is always the program's); the VPC's
    CIDR is looked up by the builder."""
    login, home = slurm.login, slurm.home
    login_subnets = inputs.real_list(list(login.subnets)) if login is not None else None
    lb_subnets = inputs.real_list(list(login.ssh.subnets)) if login is not None and login.ssh is not None else None
    return People(
        identity=slurm.identity,
        login=login,
        home=home,
        login_subnet_ids=login_subnets,
        login_lb_subnet_ids=lb_subnets,
        home_subnet_id=inputs.real_optional(home.subnet) if home is not None else None,
    )


def _group_subnets(spec: ClusterSpec, group: NodeGroupSpec, inputs: Inputs) -> pulumi.Input[Sequence[pulumi.Input[str]]]:
    """The stack's rule (``GpuCluster.subnets_for`` over a BYO network): the group's own subnets, else the
    first listed subnet of each of its zones."""
    if group.subnet_ids:
        return inputs.real_list(list(group.subnet_ids))
    firsts: dict[str, str] = {}
    for subnet in spec.network.subnets:
        firsts.setdefault(subnet.availability_zone, subnet.id)
    return [inputs.real(firsts[z]) for z in group.availability_zones]


def _lustre(given: Mapping[str, Any] | None, inputs: Inputs) -> tuple[SharedStorage, LustreMount] | None:
    """The Lustre mount the program passed, with the stack's mount point and options where unset."""
    if not given:
        return None
    missing = [camel for key, camel in (("dns_name", "dnsName"), ("mount_name", "mountName")) if not given.get(key)]
    if missing:
        raise ConfigError(
            [error(f"args.lustre.{m}", "is required", "pass the file system's value (an Output is fine)") for m in missing],
            SOURCE,
        )
    mount_point = given.get("mount_point", LustreSpec.model_fields["mount_point"].default)
    options = given.get("mount_options", LustreSpec.model_fields["mount_options"].default)
    refused = []
    for camel, value, check in (
        ("mountPoint", mount_point, lambda v: check_mount_point(v, "mountPoint")),
        ("mountOptions", options, check_mount_options),
    ):
        try:
            check(str(value))
        except ValueError as exc:  # the stack's own rules (gpucluster.config.storage.mounts), with the field's path
            message, _, fix = str(exc).partition(FIX_MARK)
            refused.append(error(f"args.lustre.{camel}", message, fix, value))
    if refused:
        raise ConfigError(refused, SOURCE)
    shared = SharedStorage(
        "fsx",
        "lustre",
        mount_point,
        options,
        server=given["dns_name"],
        mount_name=given["mount_name"],
        file_system_id=given.get("file_system_id"),
    )
    mount = LustreMount(
        file_system="fs-00000000000000000",
        dns_name="stand-in",
        mount_name="stand-in",
        mount_point=mount_point,
        mount_options=options,
    )
    return shared, mount


def compute_user_data(
    cluster: ResolvedCluster,
    group: SlurmGroup,
    ctx: SlurmContext,
    lustre: tuple[SharedStorage, LustreMount] | None,
    inputs: Inputs,
) -> pulumi.Output[str]:
    """A Slurm compute node's user data, as the stack renders it: the node's own part, the Lustre mount
    (once the file system's names are known), then the slurmd part."""

    def render(values: list[Any]) -> str:
        config = node_cloud_config(cluster.name, group, None)
        if lustre is not None:
            mount = dataclasses.replace(lustre[1], dns_name=str(values[0]), mount_name=str(values[1]), file_system=str(values[2]))
            config += lustre_part(mount, group)
        config += node_slurm_part(ctx, group)
        return render_cloud_config(user_data_title(cluster.name, group), config, gzipped=True)

    if lustre is None:
        text: pulumi.Output[str] = pulumi.Output.from_input(render([]))
    else:
        fs = lustre[0]
        text = pulumi.Output.all(fs.server, fs.mount_name, fs.file_system_id or "").apply(render)
    return text.apply(lambda t: inputs.real_text(t))
