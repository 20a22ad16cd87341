"""The resource rules: each a pure function of one :class:`~gpucluster.policy.model.Resource`,
returning the violations it finds (an empty list when the resource passes or the rule does not apply).

Every message names the resource, the property and the fix; where a gpucluster setting controls the
property, the fix names that setting.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from gpucluster.policy import types as t
from gpucluster.policy.model import UNKNOWN, Resource, Violation, dig, items, truthy, violation
from gpucluster.policy.mounts import lustre_mounts, missing_no_privilege
from gpucluster.policy.userdata import decode, find_secrets

ResourceRule = Callable[[Resource], list[Violation]]

IMDSV2 = "imdsv2-required"
ENCRYPTION = "encryption-at-rest"
INGRESS = "no-public-ingress"
PROTECTED = "data-protected"
EKS_PRIVATE = "eks-private-endpoint"
USER_DATA = "no-secrets-in-user-data"
ROOT_SQUASH = "lustre-root-squash"
NO_PRIVILEGE_MOUNTS = "lustre-mounts-nosuid-nodev"
FSX_CSI_DRIVER = "fsx.csi.aws.com"


def imdsv2_required(r: Resource) -> list[Violation]:
    """Instances answer the metadata service only with a session token (IMDSv2), so a server-side
    request forgery on a node cannot read its role's credentials."""
    if r.type not in (t.LAUNCH_TEMPLATE, t.INSTANCE, t.LAUNCH_CONFIGURATION):
        return []
    tokens, endpoint = r.get("metadataOptions", "httpTokens"), r.get("metadataOptions", "httpEndpoint")
    if tokens is UNKNOWN or tokens == "required" or endpoint == "disabled":
        return []
    got = "not set (EC2 then accepts IMDSv1)" if tokens is None else f"{tokens!r}"
    return [
        violation(
            IMDSV2,
            r,
            "metadataOptions.httpTokens",
            f"is {got}: instances answer IMDSv1 requests without a session token",
            'set metadataOptions.httpTokens = "required" (gpucluster node groups and head nodes do)',
        )
    ]


def _ebs_unencrypted(r: Resource, prop: str, value: object, what: str) -> Violation | None:
    state = truthy(value)
    if value is UNKNOWN or state:
        return None
    got = "not set" if value is None else f"{value!r}"
    return violation(ENCRYPTION, r, prop, f"is {got}: {what} is written unencrypted", f"set {prop} = true")


def encryption_at_rest(r: Resource) -> list[Violation]:
    """Every volume, file system, secret store and the EKS secrets are encrypted at rest (S3 buckets:
    the stack rule :func:`~gpucluster.policy.stack_rules.bucket_encryption`)."""
    out: list[Violation | None] = []
    if r.type == t.EBS_VOLUME:
        out.append(_ebs_unencrypted(r, "encrypted", r.get("encrypted"), "the volume"))
    elif r.type == t.EFS_FILE_SYSTEM:
        out.append(_ebs_unencrypted(r, "encrypted", r.get("encrypted"), "the file system"))
    elif r.type == t.LAUNCH_TEMPLATE:
        out += _template_volumes(r)
    elif r.type == t.INSTANCE:
        root = r.get("rootBlockDevice")
        if root is not UNKNOWN:
            what = "the root volume (without rootBlockDevice it takes the AMI snapshot's setting)"
            out.append(_ebs_unencrypted(r, "rootBlockDevice.encrypted", dig(root, "encrypted"), what))
        for i, device in enumerate(items(r.get("ebsBlockDevices"))):
            out.append(_ebs_unencrypted(r, f"ebsBlockDevices[{i}].encrypted", dig(device, "encrypted"), "the volume"))
    elif r.type == t.LUSTRE_FILE_SYSTEM:
        out.append(_lustre_key(r))
    elif r.type == t.SECRET:
        key = r.get("kmsKeyId")
        if isinstance(key, str) and not key.strip():
            fix = "give kmsKeyId a KMS key ARN, or leave it out for the aws/secretsmanager key"
            out.append(violation(ENCRYPTION, r, "kmsKeyId", "is empty", fix))
    elif r.type == t.EKS_CLUSTER:
        out += _eks_secrets(r)
    return [v for v in out if v is not None]


def _template_volumes(r: Resource) -> list[Violation | None]:
    mappings = r.get("blockDeviceMappings")
    if mappings is UNKNOWN:
        return []
    ebs = [(i, m) for i, m in enumerate(items(mappings)) if dig(m, "ebs") is not None]
    if not ebs:
        what = "maps no EBS volume: the root volume takes the AMI snapshot's encryption"
        fix = "map the root device in blockDeviceMappings with ebs.encrypted = true (gpucluster node groups do)"
        return [violation(ENCRYPTION, r, "blockDeviceMappings", what, fix)]
    return [
        _ebs_unencrypted(r, f"blockDeviceMappings[{i}].ebs.encrypted", dig(m, "ebs", "encrypted"), "the volume") for i, m in ebs
    ]


def _lustre_key(r: Resource) -> Violation | None:
    """FSx encrypts every file system; a persistent one gets a customer-managed key, so its data and
    backups can be reached only through grants the cluster controls (gpucluster makes one)."""
    deployment, key = r.get("deploymentType"), r.get("kmsKeyId")
    if deployment is UNKNOWN or key is UNKNOWN or not str(deployment or "").startswith("PERSISTENT") or key:
        return None
    return violation(
        ENCRYPTION,
        r,
        "kmsKeyId",
        f"is not set on a {deployment} file system: encrypted only with the AWS-managed aws/fsx key",
        "set kmsKeyId (gpucluster:storage.lustre.kmsKeyId, or leave it unset in the config and gpucluster creates a key)",
    )


def _eks_secrets(r: Resource) -> list[Violation | None]:
    config = r.get("encryptionConfig")
    if config is UNKNOWN:
        return []
    blocks = items(config)
    fix = 'set encryptionConfig = {resources: ["secrets"], provider: {keyArn: <KMS key>}} (gpucluster EksCluster does)'
    if not any(_names_secrets(dig(b, "resources")) for b in blocks):
        return [violation(ENCRYPTION, r, "encryptionConfig", "does not encrypt Kubernetes Secrets with a KMS key", fix)]
    keys = [dig(b, "provider", "keyArn") for b in blocks]
    if not any(k is UNKNOWN or (isinstance(k, str) and k) for k in keys):
        return [violation(ENCRYPTION, r, "encryptionConfig.provider.keyArn", "is not set", fix)]
    return []


def _names_secrets(resources: object) -> bool:
    return resources is UNKNOWN or any(x is UNKNOWN or x == "secrets" for x in items(resources))


def _is_anywhere(cidr: object) -> bool:
    if not isinstance(cidr, str):
        return False
    try:
        return ipaddress.ip_network(cidr.strip(), strict=False).prefixlen == 0
    except ValueError:
        return False


def no_public_ingress(r: Resource) -> list[Violation]:
    """No security group admits traffic from the whole internet (0.0.0.0/0 or ::/0): nodes are reached
    through Session Manager and each other's security groups."""
    found: list[tuple[str, str]] = []
    if r.type == t.SECURITY_GROUP_INGRESS_RULE:
        found += [(p, str(r.get(p))) for p in ("cidrIpv4", "cidrIpv6") if _is_anywhere(r.get(p))]
    elif r.type == t.SECURITY_GROUP_RULE and r.get("type") == "ingress":
        for p in ("cidrBlocks", "ipv6CidrBlocks"):
            found += [(f"{p}[{i}]", c) for i, c in enumerate(items(r.get(p))) if _is_anywhere(c)]
    elif r.type in (t.SECURITY_GROUP, t.DEFAULT_SECURITY_GROUP):
        for i, rule in enumerate(items(r.get("ingress"))):
            for p in ("cidrBlocks", "ipv6CidrBlocks"):
                found += [(f"ingress[{i}].{p}[{j}]", c) for j, c in enumerate(items(dig(rule, p))) if _is_anywhere(c)]
    return [
        violation(
            INGRESS,
            r,
            prop,
            f"admits {cidr}: anyone on the internet can reach this port range",
            "admit the VPC CIDR or a security group (referencedSecurityGroupId) instead; reach nodes with Session Manager",
        )
        for prop, cidr in found
    ]


def data_protected(r: Resource) -> list[Violation]:
    """Resources that hold data are protected (``pulumi destroy`` and a replacing ``pulumi up`` refuse)
    and retained on delete, as gpucluster makes them unless ``storage.protectData`` is false. A bucket
    with ``forceDestroy`` holds only what the program rebuilds (the Slurm agent package) and is exempt."""
    if r.type not in t.DATA_HOLDING:
        return []
    if r.type in t.BUCKETS and truthy(r.get("forceDestroy")):
        return []
    fix = "keep gpucluster:storage.protectData (or the component's protect) true; for your own resources set ResourceOptions(protect=True, retain_on_delete=True)"
    out = []
    if not r.protect:
        out.append(violation(PROTECTED, r, "protect", "is false: `pulumi destroy` or a replacement deletes its data", fix))
    if r.retain_on_delete is False:
        out.append(violation(PROTECTED, r, "retainOnDelete", "is false: deleting the stack deletes its data", fix))
    return out


def eks_private_endpoint(r: Resource) -> list[Violation]:
    """The Kubernetes API of an EKS cluster is reachable only from inside the VPC."""
    if r.type != t.EKS_CLUSTER:
        return []
    public = r.get("vpcConfig", "endpointPublicAccess")
    if public is UNKNOWN or public is False:
        return []
    got = "not set (EKS then opens the endpoint to the internet)" if public is None else f"{public!r}"
    return [
        violation(
            EKS_PRIVATE,
            r,
            "vpcConfig.endpointPublicAccess",
            f"is {got}",
            "set vpcConfig.endpointPublicAccess = false and endpointPrivateAccess = true; reach the API from the VPC",
        )
    ]


_USER_DATA_PROPS = {
    t.LAUNCH_TEMPLATE: (("userData", True),),
    t.INSTANCE: (("userData", False), ("userDataBase64", True)),
    t.LAUNCH_CONFIGURATION: (("userData", False), ("userDataBase64", True)),
    t.BUCKET_OBJECT: (("content", False),),  # the Slurm head node's files bundle: the rest of its user data
}
_WHERE = {t.BUCKET_OBJECT: "files bundle"}


def no_secrets_in_user_data(r: Resource) -> list[Violation]:
    """User data carries no key material, AWS keys, tokens, munge key or passwords (decoded from base64,
    gzip, MIME parts and cloud-config ``write_files``): anyone who can describe the launch template or
    instance reads it, and so does the stack state."""
    out = []
    for prop, encoded in _USER_DATA_PROPS.get(r.type, ()):
        value = r.get(prop)
        if not isinstance(value, str):
            continue  # unset, or not known before `pulumi up`
        for finding in find_secrets(decode(value, base64_encoded=encoded, where=_WHERE.get(r.type, "user data"))):
            out.append(
                violation(
                    USER_DATA,
                    r,
                    prop,
                    f"holds {finding.describe()}",
                    "keep the secret in Secrets Manager or SSM Parameter Store and read it at boot with the node role",
                )
            )
    return out


def lustre_root_squash(r: Resource) -> list[Violation]:
    """Every FSx for Lustre file system squashes root (``rootSquashConfiguration.rootSquash`` a non-zero
    ``UID:GID``): root on a client, such as a container running as root on a node, is then nobody on the file
    system, and only the admin hosts listed as no-squash clients keep root."""
    if r.type != t.LUSTRE_FILE_SYSTEM:
        return []
    squash = r.get("rootSquashConfiguration", "rootSquash")
    if squash is UNKNOWN:
        return []
    fix = (
        'set rootSquashConfiguration.rootSquash = "65534:65534" and list admin hosts in noSquashNids (gpucluster '
        "does unless gpucluster:storage.lustre.unsafeDisableRootSquash is true)"
    )
    if not isinstance(squash, str) or not squash.strip():
        return [violation(ROOT_SQUASH, r, "rootSquashConfiguration.rootSquash", "is not set: root on every client is root on the file system", fix)]  # fmt: skip
    ids = squash.split(":")
    if len(ids) != 2 or any(not i.strip().isdigit() or int(i) == 0 for i in ids):
        return [violation(ROOT_SQUASH, r, "rootSquashConfiguration.rootSquash", f"is {squash!r}: root is not squashed", fix)]
    return []


def lustre_mounts_nosuid_nodev(r: Resource) -> list[Violation]:
    """Every Lustre client mount carries ``nosuid,nodev``: the fstab entries and ``mount -t lustre`` commands in user
    data, and the FSx CSI driver's PersistentVolumes; NFS mounts (the shared ``/home``, ``nfs``/``nfs4``) too. A setuid root file on shared storage is otherwise root on every
    node that mounts it."""
    fix = "mount it with nosuid,nodev (gpucluster adds them to every Lustre mount and refuses suid, dev and defaults)"
    if r.type == "kubernetes:core/v1:PersistentVolume":
        if r.get("spec", "csi", "driver") != FSX_CSI_DRIVER:
            return []
        options = r.get("spec", "mountOptions")
        if options is UNKNOWN or any(o is UNKNOWN for o in items(options)):
            return []
        missing = missing_no_privilege([str(o) for o in items(options)])
        what = f"lacks {','.join(missing)}: the pods' Lustre mount runs setuid files or opens device files"
        return [violation(NO_PRIVILEGE_MOUNTS, r, "spec.mountOptions", what, fix)] if missing else []
    out: dict[tuple[str, str, tuple[str, ...]], Violation] = {}
    for prop, encoded in _USER_DATA_PROPS.get(r.type, ()):
        value = r.get(prop)
        if not isinstance(value, str):
            continue
        for mount in lustre_mounts(decode(value, base64_encoded=encoded, where=_WHERE.get(r.type, "user data"))):
            missing = mount.missing()
            if missing:  # the same mount is read in the whole user data and in the file that holds it: once
                kind = "Lustre" if mount.fs_type == "lustre" else "NFS"
                what = f"mounts {kind} at {mount.target} without {','.join(missing)} ({mount.where}, line {mount.line})"
                out[(prop, mount.target, mount.options)] = violation(NO_PRIVILEGE_MOUNTS, r, prop, what, fix)
    return list(out.values())


RESOURCE_RULES: dict[str, ResourceRule] = {
    IMDSV2: imdsv2_required,
    ENCRYPTION: encryption_at_rest,
    INGRESS: no_public_ingress,
    PROTECTED: data_protected,
    EKS_PRIVATE: eks_private_endpoint,
    USER_DATA: no_secrets_in_user_data,
    ROOT_SQUASH: lustre_root_squash,
    NO_PRIVILEGE_MOUNTS: lustre_mounts_nosuid_nodev,
}
