"""Run every rule over a stack: the rule catalog both callers share, and the offline plan's resources
(``gpucluster plan --json``) as :class:`~gpucluster.policy.model.Resource`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpucluster.policy import iam_rules as iam
from gpucluster.policy import kubernetes_rules as k
from gpucluster.policy import monitoring_rules as m
from gpucluster.policy import rules as r
from gpucluster.policy import session_rules as sessions
from gpucluster.policy import slurm_rules as slurm
from gpucluster.policy import stack_rules as s
from gpucluster.policy.model import Resource, Violation


@dataclass(frozen=True)
class Rule:
    """A rule as the policy pack and the CLI list it: its name (the Pulumi policy name), what it asks
    for, and its check (of one resource, or of the whole stack when ``stack``)."""

    name: str
    description: str
    check: Callable[..., list[Violation]]
    stack: bool = False


RULES: tuple[Rule, ...] = (
    Rule(r.IMDSV2, "Launch templates and instances require IMDSv2 (metadataOptions.httpTokens = required).", r.imdsv2_required),
    Rule(
        r.ENCRYPTION,
        "EBS volumes, launch template and instance block devices, file systems, secrets and EKS Secrets are encrypted at rest.",
        r.encryption_at_rest,
    ),
    Rule(s.BUCKET_ENCRYPTION, "Every S3 bucket has default server-side encryption configured.", s.bucket_encryption, stack=True),
    Rule(r.INGRESS, "No security group admits ingress from 0.0.0.0/0 or ::/0.", r.no_public_ingress),
    Rule(
        r.PROTECTED,
        "File systems, EBS volumes, buckets, KMS keys and secrets are protected and retained on delete.",
        r.data_protected,
    ),
    Rule(s.FLOW_LOGS, "Every VPC the stack creates has a flow log.", s.vpc_flow_logs, stack=True),
    Rule(r.EKS_PRIVATE, "EKS cluster endpoints are private (vpcConfig.endpointPublicAccess = false).", r.eks_private_endpoint),
    Rule(
        r.USER_DATA,
        "User data holds no private keys, AWS keys, tokens, munge key or passwords.",
        r.no_secrets_in_user_data,
    ),
    Rule(
        slurm.SLURM_CONF_KEYS,
        "A rendered slurm.conf holds only keys gpucluster sets and keys on the slurm.settings allow list (no program, "
        "plugin, user or authentication method a stack names).",
        slurm.slurm_conf_allowed_keys,
    ),
    Rule(
        iam.RUN_INSTANCES,
        "No policy grants ec2:RunInstances on instances without requiring the cluster's request tag.",
        iam.run_instances_tagged,
    ),
    Rule(
        iam.SSM_PARAMETERS,
        "No node role reads every SSM parameter (ssm:GetParameter* on *, AmazonSSMManagedInstanceCore).",
        iam.no_ssm_parameter_reads,
        stack=True,
    ),
    Rule(iam.INLINE_SIZE, "Every role's inline policies fit IAM's 10,240 characters.", iam.iam_inline_policy_size, stack=True),
    Rule(
        k.POD_SECURITY,
        "Team namespaces enforce Pod Security restricted or baseline (pod-security.kubernetes.io/enforce).",
        k.team_namespace_pod_security,
    ),
    Rule(
        k.DEFAULT_DENY,
        "Every team namespace has a NetworkPolicy that denies all ingress and egress by default.",
        k.team_namespace_default_deny,
        stack=True,
    ),
    Rule(
        r.ROOT_SQUASH,
        "FSx for Lustre file systems squash root (rootSquashConfiguration.rootSquash non-zero).",
        r.lustre_root_squash,
    ),
    Rule(
        r.NO_PRIVILEGE_MOUNTS,
        "Lustre and NFS (/home) client mounts (fstab and mount commands in user data, FSx CSI PersistentVolumes) are nosuid,nodev.",
        r.lustre_mounts_nosuid_nodev,
    ),
    Rule(
        s.LUSTRE_VOLUMES_DISTINCT,
        "No two FSx for Lustre PersistentVolumes share a volume handle or a mount path (one directory per team).",
        s.lustre_volumes_distinct,
        stack=True,
    ),
    Rule(
        m.LOG_GROUPS,
        "Every CloudWatch log group has a retention and a KMS key (a VPC flow log's group: its retention).",
        m.log_groups_encrypted_retained,
        stack=True,
    ),
    Rule(m.NO_PUBLIC_GRAFANA, "Managed Grafana workspaces restrict network access (networkAccessControl).", m.no_public_grafana),
    Rule(
        sessions.NO_ROOT_SESSIONS,
        "Nobody becomes root by opening a session: Session documents run as the person (Run As, no root, no "
        "runAsElevated), StartSession grants check the document and name only the stack's, and head, login and "
        "compute nodes lock ssm-user's sudo in bootcmd with no sudoers grant but the admin group's.",
        sessions.no_root_sessions,
        stack=True,
    ),
)


def evaluate(resources: Sequence[Resource], rules: Sequence[Rule] = RULES) -> list[Violation]:
    """Every violation of ``rules`` in the stack, in rule order, then by resource URN."""
    out: list[Violation] = []
    for rule in rules:
        found = rule.check(resources) if rule.stack else [v for res in resources for v in rule.check(res)]
        out += sorted(found, key=lambda v: (v.urn, v.property))
    return out


def from_plan(doc: Mapping[str, Any]) -> list[Resource]:
    """The custom resources of an offline plan JSON document (components hold no settings of their
    own; their children are checked)."""
    return [
        Resource(
            type=str(res.get("type", "")),
            name=str(res.get("name", "")),
            urn=str(res.get("urn", "")),
            props=res.get("inputs") or {},
            protect=bool(res.get("protect")),
            retain_on_delete=bool(res.get("retainOnDelete")),
            id=res.get("id"),
        )
        for res in doc.get("resources") or []
        if isinstance(res, Mapping) and res.get("custom", True)
    ]
