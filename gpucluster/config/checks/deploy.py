"""Validators for values AWS would reject only at deploy time (pure: spec and catalog in, findings out).

Regions and zones, tag syntax, KMS key references, key pair and SSM parameter names, duplicate names,
a workload that reads nothing, and capacity blocks that have not started. Each check yields findings
with the config path, the value, why and the fix, so ``pulumi up`` stops before the first resource.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone

from gpucluster.config.cluster import ClusterSpec, known_region, region_problem
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.effective import effective_desired
from gpucluster.config.errors import Finding, error, group_path, warning
from gpucluster.config.naming import RESERVED_TAGS
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.facts.regions import aws_partition_of, zone_in_region

REGION_PATH = "aws:region"
TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256
# Besides Unicode letters, numbers and spaces: what AWS allows in tags across services (EFS enforces
# ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$; S3, FSx, KMS, Secrets Manager document the same set).
TAG_PUNCTUATION = frozenset("_.:/=+-@")
TAG_CHARS_TEXT = "letters, digits, spaces and _ . : / = + - @"

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
KEY_ID = rf"(?:{UUID}|mrk-[0-9a-f]{{32}})"
ALIAS_NAME = r"alias/[A-Za-z0-9/_-]{1,250}"
KMS_ARN = re.compile(rf"^arn:(aws|aws-cn|aws-us-gov):kms:([a-z0-9-]+):(\d{{12}}):(key/{KEY_ID}|{ALIAS_NAME})$")
KMS_KEY_ID = re.compile(rf"^{KEY_ID}$")
KMS_ALIAS = re.compile(rf"^{ALIAS_NAME}$")
KMS_EXAMPLE = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

KEY_NAME_MAX = 255
SSM_NAME = re.compile(r"^(/[A-Za-z0-9_.-]+)+$|^[A-Za-z0-9_.-]+$")
SSM_NAME_MAX = 1011
SSM_LEVELS_MAX = 15


# --- region and zones ------------------------------------------------------------------------------


def check_region(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if not known_region(spec.region):
        message, fix = region_problem(spec.region)
        yield error(REGION_PATH, message, fix, spec.region, "unknown-region")


def check_lustre_zone(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:

    storage = getattr(spec, "storage", None)
    zone = storage.lustre.availability_zone if storage is not None and storage.lustre is not None else None
    if zone is not None and known_region(spec.region) and not zone_in_region(zone, spec.region):
        yield error(
            "gpucluster:storage.lustre.availabilityZone",
            f"zone {zone!r} is not in region {spec.region}",
            f"use a zone of {spec.region} (its name plus a letter, e.g. {spec.region}a), or change aws:region",
            zone,
            "zone-region",
        )


# --- tags ------------------------------------------------------------------------------------------


def _bad_tag_chars(text: str) -> list[str]:
    bad: list[str] = []
    for ch in text:
        category = unicodedata.category(ch)
        if category[0] in "LN" or category == "Zs" or ch in TAG_PUNCTUATION:
            continue
        if ch not in bad:
            bad.append(ch)
    return bad


def tag_findings(tags: Mapping[str, str], path: str) -> Iterator[Finding]:
    """Tag syntax and limits as every AWS service gpucluster tags accepts them."""
    for key, value in tags.items():
        if key.lower().startswith("aws:"):
            yield error(
                path, f"tag key {key!r} uses the reserved 'aws:' prefix", "choose a key without 'aws:'", key, "tag-aws-prefix"
            )
        if key in RESERVED_TAGS:
            yield error(
                path,
                f"tag key {key!r} is one gpucluster sets itself (it names and finds resources by it)",
                f"choose another key; gpucluster owns {', '.join(RESERVED_TAGS)}",
                key,
                "tag-reserved",
            )
        if not key or len(key) > TAG_KEY_MAX:
            yield error(
                path,
                f"tag key {key!r} has {len(key)} characters; AWS allows 1-{TAG_KEY_MAX}",
                "shorten the key",
                key,
                "tag-key-length",
            )
        if len(value) > TAG_VALUE_MAX:
            yield error(
                path,
                f"tag {key!r} has a value of {len(value)} characters; AWS allows {TAG_VALUE_MAX}",
                "shorten the value",
                value,
                "tag-value-length",
            )
        for what, text in (("key", key), ("value", value)):
            bad = _bad_tag_chars(text)
            if bad:
                yield error(
                    path,
                    f"tag {what} {text!r} contains {', '.join(repr(c) for c in bad)}, which AWS services other than "
                    "EC2 refuse in tags",
                    f"use only {TAG_CHARS_TEXT}",
                    text,
                    "tag-characters",
                )


def check_cluster_tags(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    yield from tag_findings(spec.tags, "gpucluster:tags")


def check_group_tags(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    yield from tag_findings(g.tags, group_path(i, "tags"))


# --- KMS keys, key pairs, SSM parameters ------------------------------------------------------------


def kms_findings(value: str | None, path: str, region: str, *, arn_only: bool, service: str) -> Iterator[Finding]:
    """A KMS key reference: a key ARN (or, where ``arn_only`` is false, a key id, alias or alias ARN) in
    the cluster's region and partition."""
    if value is None:
        return
    match = KMS_ARN.match(value)
    forms = "a key ARN" if arn_only else "a key ARN, key id, alias/<name> or alias ARN"
    if match is None and (arn_only or not (KMS_KEY_ID.match(value) or KMS_ALIAS.match(value))):
        yield error(
            path,
            f"{value!r} is not {forms}, which {service} needs",
            f"give the key's ARN, e.g. {KMS_EXAMPLE}",
            value,
            "kms-key-syntax",
        )
        return
    if match is not None and arn_only and not match.group(4).startswith("key/"):
        yield error(
            path,
            f"{value!r} is an alias ARN; {service} needs the key's own ARN",
            f"give the key ARN the alias points to (aws kms describe-key --key-id {match.group(4)})",
            value,
            "kms-key-syntax",
        )
        return
    if match is None or not region:
        return
    partition, key_region = match.group(1), match.group(2)
    if key_region != region:
        yield error(
            path,
            f"KMS key {value!r} is in {key_region}, but the cluster is in {region}; {service} uses keys of its own region only",
            f"use a key in {region} (a multi-Region replica works)",
            value,
            "kms-key-region",
        )
    elif aws_partition_of(region) not in (None, partition):
        yield error(
            path,
            f"KMS key {value!r} is in partition {partition}, but {region} is in {aws_partition_of(region)}",
            f"use an arn:{aws_partition_of(region)}:kms:… key",
            value,
            "kms-key-region",
        )


def check_group_kms(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    # EC2 launch templates take any form (key id, alias, key ARN, alias ARN): pulumi-aws
    # LaunchTemplateBlockDeviceMappingEbsArgs.kms_key_id.
    yield from kms_findings(
        g.kms_key_id, group_path(i, "kmsKeyId"), spec.region, arn_only=False, service="the launch template's EBS volume"
    )


def check_group_names(
    i: int, g: NodeGroupSpec, facts: InstanceFacts | None, spec: ClusterSpec, catalog: Catalog
) -> Iterator[Finding]:
    """``keyName`` (EC2 key pair: up to 255 ASCII characters) and ``imageSsmParameter`` (an SSM name)."""
    if g.key_name is not None:
        name = g.key_name
        if not name or len(name) > KEY_NAME_MAX or not all(" " <= c <= "~" for c in name):
            yield error(
                group_path(i, "keyName"),
                f"key pair name {name!r} is not 1-{KEY_NAME_MAX} printable ASCII characters, as EC2 requires",
                "give the name of an EC2 key pair in the region (aws ec2 describe-key-pairs), or remove keyName and use SSM",
                name,
                "key-name",
            )
    param = g.image_ssm_parameter
    if param is not None and (len(param) > SSM_NAME_MAX or not SSM_NAME.match(param) or param.count("/") > SSM_LEVELS_MAX):
        yield error(
            group_path(i, "imageSsmParameter"),
            f"{param!r} is not an SSM parameter name: letters, digits, '_', '.', '-', levels separated by '/' and "
            f"starting with '/', at most {SSM_LEVELS_MAX} levels and {SSM_NAME_MAX} characters",
            "e.g. /aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id, or use imageId",
            param,
            "ssm-parameter-name",
        )


def check_storage_kms(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    storage = getattr(spec, "storage", None)
    if storage is not None and storage.lustre is not None:
        # pulumi-aws fsx.LustreFileSystem.kms_key_id: "ARN for the KMS Key".
        yield from kms_findings(
            storage.lustre.kms_key_id, "gpucluster:storage.lustre.kmsKeyId", spec.region, arn_only=True, service="FSx for Lustre"
        )


def check_head_kms(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    slurm = getattr(spec, "slurm", None)
    if slurm is not None:
        # pulumi-aws ebs.Volume.kms_key_id and InstanceRootBlockDevice.kms_key_id: the key's ARN.
        yield from kms_findings(
            slurm.head_node.kms_key_id,
            "gpucluster:slurm.headNode.kmsKeyId",
            spec.region,
            arn_only=True,
            service="EBS (head node volumes)",
        )


def check_secrets_kms(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    k8s = getattr(spec, "kubernetes", None)
    if k8s is not None:
        yield from kms_findings(
            k8s.secrets_kms_key_arn,
            "gpucluster:kubernetes.secretsKmsKeyArn",
            spec.region,
            arn_only=True,
            service="EKS secrets encryption",
        )


# --- names -----------------------------------------------------------------------------------------


def duplicate_findings(names: Iterable[str], path: str, what: str) -> Iterator[Finding]:
    """An error at ``path.format(i)`` for every entry whose name an earlier entry already has."""
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in first:
            yield error(
                path.format(i),
                f"{what} name {name!r} is already used by entry [{first[name]}]; {what} names must be unique",
                "rename one of them or merge the two entries",
                name,
                "duplicate-name",
            )
        else:
            first[name] = i


def check_duplicate_names(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    yield from duplicate_findings((g.name for g in spec.node_groups), "gpucluster:nodeGroups[{}].name", "node group")
    k8s = getattr(spec, "kubernetes", None)
    if k8s is not None:
        yield from duplicate_findings((t.name for t in k8s.teams), "gpucluster:kubernetes.teams[{}].name", "team")
    slurm = getattr(spec, "slurm", None)
    if slurm is not None:
        yield from duplicate_findings(
            (e.name for e in slurm.node_groups), "gpucluster:slurm.nodeGroups[{}].name", "Slurm node group setting"
        )


# --- workload --------------------------------------------------------------------------------------


def check_workload_read(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    storage = getattr(spec, "storage", None)
    workload = storage.workload if storage is not None else None
    if workload is not None and workload.read_mb_per_second_per_gpu == 0:
        yield error(
            "gpucluster:storage.workload.readMbPerSecondPerGpu",
            f"readMbPerSecondPerGpu is 0, but the GPUs read the {workload.dataset_size_tib:g} TiB dataset while "
            "training: the file system would be sized as if nothing were read",
            "give the MB/s each GPU reads (e.g. 200 for image data; measure with your data loader)",
            0,
            "zero-read-throughput",
        )


# --- capacity blocks -------------------------------------------------------------------------------


def parse_time(text: str) -> datetime | None:
    """ISO 8601 (``2026-07-01T11:30:00Z``) as an aware datetime (UTC when no offset), else ``None``."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


NOW_ENV = "GPUCLUSTER_NOW"


def utc_now() -> datetime:
    """The time capacity-block starts are judged against: ``$GPUCLUSTER_NOW`` (ISO 8601) when set, so a
    plan can be made as of a date (the tests pin it), else the clock."""
    pinned = parse_time(os.environ.get(NOW_ENV, ""))
    return pinned or datetime.now(timezone.utc)


def check_capacity_block_start(
    i: int,
    g: NodeGroupSpec,
    facts: InstanceFacts | None,
    spec: ClusterSpec,
    catalog: Catalog,
    now: datetime | None = None,
) -> Iterator[Finding]:
    cap = g.capacity
    for field, text in (("startTime", cap.start_time), ("endTime", cap.end_time)):
        if text is not None and parse_time(text) is None:
            yield error(
                group_path(i, f"capacity.{field}"),
                f"{field} {text!r} is not an ISO 8601 time",
                "write it as the block's time from EC2, e.g. 2026-07-01T11:30:00Z",
                text,
                "capacity-block-time",
            )
    start = parse_time(cap.start_time) if cap.start_time else None
    if cap.type != "capacity-block" or start is None:
        return
    wanted = max(g.min_size, effective_desired(g))
    if wanted > 0 and start > (now or utc_now()):
        yield warning(
            group_path(i, "capacity.startTime"),
            f"node group {g.name!r} wants {wanted} nodes now, but its capacity block {cap.reservation_id} starts "
            f"{cap.start_time}: every launch fails until then",
            "set minSize and desiredSize to 0 until the block starts, then raise them",
            cap.start_time,
            "capacity-block-not-started",
        )
