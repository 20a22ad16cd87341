"""The shared ``/home`` of a Slurm cluster's people (docs/people.md, "Home directories and quotas"): FSx for OpenZFS.

``build_home_storage(parent, name, resolved, wiring)`` makes, under ``parent``:

- ``<name>-sg``: NFS from the Slurm nodes' security groups only (head, login, compute): TCP and UDP 111
  (rpcbind), 2049 (NFS) and 20001–20003 (the file system's mount, status and lock daemons), the ports of the
  FSx for OpenZFS guide's "Amazon VPC security groups" page
  (docs.aws.amazon.com/fsx/latest/OpenZFSGuide/limit-access-security-groups.html). No EKS pod, no CIDR reaches it.
- ``<name>-fs``: an ``aws.fsx.OpenZfsFileSystem`` of the resolved deployment type, capacity and throughput in the
  head node's subnet, automatic backups, the resolved KMS key (else ``aws/fsx``), its root volume exported to the
  VPC's CIDR only.
- ``<name>-volume``: the child volume ``home`` (``/fsx/home``), the same exports, and a USER quota per resolved
  ``(uid, GiB)``. Quotas sit on a child volume because CloudFormation replaces a file system whose root volume's
  quotas change; on a child volume the provider updates them in place: terraform-provider-aws
  ``internal/service/fsx/openzfs_volume.go`` (which pulumi-aws bridges) marks ``user_and_group_quotas`` neither
  ForceNew nor replace-on-change, and its Update sends them with ``UpdateVolume``.

Both are protected and retained when ``resolved.protect`` (the head node data volume's rule), with a final backup.
Exports are ``rw,crossmnt,no_root_squash,sync``: root on any Slurm node can read the munge key and so act as any
user (docs/people.md, "Who is root"), so squashing root on ``/home`` buys nothing; the security group is the boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.security import allow
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.naming import with_name
from gpucluster.resolve.slurm.identity import ResolvedHome

NFS_PORTS = ((111, 111), (2049, 2049), (20001, 20003))
EXPORT_OPTIONS = ("rw", "crossmnt", "no_root_squash", "sync")
VOLUME_NAME = "home"


@dataclass(frozen=True)
class HomeWiring:
    """What the home file system takes from the cluster; any of it may be an Output."""

    cluster: str
    vpc_id: pulumi.Input[str]
    vpc_cidr: pulumi.Input[str]
    """The VPC's CIDR: the only NFS clients the exports name."""
    subnet_id: pulumi.Input[str]
    """The head node's subnet (``resolved.subnet``, or the new VPC's private subnet of ``resolved.zone``)."""
    clients: Mapping[str, pulumi.Input[str]]
    """Security group of each kind of client (``head``, ``login``, ``compute``): the only sources NFS admits."""
    tags: dict[str, str]
    restricted_egress: tuple[str, ...] = ("login",)
    """Clients whose group does not allow all egress (the login nodes'): they get NFS egress to the file system."""


@dataclass(frozen=True)
class HomeParts:
    """What :func:`build_home_storage` made."""

    file_system_id: pulumi.Output[str]
    volume_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    storage: SharedStorage
    """The shared-storage shape nodes mount: server = the file system's DNS name, ``/fsx/home`` on ``/home``."""


def _exports(cidr: pulumi.Input[str]) -> list[aws.fsx.OpenZfsVolumeNfsExportsClientConfigurationArgs]:
    return [aws.fsx.OpenZfsVolumeNfsExportsClientConfigurationArgs(clients=cidr, options=list(EXPORT_OPTIONS))]


def _security_group(name: str, wiring: HomeWiring, opts: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
    sg = aws.ec2.SecurityGroup(
        f"{name}-sg",
        vpc_id=wiring.vpc_id,
        description=f"FSx for OpenZFS /home of {wiring.cluster}: NFS from the Slurm nodes only",
        tags=with_name(wiring.tags, f"{wiring.cluster}-home"),
        opts=opts,
    )
    for who, peer in wiring.clients.items():
        for protocol in ("tcp", "udp"):
            for low, high in NFS_PORTS:
                allow(f"{name}-in-{who}-{protocol}-{low}", "in", sg.id, peer_security_group_id=peer, protocol=protocol,
                      ports=(low, high), description=f"NFS {protocol} {low}-{high} from {who} nodes", tags=wiring.tags,
                      opts=opts)  # fmt: skip
                if who in wiring.restricted_egress:
                    allow(f"{name}-out-{who}-{protocol}-{low}", "out", peer, peer_security_group_id=sg.id,
                          protocol=protocol, ports=(low, high), description=f"NFS {protocol} {low}-{high} to /home",
                          tags=wiring.tags, opts=opts)  # fmt: skip
    return sg


def build_home_storage(parent: pulumi.Resource, name: str, resolved: ResolvedHome, wiring: HomeWiring) -> HomeParts:
    """The file system, its ``home`` volume and security group under ``parent`` (the module's list)."""
    opts = pulumi.ResourceOptions(parent=parent)
    keep = pulumi.ResourceOptions(parent=parent, protect=resolved.protect, retain_on_delete=resolved.protect)
    sg = _security_group(name, wiring, opts)
    fs = aws.fsx.OpenZfsFileSystem(
        f"{name}-fs",
        deployment_type=resolved.deployment_type,
        storage_capacity=resolved.storage_gib,
        storage_type="SSD",
        throughput_capacity=resolved.throughput,
        subnet_ids=[wiring.subnet_id],
        security_group_ids=[sg.id],
        automatic_backup_retention_days=resolved.backup_days,
        copy_tags_to_backups=True,
        copy_tags_to_volumes=True,
        skip_final_backup=not resolved.protect,
        kms_key_id=resolved.kms_key_id,
        root_volume_configuration=aws.fsx.OpenZfsFileSystemRootVolumeConfigurationArgs(
            data_compression_type="LZ4",
            nfs_exports=aws.fsx.OpenZfsFileSystemRootVolumeConfigurationNfsExportsArgs(
                client_configurations=[
                    aws.fsx.OpenZfsFileSystemRootVolumeConfigurationNfsExportsClientConfigurationArgs(
                        clients=wiring.vpc_cidr, options=list(EXPORT_OPTIONS)
                    )
                ]
            ),
        ),
        tags=with_name(wiring.tags, f"{wiring.cluster}-home"),
        opts=keep,
    )
    volume = aws.fsx.OpenZfsVolume(
        f"{name}-volume",
        name=VOLUME_NAME,
        parent_volume_id=fs.root_volume_id,
        data_compression_type="LZ4",
        nfs_exports=aws.fsx.OpenZfsVolumeNfsExportsArgs(client_configurations=_exports(wiring.vpc_cidr)),
        user_and_group_quotas=[
            aws.fsx.OpenZfsVolumeUserAndGroupQuotaArgs(id=uid, storage_capacity_quota_gib=gib, type="USER")
            for uid, gib in resolved.quotas
        ],
        tags=with_name(wiring.tags, f"{wiring.cluster}-home"),
        opts=keep,
    )
    storage = SharedStorage(
        name=VOLUME_NAME,
        fs_type="nfs4",
        mount_point=resolved.mount_point,
        mount_options=resolved.mount_options,
        server=fs.dns_name,
        mount_name=resolved.volume_path,
        file_system_id=fs.id,
        capacity_gib=resolved.storage_gib,
    )
    return HomeParts(file_system_id=fs.id, volume_id=volume.id, security_group_id=sg.id, storage=storage)
