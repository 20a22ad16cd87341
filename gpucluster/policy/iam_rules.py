"""The IAM rules: what a role of the stack may do, read from its policy documents.

- ``run-instances-tagged`` (a resource rule): no policy lets a role launch instances (``ec2:RunInstances``, through
  ``ec2:*`` or ``*`` too) on instance ARNs without requiring the cluster's request tag: whoever holds such a role
  launches instances the cluster's agent never sees, anywhere its other grants allow.
- ``no-ssm-parameter-reads`` (a stack rule): no node role (one EC2, Systems Manager or IAM Roles Anywhere takes) may
  read SSM parameters outside a path of its own: ``ssm:GetParameter*`` on ``*`` — the managed
  AmazonSSMManagedInstanceCore among others — reads every parameter of the account, SecureStrings included. A deny
  of the other paths on the same role passes (the rule asks the offline evaluator).
- ``iam-inline-policy-size`` (a stack rule): a role's inline policies fit IAM's 10,240 characters (whitespace aside),
  so ``pulumi up`` is not refused halfway.

Policy text not known yet (a preview) is "cannot tell": no violation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gpucluster.policy.iam_eval import Request, UnsupportedPolicy, evaluate, statement_matches
from gpucluster.policy.model import UNKNOWN, Resource, Violation, items, violation

RUN_INSTANCES = "run-instances-tagged"
SSM_PARAMETERS = "no-ssm-parameter-reads"
INLINE_SIZE = "iam-inline-policy-size"

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
POLICY_DOCUMENTS = {ROLE_POLICY: "policy", "aws:iam/policy:Policy": "policy", "aws:iam/userPolicy:UserPolicy": "policy"}
CLUSTER_REQUEST_TAG = "aws:RequestTag/gpucluster:cluster"
NODE_SERVICES = ("ec2.amazonaws.com", "ssm.amazonaws.com", "rolesanywhere.amazonaws.com")
INLINE_LIMIT = 10_240

# AWS managed policies that read any SSM parameter (ssm:GetParameter* on "*"), as one statement each.
READS_EVERY_PARAMETER = ("AmazonSSMManagedInstanceCore", "AmazonEC2RoleforSSM", "AmazonSSMReadOnlyAccess", "AmazonSSMFullAccess")
_MANAGED_READ = {
    "Effect": "Allow",
    "Action": ["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"],
    "Resource": "*",
}


def _document(text: Any) -> dict[str, Any] | None:
    """A policy document from a resource's property: ``None`` when unknown, absent or not JSON."""
    if isinstance(text, Mapping):
        return dict(text)  # pyright: ignore[reportUnknownArgumentType]
    if not isinstance(text, str):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _statements(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    body = doc.get("Statement", [])
    return [s for s in ([body] if isinstance(body, Mapping) else body) if isinstance(s, Mapping)]


def _documents(r: Resource) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(property path, document)`` of every policy document the resource holds."""
    prop = POLICY_DOCUMENTS.get(r.type)
    if prop is not None:
        doc = _document(r.get(prop))
        if doc is not None:
            yield prop, doc
    elif r.type == ROLE:
        for i, inline in enumerate(items(r.get("inlinePolicies"))):
            doc = _document(inline.get("policy") if isinstance(inline, Mapping) else None)
            if doc is not None:
                yield f"inlinePolicies[{i}].policy", doc


def _launches_untagged(st: Mapping[str, Any]) -> bool:
    """An Allow statement that grants RunInstances on instances without the cluster's request tag."""
    if st.get("Effect") != "Allow":
        return False
    probe = Request("ec2:RunInstances", "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0")
    try:
        if not statement_matches({k: v for k, v in st.items() if k != "Condition"}, probe):
            return False
    except UnsupportedPolicy:
        return False
    tags = (st.get("Condition") or {}).get("StringEquals") or {}
    return not any(str(k).lower() == CLUSTER_REQUEST_TAG.lower() for k in tags)


def _allowed(policies: Sequence[Mapping[str, Any]], request: Request) -> bool | None:
    """The evaluator's answer, ``None`` for a document it does not implement (cannot tell)."""
    try:
        return evaluate(policies, request).allowed
    except UnsupportedPolicy:
        return None


def run_instances_tagged(r: Resource) -> list[Violation]:
    """No grant of ``ec2:RunInstances`` on instances without ``StringEquals aws:RequestTag/gpucluster:cluster``."""
    out = []
    for prop, doc in _documents(r):
        for i, st in enumerate(_statements(doc)):
            if _launches_untagged(st):
                sid = st.get("Sid") or f"Statement[{i}]"
                out.append(
                    violation(
                        RUN_INSTANCES,
                        r,
                        prop,
                        f"statement {sid} allows ec2:RunInstances on instances without requiring the cluster's request "
                        f"tag ({CLUSTER_REQUEST_TAG}): whoever holds the role launches instances the cluster never tags "
                        "nor reaps, into whatever subnets and security groups its other grants reach",
                        "grant RunInstances per resource type: instance/* only with StringEquals "
                        f"{CLUSTER_REQUEST_TAG} (and ec2:InstanceType, ec2:MetadataHttpTokens = required, "
                        "ec2:InstanceProfile), as gpucluster's node agent policy does",
                    )
                )
    return out


def _trusts_machines(role: Resource) -> bool | None:
    doc = _document(role.get("assumeRolePolicy"))
    if doc is None:
        return None
    for st in _statements(doc):
        principal = st.get("Principal")
        services = principal.get("Service") if isinstance(principal, Mapping) else None
        if any(s in NODE_SERVICES for s in items(services)):
            return True
    return False


def _role_documents(role: Resource, resources: Sequence[Resource]) -> tuple[list[tuple[Resource, dict[str, Any]]], bool]:
    """The role's inline policy documents (its own and RolePolicy resources naming it), with where each is, and
    whether all of them are known."""
    docs = [(role, d) for _, d in _documents(role)]
    known = role.get("inlinePolicies") is not UNKNOWN
    for r in resources:
        if r.type == ROLE_POLICY and r.refers_to("role", role, "name") is True:
            doc = _document(r.get("policy"))
            known &= doc is not None
            if doc is not None:
                docs.append((r, doc))
    return docs, known


def _managed_reads(role: Resource, resources: Sequence[Resource]) -> list[Resource]:
    return [
        r
        for r in resources
        if r.type == ATTACHMENT
        and r.refers_to("role", role, "name") is True
        and isinstance(r.get("policyArn"), str)
        and r.get("policyArn").rsplit("/", 1)[-1] in READS_EVERY_PARAMETER
    ]


def no_ssm_parameter_reads(resources: Sequence[Resource]) -> list[Violation]:
    """A node role reads no SSM parameter of the account's (one outside any path of its own)."""
    out = []
    probe_arn = "arn:aws:ssm:us-east-1:123456789012:parameter/someone-else/database-password"
    for role in resources:
        if role.type != ROLE or _trusts_machines(role) is False:
            continue
        docs, known = _role_documents(role, resources)
        managed = _managed_reads(role, resources)
        if not known:
            continue
        policies = [d for _, d in docs] + [{"Statement": [_MANAGED_READ]} for _ in managed]
        reads = [a for a in _MANAGED_READ["Action"] if _allowed(policies, Request(a, probe_arn))]
        if not reads:
            continue
        where = [(m, "policyArn") for m in managed] or [
            (r, "policy" if r is not role else "inlinePolicies")
            for r, d in docs
            if any(_allowed([d], Request(a, probe_arn)) for a in reads)
        ]
        for r, prop in where:
            out.append(
                violation(
                    SSM_PARAMETERS,
                    r,
                    prop,
                    f"lets node role {role.name} read every SSM parameter of the account ({', '.join(reads)} on any "
                    "parameter, SecureStrings included): whoever is root on a node reads them all",
                    "give the role Session Manager's rights without ssm:GetParameter* (gpucluster's "
                    "session_manager_policy), or deny ssm:GetParameter* outside the cluster's own parameter path",
                )
            )
    return out


def iam_inline_policy_size(resources: Sequence[Resource]) -> list[Violation]:
    """A role's inline policies fit IAM's quota together (10,240 characters, whitespace not counted)."""
    out = []
    for role in resources:
        if role.type != ROLE:
            continue
        docs, known = _role_documents(role, resources)
        if not known:
            continue
        size = sum(len(re.sub(r"\s", "", json.dumps(d))) for _, d in docs)
        if size > INLINE_LIMIT:
            out.append(
                violation(
                    INLINE_SIZE,
                    role,
                    "inlinePolicies",
                    f"holds {size:,} characters of inline policy (whitespace aside); IAM allows {INLINE_LIMIT:,} per "
                    "role and refuses the rest during `pulumi up`",
                    "split the role, or move statements into managed policies (each up to 6,144 characters); for the "
                    "Slurm node agent, fewer dynamic node groups or subnets per group",
                )
            )
    return out
