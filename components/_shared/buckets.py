"""The baseline every bucket of a cluster gets: owner-enforced, never public, encrypted, TLS only."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws


def tls_only_policy(bucket_arn: str, extra: Sequence[dict[str, Any]] = ()) -> str:
    """The bucket policy: refuse plain HTTP, then the ``extra`` statements (e.g. a log delivery grant)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [bucket_arn, f"{bucket_arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
                *extra,
            ],
        },
        sort_keys=True,
    )


def private_bucket(
    resource_name: str,
    child_prefix: str,
    *,
    bucket_prefix: str,
    force_destroy: bool,
    tags: dict[str, str],
    bucket_opts: pulumi.ResourceOptions,
    child_opts: pulumi.ResourceOptions,
    kms_key_arn: pulumi.Input[str] | None = None,
    policy_statements: Callable[[str], pulumi.Input[Sequence[dict[str, Any]]]] | None = None,
) -> aws.s3.Bucket:
    """A bucket with ownership enforced, public access blocked, default encryption (SSE-KMS with a
    bucket key when ``kms_key_arn`` is given, else SSE-S3) and a policy refusing plain HTTP.

    Children are named ``<child_prefix>-ownership``, ``-public-access``, ``-encryption``, ``-tls-only``.
    ``policy_statements(bucket_arn)`` adds statements to the bucket's one policy (a bucket has a single
    policy document, so grants such as log delivery go into it rather than into a second one).
    """
    bucket = aws.s3.Bucket(resource_name, bucket_prefix=bucket_prefix, force_destroy=force_destroy, tags=tags, opts=bucket_opts)
    aws.s3.BucketOwnershipControls(
        f"{child_prefix}-ownership",
        bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        opts=child_opts,
    )
    aws.s3.BucketPublicAccessBlock(
        f"{child_prefix}-public-access",
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=child_opts,
    )
    default = aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
        sse_algorithm="aws:kms" if kms_key_arn is not None else "AES256", kms_master_key_id=kms_key_arn
    )
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{child_prefix}-encryption",
        bucket=bucket.id,
        rules=[
            aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=default,
                bucket_key_enabled=True if kms_key_arn is not None else None,
            )
        ],
        opts=child_opts,
    )
    aws.s3.BucketPolicy(
        f"{child_prefix}-tls-only",
        bucket=bucket.id,
        policy=bucket.arn.apply(
            lambda arn: pulumi.Output.from_input(policy_statements(arn) if policy_statements else []).apply(
                lambda extra: tls_only_policy(arn, extra)
            )
        ),
        opts=child_opts,
    )
    return bucket


@dataclass(frozen=True)
class LifecycleRule:
    """One lifecycle rule of a bucket, over the keys under ``prefix`` (``""``: all): objects expire after
    ``expire_days``, old versions after ``noncurrent_days``, unfinished uploads are aborted after ``abort_days``."""

    id: str
    prefix: str = ""
    expire_days: pulumi.Input[int] | None = None
    noncurrent_days: pulumi.Input[int] | None = None
    abort_days: pulumi.Input[int] | None = None

    def args(self) -> aws.s3.BucketLifecycleConfigurationRuleArgs:
        rule = aws.s3
        return rule.BucketLifecycleConfigurationRuleArgs(
            id=self.id,
            status="Enabled",
            filter=rule.BucketLifecycleConfigurationRuleFilterArgs(prefix=self.prefix),
            expiration=None
            if self.expire_days is None
            else rule.BucketLifecycleConfigurationRuleExpirationArgs(days=self.expire_days),
            noncurrent_version_expiration=None
            if self.noncurrent_days is None
            else rule.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(noncurrent_days=self.noncurrent_days),
            abort_incomplete_multipart_upload=None
            if self.abort_days is None
            else rule.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(days_after_initiation=self.abort_days),
        )


def bucket_lifecycle(
    resource_name: str, bucket: aws.s3.Bucket, rules: Sequence[LifecycleRule], opts: pulumi.ResourceOptions
) -> aws.s3.BucketLifecycleConfiguration:
    """The bucket's one lifecycle configuration (S3 keeps a single one per bucket), from ``rules``."""
    return aws.s3.BucketLifecycleConfiguration(resource_name, bucket=bucket.id, rules=[r.args() for r in rules], opts=opts)
