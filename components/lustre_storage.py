"""LustreStorage: an FSx for Lustre file system (or an existing one) in the shared-storage shape.

PERSISTENT_2 with a metadata configuration, LZ4 compression, a KMS key of its own, daily backups
and a final backup on delete; EFA-enabled where asked (the file system then also joins the
cluster's EFA security group, whose self-referencing rules EFA needs); S3 data repository
associations with automatic import/export. The file system, its key and its associations are
protected and retained on delete unless the stack opts out (``storage.protectData: false``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpucluster.components._aws.security import BOTH_WAYS, allow
from gpucluster.components.shared_storage import SharedStorage
from gpucluster.config.naming import with_name
from gpucluster.config.storage import DataRepositorySpec, LustreSpec

TOKEN = "gpucluster:index:LustreStorage"
LUSTRE_PORTS = ((988, 988), (1018, 1023))  # LNet and the Lustre services (FSx user guide, "File system access control")
LUSTRE_VERSION = "2.15"


@dataclass
class LustreStorageArgs:
    """Inputs of :class:`LustreStorage`."""

    lustre: LustreSpec
    """The resolved Lustre spec (capacity, tier and zone chosen). Required."""

    cluster_name: str
    """Cluster name: prefix of resource names."""

    vpc_id: pulumi.Input[str]
    """VPC of the file system's security group. Required."""

    subnet_id: pulumi.Input[str]
    """Subnet (in ``lustre.availabilityZone``) for a new file system. Required."""

    client_security_group_id: pulumi.Input[str]
    """Security group of the clients (the cluster's EFA group): allowed to reach the Lustre ports. Required."""

    efa_security_group_id: pulumi.Input[str] | None = None
    """The cluster's EFA security group; an EFA-enabled file system joins it. Default: none."""

    bucket_name: pulumi.Input[str] | None = None
    """The cluster's data bucket, for data repositories given as ``bucketPrefix``. Default: none."""

    protect: bool = True
    """Protect and retain the file system, its key and associations. Default true."""

    tags: dict[str, str] = field(default_factory=dict)
    """Tags on every taggable child. Default: none."""


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


class LustreStorage(pulumi.ComponentResource):
    """FSx for Lustre, new or attached."""

    file_system_id: pulumi.Output[str]
    dns_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]
    security_group_id: pulumi.Output[str] | None
    kms_key_arn: pulumi.Output[str] | None
    shared_storage: SharedStorage

    def __init__(self, name: str, args: LustreStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        fs = args.lustre
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, protect=args.protect, retain_on_delete=args.protect)
        prefix = f"{args.cluster_name}-lustre"
        tags = with_name(args.tags, prefix)
        self.security_group_id = None
        self.kms_key_arn = None
        if fs.file_system_id:
            existing = aws.fsx.LustreFileSystem.get(f"{name}-fs", fs.file_system_id, opts=child)
            self.file_system_id, self.dns_name, self.mount_name = existing.id, existing.dns_name, existing.mount_name
        else:
            sg = self._security_group(name, args, tags, child)
            self.security_group_id = sg.id
            kms_key_id: pulumi.Input[str] | None = fs.kms_key_id
            persistent = fs.deployment_type.startswith("PERSISTENT")
            if kms_key_id is None and persistent:
                key = aws.kms.Key(
                    f"{name}-key",
                    description=f"Encryption at rest of the {args.cluster_name} Lustre file system",
                    enable_key_rotation=True,
                    deletion_window_in_days=30,
                    tags=tags,
                    opts=keep,
                )
                aws.kms.Alias(f"{name}-key", name=f"alias/{prefix}", target_key_id=key.key_id, opts=child)
                kms_key_id = key.arn
            self.kms_key_arn = pulumi.Output.from_input(kms_key_id) if kms_key_id else None
            groups: list[pulumi.Input[str]] = [sg.id]
            if fs.enable_efa and args.efa_security_group_id is not None:
                groups.append(args.efa_security_group_id)
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
                subnet_ids=args.subnet_id,  # one subnet: pulumi-aws 7 takes it as a string
                security_group_ids=groups,
                file_system_type_version=LUSTRE_VERSION,
                data_compression_type=fs.data_compression,
                kms_key_id=kms_key_id if persistent else None,
                automatic_backup_retention_days=fs.automatic_backup_retention_days if persistent else None,
                daily_automatic_backup_start_time="05:00" if persistent and fs.automatic_backup_retention_days else None,
                copy_tags_to_backups=persistent or None,
                skip_final_backup=False if persistent else None,
                metadata_configuration=metadata,
                efa_enabled=fs.enable_efa or None,
                weekly_maintenance_start_time="7:06:00",
                tags=tags,
                opts=keep,
            )
            self.file_system_id, self.dns_name, self.mount_name = filesystem.id, filesystem.dns_name, filesystem.mount_name
            for i, repo in enumerate(fs.data_repositories):
                aws.fsx.DataRepositoryAssociation(
                    f"{name}-dra-{i}",
                    file_system_id=filesystem.id,
                    file_system_path=repo.file_system_path,
                    data_repository_path=repository_path(repo, args.bucket_name),
                    batch_import_meta_data_on_create=repo.batch_import_metadata_on_create,
                    delete_data_in_filesystem=False,
                    s3=aws.fsx.DataRepositoryAssociationS3Args(
                        auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(
                            events=list(repo.import_events)
                        )
                        if repo.import_events
                        else None,
                        auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(
                            events=list(repo.export_events)
                        )
                        if repo.export_events
                        else None,
                    ),
                    tags=with_name(args.tags, f"{prefix}{repo.file_system_path}"),
                    opts=keep,
                )
        self.shared_storage = SharedStorage(
            name="lustre",
            fs_type="lustre",
            mount_point=fs.mount_point,
            mount_options=fs.mount_options,
            server=self.dns_name,
            mount_name=self.mount_name,
            file_system_id=self.file_system_id,
            capacity_gib=fs.storage_capacity_gib,
            efa_enabled=fs.enable_efa,
        )
        self.register_outputs({"fileSystemId": self.file_system_id, "dnsName": self.dns_name, "mountName": self.mount_name})

    @staticmethod
    def _security_group(
        name: str, args: LustreStorageArgs, tags: dict[str, str], child: pulumi.ResourceOptions
    ) -> aws.ec2.SecurityGroup:
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=args.vpc_id,
            description=f"FSx for Lustre of {args.cluster_name}: Lustre ports from cluster nodes",
            tags=tags,
            opts=child,
        )
        peers: Sequence[tuple[str, pulumi.Input[str]]] = (("self", sg.id), ("clients", args.client_security_group_id))
        for who, peer in peers:
            for low, high in LUSTRE_PORTS:
                for direction, word in BOTH_WAYS:
                    allow(f"{name}-{direction}-{who}-{low}", direction, sg.id, peer_security_group_id=peer, protocol="tcp",
                          ports=(low, high), description=f"Lustre {low}-{high} {word} {who}", tags=tags, opts=child)  # fmt: skip
        return sg
