"""The stack rules: each a pure function of every resource of the stack, for what one resource alone
cannot tell (a VPC's flow log and a bucket's encryption are resources of their own)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpucluster.policy import types as t
from gpucluster.policy.model import UNKNOWN, Resource, Violation, dig, items, violation

StackRule = Callable[[Sequence[Resource]], list[Violation]]

FLOW_LOGS = "vpc-flow-logs"
BUCKET_ENCRYPTION = "encryption-at-rest-buckets"
LUSTRE_VOLUMES_DISTINCT = "lustre-volumes-distinct"
PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"


def _linked(owners: Sequence[Resource], prop: str, target: Resource, *target_props: str) -> bool:
    """Whether one of ``owners`` names ``target`` in ``prop``; an owner whose ``prop`` is not known yet
    counts as naming it (a preview cannot tell, ``pulumi up`` runs the rule again)."""
    return any(o.refers_to(prop, target, *target_props) is not False for o in owners)


def vpc_flow_logs(resources: Sequence[Resource]) -> list[Violation]:
    """Every VPC the stack creates has a flow log (``aws:ec2/flowLog`` with its ``vpcId``): the record
    of who talked to the cluster, which an incident review needs and cannot get afterwards."""
    logs = [r for r in resources if r.type == t.FLOW_LOG]
    return [
        violation(
            FLOW_LOGS,
            vpc,
            "flowLog",
            "has no flow log: connections to and from the cluster are not recorded",
            "keep gpucluster:network.flowLogs enabled (the default), or add an aws.ec2.FlowLog with vpc_id = this VPC",
        )
        for vpc in resources
        if vpc.type == t.VPC and not _linked(logs, "vpcId", vpc, "id")
    ]


def _encrypts(config: Resource) -> bool:
    rules = config.get("rules")
    if rules is UNKNOWN:
        return True
    return any(dig(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm") not in (None, "") for rule in items(rules))


def bucket_encryption(resources: Sequence[Resource]) -> list[Violation]:
    """Every bucket has default encryption set explicitly: a ``BucketServerSideEncryptionConfiguration``
    naming it (or the bucket's own ``serverSideEncryptionConfiguration``) with an algorithm, so what it
    holds is encrypted with the key the stack chose, not whatever the account default becomes."""
    configs = [r for r in resources if r.type in t.BUCKET_ENCRYPTION and _encrypts(r)]
    out = []
    for bucket in resources:
        if bucket.type not in t.BUCKETS:
            continue
        inline = bucket.get("serverSideEncryptionConfiguration")
        if inline is UNKNOWN or dig(inline, "rule", "applyServerSideEncryptionByDefault", "sseAlgorithm"):
            continue
        if _linked(configs, "bucket", bucket, "bucket", "id"):
            continue
        out.append(
            violation(
                BUCKET_ENCRYPTION,
                bucket,
                "serverSideEncryptionConfiguration",
                "has no default encryption configured",
                "add an aws.s3.BucketServerSideEncryptionConfiguration for the bucket (SSE-KMS with a key of the stack, "
                "or AES256); gpucluster buckets get one",
            )
        )
    return out


def lustre_volumes_distinct(resources: Sequence[Resource]) -> list[Violation]:
    """No two FSx for Lustre PersistentVolumes share a volume handle (kubelet tells volumes apart by driver and handle)
    or the same directory of the same file system (``dnsname`` + ``mountname``): each team's volume is its own
    directory, so one team's claim never reaches another team's files."""
    seen: dict[tuple[str, object], Resource] = {}
    out = []
    for pv in resources:
        if pv.type != PERSISTENT_VOLUME or pv.get("spec", "csi", "driver") != "fsx.csi.aws.com":
            continue
        handle = pv.get("spec", "csi", "volumeHandle")
        attrs = pv.get("spec", "csi", "volumeAttributes")
        path = (dig(attrs, "dnsname"), dig(attrs, "mountname"))
        for key, value in (("spec.csi.volumeHandle", handle), ("spec.csi.volumeAttributes.mountname", path)):
            if value is UNKNOWN or UNKNOWN in (value if isinstance(value, tuple) else ()):
                continue
            other = seen.setdefault((key, value), pv)
            if other is not pv:
                out.append(
                    violation(
                        LUSTRE_VOLUMES_DISTINCT,
                        pv,
                        key,
                        f"is the same as PersistentVolume {other.name!r}'s: both mount the same directory of the file system",
                        "give each team's volume its own directory (mountname <mount name>/teams/<team>) and handle, "
                        "as gpucluster's TeamNamespace does",
                    )
                )
    return out


STACK_RULES: dict[str, StackRule] = {
    FLOW_LOGS: vpc_flow_logs,
    BUCKET_ENCRYPTION: bucket_encryption,
    LUSTRE_VOLUMES_DISTINCT: lustre_volumes_distinct,
}
