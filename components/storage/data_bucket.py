"""DataBucket: an S3 bucket for datasets and checkpoints — versioned, SSE-KMS, never public, TLS only.

Its KMS key lets FSx for Lustre's S3-access service-linked roles use it, so data repository
associations can import from and export to the bucket. Bucket and key are protected and retained
on delete unless the stack opts out.
"""

import json
from dataclasses import dataclass, field
from typing import Required

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.buckets import LifecycleRule, bucket_lifecycle, private_bucket
from gpucluster.components._shared.config_types import BucketConfig
from gpucluster.components._shared.edge import Adapted, at_edge, config_part, required, validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.config.errors import raise_for
from gpucluster.config.naming import cluster_tags, with_name
from gpucluster.config.storage import BucketSpec

TOKEN = "gpucluster:index:DataBucket"


class DataBucketArgs(BucketConfig, total=False):
    """Inputs of :class:`DataBucket`: the ``storage.bucket`` settings and the cluster it belongs to."""

    cluster_name: Required[str]
    """Cluster name: prefix of resource names and of the default bucket name. Required."""
    protect: bool
    """Protect and retain the bucket and its key. Default true (``storage.protectData``)."""
    tags: dict[str, str]
    """Tags on every taggable child. Default: none."""


@dataclass(frozen=True)
class BucketWiring:
    """Whose bucket it is and how it is kept."""

    cluster_name: str
    protect: bool = True
    tags: dict[str, str] = field(default_factory=dict)


def from_args(args: DataBucketArgs) -> Adapted[BucketSpec, BucketWiring]:
    """The bucket settings of ``args``, validated with the stack's model; errors name ``args.<field>``."""
    raise_for(required(args, {"cluster_name": "clusterName"}, "pass the cluster's name"), "DataBucket args")
    spec = validate(
        BucketSpec,
        Inputs("DataBucket").prepare(config_part(args, DataBucketArgs, BucketConfig), BucketConfig),
        "DataBucket args",
    )
    cluster_name = args["cluster_name"]
    return Adapted(spec, BucketWiring(cluster_name, args.get("protect", True), cluster_tags(cluster_name, args.get("tags", {}))))


def key_policy(account: str, partition: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "AccountAdministers",
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
                    "Action": "kms:*",
                    "Resource": "*",
                },
                {
                    "Sid": "FsxLustreDataRepositories",
                    "Effect": "Allow",
                    "Principal": {"AWS": "*"},
                    "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*", "kms:DescribeKey"],
                    "Resource": "*",
                    "Condition": {
                        "StringEquals": {"aws:PrincipalAccount": account},
                        "ArnLike": {
                            "aws:PrincipalArn": f"arn:{partition}:iam::{account}:role/aws-service-role/"
                            "s3.data-source.lustre.fsx.amazonaws.com/*"
                        },
                    },
                },
            ],
        },
        sort_keys=True,
    )


class DataBucket(pulumi.ComponentResource):
    """The cluster's dataset/checkpoint bucket."""

    bucket_name: pulumi.Output[str]
    """The bucket's name (``namePrefix`` or ``<clusterName>-data-``, plus a unique suffix)."""
    bucket_arn: pulumi.Output[str]
    """The bucket's ARN."""
    kms_key_arn: pulumi.Output[str]
    """ARN of the KMS key that encrypts the bucket's objects (FSx's data repository roles may use it)."""

    def __init__(self, name: str, args: DataBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("DataBucket"):
            adapted = from_args(args)  # before any resource, the component included
        super().__init__(TOKEN, name, None, opts)
        spec, wiring = adapted.resolved, adapted.wiring
        protect, cluster_name = wiring.protect, wiring.cluster_name
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect)
        tags = with_name(wiring.tags, f"{cluster_name}-data")
        invoke = pulumi.InvokeOutputOptions(parent=self)
        identity = aws.get_caller_identity_output(opts=invoke)
        partition = aws.get_partition_output(opts=invoke)
        key = aws.kms.Key(
            f"{name}-key",
            description=f"Encryption of the {cluster_name} data bucket",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            policy=pulumi.Output.all(identity.account_id, partition.partition).apply(lambda v: key_policy(v[0], v[1])),
            tags=tags,
            opts=keep,
        )
        aws.kms.Alias(f"{name}-key", name=f"alias/{cluster_name}-data", target_key_id=key.key_id, opts=child)
        bucket = private_bucket(
            f"{name}-bucket",
            name,
            bucket_prefix=spec.name_prefix or f"{cluster_name}-data-",
            force_destroy=False,
            tags=tags,
            bucket_opts=keep,
            child_opts=child,
            kms_key_arn=key.arn,
        )
        aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        bucket_lifecycle(
            f"{name}-lifecycle",
            bucket,
            [
                LifecycleRule("abort-incomplete-uploads", abort_days=spec.abort_incomplete_upload_days),
                LifecycleRule("expire-old-versions", noncurrent_days=spec.noncurrent_version_days),
            ],
            child,
        )
        self.bucket_name, self.bucket_arn, self.kms_key_arn = bucket.bucket, bucket.arn, key.arn
        self.register_outputs({"bucketName": self.bucket_name, "bucketArn": self.bucket_arn, "kmsKeyArn": self.kms_key_arn})
