"""Resolution of a Slurm cluster's people sections: identity, login nodes and the shared home, together (the home
decides the users' quotas; login nodes and the home sit in the head node's zone and subnet by default).

The types and the identity's own resolution: :mod:`gpucluster.resolve.slurm.identity`.
"""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import effective_protect
from gpucluster.config.slurm import UBUNTU_RELEASE, SlurmSpec
from gpucluster.config.slurm.home import HomeSpec
from gpucluster.config.slurm.login import LoginNodesSpec
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.images import default_image_parameter
from gpucluster.resolve.compute.node_group import ResolvedImage
from gpucluster.resolve.slurm.identity import (
    SRUN_PORTS,
    DeclaredIdentity,
    ResolvedHome,
    ResolvedIdentity,
    ResolvedLogin,
    ResolvedLoginSsh,
    resolve_identity,
)


def resolve_people(
    spec: ClusterSpec, slurm: SlurmSpec, catalog: Catalog, zone: str
) -> tuple[ResolvedIdentity | None, ResolvedLogin | None, ResolvedHome | None]:
    """``(identity, login, home)`` of a valid, resolved spec whose head node is in ``zone``; ``None`` = decided:
    not configured. The home is made iff ``identity`` is set and ``home.enabled`` (default: on)."""
    home_spec = slurm.home if slurm.home is not None else HomeSpec()
    made = slurm.identity is not None and home_spec.enabled
    identity = resolve_identity(slurm.identity, home_spec if made else None, slurm.teams) if slurm.identity is not None else None
    login = resolve_login(spec, slurm, slurm.login_nodes, catalog, zone) if slurm.login_nodes is not None else None
    home = resolve_home(spec, slurm, home_spec, identity, zone) if made else None
    return identity, login, home


def resolve_login(spec: ClusterSpec, slurm: SlurmSpec, login: LoginNodesSpec, catalog: Catalog, zone: str) -> ResolvedLogin:
    """The login nodes: ``<cluster>-login``, in ``subnetIds`` (else the head node's subnet; a new VPC: its private
    subnet of the head node's zone), the head node's image choice, the grace period in seconds."""
    net = spec.network
    if net.create_vpc:
        subnets: tuple[str, ...] = ()
        zones: tuple[str, ...] = (zone,)
    else:
        head_subnet = slurm.head_node.subnet_id
        subnets = tuple(login.subnet_ids) or ((head_subnet,) if head_subnet else ())
        zones = tuple(sorted({z for s in subnets if (z := net.subnet_zone(s)) is not None})) or (zone,)
    facts = catalog[login.instance_type]
    if login.image_id:
        image = ResolvedImage("ami", login.image_id)
    else:
        image = ResolvedImage("ssm-parameter", default_image_parameter(facts, UBUNTU_RELEASE))
    ssh = None
    if login.ssh is not None:
        public = login.ssh.scheme == "internet-facing"
        lb_subnets = () if net.create_vpc else (tuple(login.ssh.public_subnet_ids) if public else subnets)
        ssh = ResolvedLoginSsh(tuple(sorted(login.ssh.allowed_cidrs)), login.ssh.scheme, lb_subnets, zones)
    return ResolvedLogin(
        asg_name=f"{spec.name}-login",
        count=login.count,
        instance_type=login.instance_type,
        facts=facts,
        image=image,
        subnets=subnets,
        root_volume_gib=login.root_volume_size_gib,
        grace_seconds=login.grace_period_minutes * 60,
        srun_ports=SRUN_PORTS,
        ssh=ssh,
        zones=zones,
    )


def resolve_home(
    spec: ClusterSpec, slurm: SlurmSpec, home: HomeSpec, identity: ResolvedIdentity | None, zone: str
) -> ResolvedHome:
    """The shared home in the head node's zone and subnet, protected by the ``slurm.protectData`` rule unless
    ``home.protect`` says otherwise; quotas per declared user (a directory's uids are unknown at deploy)."""
    users = identity.source.users if identity is not None and isinstance(identity.source, DeclaredIdentity) else ()
    quotas = tuple(sorted((u.uid, u.home_quota_gib) for u in users if u.home_quota_gib is not None))
    return ResolvedHome(
        deployment_type=home.deployment_type,
        storage_gib=home.storage_capacity_gib,
        throughput=home.throughput_capacity,
        zone=zone,
        subnet=None if spec.network.create_vpc else slurm.head_node.subnet_id,
        quotas=quotas,
        default_user_quota_gib=home.default_user_quota_gib,
        backup_days=home.automatic_backup_retention_days,
        kms_key_id=home.kms_key_id,
        protect=home.protect if home.protect is not None else effective_protect(spec),
    )
