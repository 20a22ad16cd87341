"""LustreStorage: an FSx for Lustre file system (or an existing one) in the shared-storage shape.

PERSISTENT_2 with a metadata configuration, LZ4 compression, a KMS key of its own, daily backups
and a final backup on delete; EFA-enabled where asked (the file system then also joins the
cluster's EFA security group, whose self-referencing rules EFA needs); S3 data repository
associations with automatic import/export. The file system, its key and its associations are
protected and retained on delete unless the stack opts out (``storage.protectData: false``).

Root squash is on (``rootSquash``, default nobody:nogroup): root on a client is nobody on the file system, except
on the admin hosts, whose NIDs (``<private ip>@tcp``) are the no-squash clients: ``noSquashClients`` and
``adminHostIps`` (the stack passes its Slurm head node's or its storage setup host's address, both on network
interfaces of their own, so the address outlives the instance).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Required

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.build import adopt
from gpucluster.components._shared.config_types import LustreConfig, WorkloadConfig
from gpucluster.components._shared.edge import Adapted, at_edge, config_part, validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.components._shared.security import BOTH_WAYS, allow
from gpucluster.components.storage._setup import SetupHost, setup_host, setup_network
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.checks.storage import check_lustre_settings
from gpucluster.config.errors import error, raise_for
from gpucluster.config.naming import cluster_tags, with_name
from gpucluster.config.storage import MAX_NO_SQUASH_NIDS, DataRepositorySpec, LustreSpec, WorkloadSpec
from gpucluster.config.storage.sizing import size_lustre
from gpucluster.render.compute.node import LustreMount
from gpucluster.resolve.storage import resolve_lustre
from gpucluster.resolve.storage.team import TeamDirectory

TOKEN = "gpucluster:index:LustreStorage"
LUSTRE_PORTS = ((988, 988), (1018, 1023))  # LNet and the Lustre services (FSx user guide, "File system access control")
LUSTRE_VERSION = "2.15"


class LustreStorageArgs(LustreConfig, total=False):
    """Inputs of :class:`LustreStorage`: the ``storage.lustre`` settings, and what connects the file system
    to its VPC, clients and bucket."""

    cluster_name: Required[str]
    """Cluster name: prefix of resource names. Required."""
    vpc_id: Required[pulumi.Input[str]]
    """VPC of the file system's security group. Required. May be an Output of another resource."""
    subnet_id: pulumi.Input[str]
    """Subnet (in ``availabilityZone``) of a new file system. Required unless ``fileSystemId`` is given."""
    client_security_group_id: pulumi.Input[str]
    """Security group of the clients, allowed to reach the Lustre ports. Required unless ``fileSystemId`` is given."""
    efa_security_group_id: pulumi.Input[str]
    """The clients' EFA security group; an EFA-enabled file system joins it. Default: none."""
    admin_host_ips: list[pulumi.Input[str]]
    """Private IPv4 addresses of the hosts that keep root on the file system (they create the directories users
    and teams write in: a new file system's root belongs to root). Each becomes the no-squash NID ``<ip>@tcp``
    beside ``noSquashClients``. May be Outputs. Default: none."""
    bucket_name: pulumi.Input[str]
    """Name of the bucket that ``dataRepositories[].bucketPrefix`` refers to (a ``DataBucket``'s ``bucket_name``).
    Default: none (give ``s3Path`` instead)."""
    workload: WorkloadConfig
    """The workload the file system is sized for, as ``storage.workload``; ``gpuCount`` is required here (no
    node groups to count). Default: none (give ``storageCapacityGib`` and ``throughputPerUnitStorage``)."""
    protect: bool
    """Protect and retain the file system, its key and associations. Default true (``storage.protectData``)."""
    tags: dict[str, str]
    """Tags on every taggable child. Default: none."""


@dataclass(frozen=True)
class LustreWiring:
    """What a file system connects to, checked: the stack's path builds it from its own resources."""

    cluster_name: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str] | None
    client_security_group_id: pulumi.Input[str] | None
    efa_security_group_id: pulumi.Input[str] | None = None
    admin_host_ips: Sequence[pulumi.Input[str]] = ()
    setup_directories: tuple[TeamDirectory, ...] | None = None
    """The stack's storage setup host and what it creates (:mod:`gpucluster.components.storage._setup`); None: no
    setup host."""
    node_security_group_ids: Sequence[pulumi.Input[str]] = ()
    """The nodes' groups: the setup host joins them when the file system is an existing one (it admits the nodes)."""
    bucket_name: pulumi.Input[str] | None = None
    protect: bool = True
    tags: dict[str, str] = field(default_factory=dict)
    inputs: Inputs | None = None
    """Gives back the Outputs a program passed (``fileSystemId``, ``kmsKeyId``); none in the stack."""


def from_args(args: LustreStorageArgs) -> Adapted[LustreSpec, LustreWiring]:
    """``args`` validated with the stack's model, checks and defaults; errors name ``args.<field>``."""
    inputs = Inputs("LustreStorage", pulumi.Config("aws").get("region") or "us-east-1")
    config = config_part(args, LustreStorageArgs, LustreConfig)
    fs = validate(LustreSpec, inputs.prepare(config, LustreConfig), "LustreStorage args")
    workload = None
    if "workload" in args:
        plain = inputs.prepare(args["workload"], WorkloadConfig, "args.workload")
        workload = validate(WorkloadSpec, plain, "LustreStorage args", "args.workload")
    findings = list(
        check_lustre_settings(fs, workload, has_bucket="bucket_name" in args, path="args", workload_path="args.workload")
    )
    if workload is not None and not fs.file_system_id and workload.gpu_count is None:
        findings.append(error("args.workload.gpuCount", "a standalone file system has no node groups to count GPUs from",
                              "give the number of GPUs that read at once"))  # fmt: skip
    needed = {"cluster_name": "clusterName", "vpc_id": "vpcId"}
    if not fs.file_system_id:
        needed.update(subnet_id="subnetId", client_security_group_id="clientSecurityGroupId")
    for key, field_name in needed.items():
        if args.get(key) is None:
            findings.append(error(f"args.{field_name}", "is required", "pass it (an Output of another resource is fine)"))
    admins = list(args.get("admin_host_ips", []))
    if len(admins) + len(fs.no_squash_clients) > MAX_NO_SQUASH_NIDS:
        findings.append(error("args.adminHostIps", f"{len(admins)} admin hosts and {len(fs.no_squash_clients)} "
                              f"noSquashClients are more than the {MAX_NO_SQUASH_NIDS} no-squash clients FSx takes",
                              "list fewer, or cover neighbours with a range in noSquashClients"))  # fmt: skip
    for finding in raise_for(findings, "LustreStorage args"):
        pulumi.log.warn(finding.render())
    sizing = size_lustre(workload, fs, []) if workload is not None and not fs.file_system_id else None
    wiring = LustreWiring(
        cluster_name=args["cluster_name"],
        vpc_id=args["vpc_id"],
        subnet_id=args.get("subnet_id"),
        client_security_group_id=args.get("client_security_group_id"),
        efa_security_group_id=args.get("efa_security_group_id"),
        admin_host_ips=tuple(admins),
        bucket_name=args.get("bucket_name"),
        protect=args.get("protect", True),
        tags=cluster_tags(args["cluster_name"], args.get("tags", {})),
        inputs=inputs,
    )
    return Adapted(resolve_lustre(fs, sizing), wiring)


def repository_path(repo: DataRepositorySpec, bucket_name: pulumi.Input[str] | None) -> pulumi.Input[str]:
    if repo.s3_path:
        return repo.s3_path
    if bucket_name is None:
        raise pulumi.InputPropertiesError(
            "bucketPrefix needs the cluster's data bucket",
            [{"property_path": "data_repositories", "reason": "configure storage.bucket or use s3Path"}],
        )
    prefix = (repo.bucket_prefix or "").lstrip("/")
    return pulumi.Output.from_input(bucket_name).apply(lambda b: f"s3://{b}/{prefix}")


def root_squash_configuration(
    fs: LustreSpec, admin_host_ips: Sequence[pulumi.Input[str]]
) -> aws.fsx.LustreFileSystemRootSquashConfigurationArgs:
    """Root squash as FSx takes it: ``rootSquash`` and the no-squash NIDs (``noSquashClients``, then each admin
    host's ``<ip>@tcp``, once each); ``0:0`` and none when the stack opted out (``unsafeDisableRootSquash``), so a
    file system that squashed before stops, rather than keeping a setting the stack no longer states."""
    if fs.unsafe_disable_root_squash:
        return aws.fsx.LustreFileSystemRootSquashConfigurationArgs(root_squash="0:0", no_squash_nids=[])
    nids = pulumi.Output.all(*admin_host_ips).apply(
        lambda ips: list(dict.fromkeys([*fs.no_squash_clients, *(f"{ip}@tcp" for ip in ips)]))
    )
    return aws.fsx.LustreFileSystemRootSquashConfigurationArgs(root_squash=fs.root_squash, no_squash_nids=nids)


class LustreStorage(pulumi.ComponentResource):
    """FSx for Lustre, new or attached."""

    # Outputs other languages get (the schema reads these annotations); ``shared_storage``, what the
    # stack's node groups mount, is annotated where ``__init__`` assigns it and stays out of the schema.
    file_system_id: pulumi.Output[str]
    """The file system's id (``fs-…``): the new one's, or ``fileSystemId`` as given."""
    dns_name: pulumi.Output[str]
    """The file system's DNS name: the server clients mount from."""
    mount_name: pulumi.Output[str]
    """The file system's mount name: ``mount -t lustre <dnsName>@tcp:/<mountName> <mountPoint>``."""
    security_group_id: pulumi.Output[str] | None
    """The file system's security group (Lustre ports from the clients); absent for an attached file system."""
    kms_key_arn: pulumi.Output[str] | None
    """The key that encrypts the file system at rest, created here unless ``kmsKeyId`` names one; absent for an
    attached or scratch file system."""

    def __init__(self, name: str, args: LustreStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("LustreStorage"):
            adapted = from_args(args)  # every error before any resource
        super().__init__(TOKEN, name, None, opts)
        adopt(self, build_lustre(self, name, adapted.resolved, adapted.wiring))


class LustreParts:
    """What :func:`build_lustre` made: a ``LustreStorage``'s outputs, its setup host and its shared-storage shape."""

    file_system_id: pulumi.Output[str]
    dns_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]
    shared_storage: SharedStorage
    """What nodes mount (``GpuNodeGroupArgs.shared_storage``, Slurm, Kubernetes)."""

    def __init__(self) -> None:
        self.security_group_id: pulumi.Output[str] | None = None
        self.kms_key_arn: pulumi.Output[str] | None = None
        self.setup_host: SetupHost | None = None  # the file system's admin host


def build_lustre(parent: pulumi.ComponentResource, name: str, fs: LustreSpec, wiring: LustreWiring) -> LustreParts:
    """The file system of ``fs`` (resolved), children of ``parent``; registers ``parent``'s outputs."""
    parts = LustreParts()
    inputs = wiring.inputs or Inputs("LustreStorage")
    child = pulumi.ResourceOptions(parent=parent)
    setup_net = None
    if wiring.setup_directories is not None:  # before the file system: its address is a no-squash client
        if wiring.subnet_id is None:
            raise ValueError("the storage setup host needs the file system's subnet")
        extra = wiring.node_security_group_ids if fs.file_system_id else ()
        setup_net = setup_network(f"{name}-setup", cluster=wiring.cluster_name, vpc_id=wiring.vpc_id,
                                  subnet_id=wiring.subnet_id, extra_security_group_ids=extra, tags=wiring.tags, parent=parent)  # fmt: skip
        wiring = replace(wiring, admin_host_ips=(*wiring.admin_host_ips, setup_net.private_ip))
    admin_sg = setup_net.security_group_id if setup_net is not None else None
    dras: list[aws.fsx.DataRepositoryAssociation] = []
    if fs.file_system_id:
        existing = aws.fsx.LustreFileSystem.get(f"{name}-fs", inputs.real(fs.file_system_id), opts=child)
        parts.file_system_id, parts.dns_name, parts.mount_name = existing.id, existing.dns_name, existing.mount_name
    else:
        filesystem = _new_file_system(parts, parent, name, fs, wiring, admin_sg, inputs)
        dras = _data_repositories(parent, name, fs, wiring, filesystem)
    if setup_net is not None and wiring.setup_directories is not None:
        mount = LustreMount("", "", "", fs.mount_point, fs.mount_options)  # names filled in once AWS has them
        parts.setup_host = setup_host(f"{name}-setup", cluster=wiring.cluster_name, net=setup_net,
                                     file_system_security_group_id=parts.security_group_id, mount=mount,
                                     lustre_values=pulumi.Output.all(parts.dns_name, parts.mount_name, parts.file_system_id),
                                     directories=wiring.setup_directories, tags=wiring.tags, parent=parent,
                                     depends_on=dras)  # fmt: skip
    parts.shared_storage = SharedStorage(
        name="lustre",
        fs_type="lustre",
        mount_point=fs.mount_point,
        mount_options=fs.mount_options,
        server=parts.dns_name,
        mount_name=parts.mount_name,
        file_system_id=parts.file_system_id,
        capacity_gib=fs.storage_capacity_gib,
        efa_enabled=fs.enable_efa,
    )
    parent.register_outputs(
        {
            "fileSystemId": parts.file_system_id,
            "dnsName": parts.dns_name,
            "mountName": parts.mount_name,
            "securityGroupId": parts.security_group_id,
            "kmsKeyArn": parts.kms_key_arn,
        }
    )
    return parts


def _new_file_system(
    parts: LustreParts,
    parent: pulumi.ComponentResource,
    name: str,
    fs: LustreSpec,
    wiring: LustreWiring,
    admin_sg: pulumi.Input[str] | None,
    inputs: Inputs,
) -> aws.fsx.LustreFileSystem:
    """A new file system: its security group, its key (persistent types, unless ``kmsKeyId``), the file system."""
    child = pulumi.ResourceOptions(parent=parent)
    keep = pulumi.ResourceOptions(parent=parent, protect=wiring.protect, retain_on_delete=wiring.protect)
    prefix = f"{wiring.cluster_name}-lustre"
    tags = with_name(wiring.tags, prefix)
    sg = _security_group(name, wiring, admin_sg, tags, child)
    parts.security_group_id = sg.id
    kms_key_id: pulumi.Input[str] | None = inputs.real_optional(fs.kms_key_id)
    persistent = fs.deployment_type.startswith("PERSISTENT")
    if kms_key_id is None and persistent:
        key = aws.kms.Key(
            f"{name}-key",
            description=f"Encryption at rest of the {wiring.cluster_name} Lustre file system",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=keep,
        )
        aws.kms.Alias(f"{name}-key", name=f"alias/{prefix}", target_key_id=key.key_id, opts=child)
        kms_key_id = key.arn
    parts.kms_key_arn = pulumi.Output.from_input(kms_key_id) if kms_key_id else None
    groups: list[pulumi.Input[str]] = [sg.id]
    if fs.enable_efa and wiring.efa_security_group_id is not None:
        groups.append(wiring.efa_security_group_id)
    metadata = None
    if fs.deployment_type == "PERSISTENT_2" and fs.metadata_configuration:
        metadata = aws.fsx.LustreFileSystemMetadataConfigurationArgs(
            mode="USER_PROVISIONED" if fs.metadata_iops else "AUTOMATIC", iops=fs.metadata_iops
        )
    filesystem = aws.fsx.LustreFileSystem(
        f"{name}-fs",
        deployment_type=fs.deployment_type,
        storage_type="SSD",
        storage_capacity=fs.storage_capacity_gib,
        per_unit_storage_throughput=fs.throughput_per_unit_storage if persistent else None,
        subnet_ids=wiring.subnet_id,  # one subnet: pulumi-aws 7 takes it as a string
        security_group_ids=groups,
        file_system_type_version=LUSTRE_VERSION,
        data_compression_type=fs.data_compression,
        kms_key_id=kms_key_id if persistent else None,
        automatic_backup_retention_days=fs.automatic_backup_retention_days if persistent else None,
        daily_automatic_backup_start_time="05:00" if persistent and fs.automatic_backup_retention_days else None,
        copy_tags_to_backups=persistent or None,
        skip_final_backup=False if persistent else None,
        metadata_configuration=metadata,
        root_squash_configuration=root_squash_configuration(fs, wiring.admin_host_ips),
        efa_enabled=fs.enable_efa or None,
        weekly_maintenance_start_time="7:06:00",
        tags=tags,
        opts=keep,
    )
    parts.file_system_id, parts.dns_name, parts.mount_name = filesystem.id, filesystem.dns_name, filesystem.mount_name
    return filesystem


def _data_repositories(
    parent: pulumi.ComponentResource, name: str, fs: LustreSpec, wiring: LustreWiring, filesystem: aws.fsx.LustreFileSystem
) -> list[aws.fsx.DataRepositoryAssociation]:
    """The S3 data repository associations, automatic import and export as asked; protected like the file system."""
    keep = pulumi.ResourceOptions(parent=parent, protect=wiring.protect, retain_on_delete=wiring.protect)
    prefix = f"{wiring.cluster_name}-lustre"
    dras: list[aws.fsx.DataRepositoryAssociation] = []
    for repo in fs.data_repositories:
        # Named by its path, never its position: inserting a repository must not re-target the others.
        dras.append(
            aws.fsx.DataRepositoryAssociation(
                f"{name}-dra{repo.file_system_path.rstrip('/')}",
                file_system_id=filesystem.id,
                file_system_path=repo.file_system_path,
                data_repository_path=repository_path(repo, wiring.bucket_name),
                batch_import_meta_data_on_create=repo.batch_import_metadata_on_create,
                delete_data_in_filesystem=False,
                s3=aws.fsx.DataRepositoryAssociationS3Args(
                    auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(events=list(repo.import_events))
                    if repo.import_events
                    else None,
                    auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(events=list(repo.export_events))
                    if repo.export_events
                    else None,
                ),
                tags=with_name(wiring.tags, f"{prefix}{repo.file_system_path}"),
                opts=keep,
            )
        )
    return dras


def _security_group(
    name: str, wiring: LustreWiring, admin_sg: pulumi.Input[str] | None, tags: dict[str, str], child: pulumi.ResourceOptions
) -> aws.ec2.SecurityGroup:
    sg = aws.ec2.SecurityGroup(
        f"{name}-sg",
        vpc_id=wiring.vpc_id,
        description=f"FSx for Lustre of {wiring.cluster_name}: Lustre ports from cluster nodes",
        tags=tags,
        opts=child,
    )
    if wiring.client_security_group_id is None:
        raise ValueError("the file system needs its clients' security group")
    peers: list[tuple[str, pulumi.Input[str]]] = [("self", sg.id), ("clients", wiring.client_security_group_id)]
    if admin_sg is not None:  # the storage setup host
        peers.append(("admin", admin_sg))
    for who, peer in peers:
        for low, high in LUSTRE_PORTS:
            for direction, word in BOTH_WAYS:
                allow(f"{name}-{direction}-{who}-{low}", direction, sg.id, peer_security_group_id=peer, protocol="tcp",
                      ports=(low, high), description=f"Lustre {low}-{high} {word} {who}", tags=tags, opts=child)  # fmt: skip
    return sg
