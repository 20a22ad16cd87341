"""The IAM documents of the people on a Slurm cluster (docs/people.md, "Security"): who may open a Session Manager session on which
node, as which user, and what the login nodes' role and every node role may read.

Pure functions, plain values in, the policy document out (like :mod:`gpucluster.render.iam`); the components
(``components/slurm/_sessions.py``, ``login_nodes.py``) resolve the ARNs and attach. The documents are plain
strings on the resources wherever no unknown is involved, so the ``no-root-sessions`` policy rule reads the plan.

Facts (docs/people.md, "Sessions, login nodes and `/home`"): ``ssm:StartSession`` is authorised on two resources at once, the instance and the Session
document; ``BoolIfExists ssm:SessionDocumentAccessCheck "true"`` on **every** StartSession statement makes a
request that names no document (the default ``SSM-SessionManagerRunShell``, which Run As does not bind to our
user) fail unless the policy names that document itself — so the only way in is the document named here
(docs.aws.amazon.com/systems-manager/latest/userguide/getting-started-sessiondocumentaccesscheck.html). The
instances are narrowed with ``ssm:resourceTag/<key>`` (…/ssm-agent-restrict-root-level-commands.html). A user
ends or resumes only sessions whose id starts with their own ``${aws:userid}`` (Session Manager names sessions
``<userid>-<random>``; …/getting-started-restrict-access-examples.html, example 4).

Run As and the principal's tag: Session Manager starts the shell as the principal's ``SSMSessionRunAs`` tag (an IAM
tag or a session tag) when it has one, and only otherwise as the document's ``runAsDefaultUser``
(…/session-preferences-run-as.html). So a user's own document binds nothing by itself: bob, assuming a role with the
session tag ``SSMSessionRunAs=alice``, would get alice's shell through bob's document. A user's policy therefore
allows its StartSession statements only while that tag is absent or names the user (``StringEqualsIfExists``), and
denies StartSession outright to a principal whose tag names anybody else (the Deny also overrides any other Allow
the principal holds). The shared document's policies cannot say which user is right: there the tag *is* the
choice, and the principal's trust policy must pin it (docs/people.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CLUSTER_TAG = "gpucluster:cluster"
ROLE_TAG = "gpucluster:role"
NODE_ROLES = ("head", "login", "compute")
# IAM's quotas, whitespace not counted: a customer managed policy, and a role's inline policies together
# (the existing ``iam-inline-policy-size`` rule checks the latter over the plan).
MANAGED_POLICY_LIMIT = 6_144
INLINE_POLICY_LIMIT = 10_240

_DOCUMENT_CHECK = {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}}
RUN_AS_TAG = "SSMSessionRunAs"
RUN_AS_KEY = f"aws:PrincipalTag/{RUN_AS_TAG}"
"""The condition key of the principal's (or its session's) ``SSMSessionRunAs`` tag."""


def _arn(partition: str, service: str, region: str, account: str, resource: str) -> str:
    return f"arn:{partition}:{service}:{region}:{account}:{resource}"


def session_document_arn(*, partition: str, region: str, account: str, document: str) -> str:
    """The ARN of the Session document ``document`` of this account and region."""
    return _arn(partition, "ssm", region, account, f"document/{document}")


def session_policy(
    *,
    partition: str,
    region: str,
    account: str,
    cluster: str,
    documents: tuple[str, ...],
    admin: bool,
    run_as: str | None = None,
) -> dict[str, Any]:
    """Start a Session Manager session on the cluster's login nodes (``admin``: on any node of the cluster —
    head, login, compute) with the Session documents ``documents`` only, and end or resume one's own sessions.

    Used for a declared user's policy (``run_as`` = that user; their own document, whose ``runAsDefaultUser`` is
    them) and for the exported directory policies (``run_as`` None: the shared document, where the principal's
    ``SSMSessionRunAs`` tag or session tag picks the user). With ``run_as``, the StartSession statements hold
    only while the principal's tag is absent or names ``run_as``, and a last statement denies StartSession to a
    principal tagged for anybody else (the module's docstring says why). ``ec2:DescribeInstances`` (which IAM cannot
    narrow) lets the ``sessionCommands`` output find a login node by its tags."""
    if not documents:
        raise ValueError("a session policy names at least one Session document")
    roles: str | list[str] = list(NODE_ROLES) if admin else "login"
    own_tag = {} if run_as is None else {"StringEqualsIfExists": {RUN_AS_KEY: run_as}}
    refused: list[dict[str, Any]] = []
    if run_as is not None:
        refused.append(
            {
                "Sid": "NoSessionsAsAnotherUser",
                "Effect": "Deny",
                "Action": "ssm:StartSession",
                "Resource": "*",
                "Condition": {"StringNotEquals": {RUN_AS_KEY: run_as}, "Null": {RUN_AS_KEY: "false"}},
            }
        )
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "StartSessionsOnTheClustersNodes" if admin else "StartSessionsOnTheLoginNodes",
                "Effect": "Allow",
                "Action": "ssm:StartSession",
                "Resource": _arn(partition, "ec2", region, account, "instance/*"),
                "Condition": {
                    "StringEquals": {f"ssm:resourceTag/{CLUSTER_TAG}": cluster, f"ssm:resourceTag/{ROLE_TAG}": roles},
                    **_DOCUMENT_CHECK,
                    **own_tag,
                },
            },
            {
                "Sid": "WithTheClustersSessionDocumentOnly",
                "Effect": "Allow",
                "Action": "ssm:StartSession",
                "Resource": [
                    session_document_arn(partition=partition, region=region, account=account, document=d) for d in documents
                ],
                "Condition": {**_DOCUMENT_CHECK, **own_tag},
            },
            {
                "Sid": "EndOrResumeOwnSessions",
                "Effect": "Allow",
                "Action": ["ssm:TerminateSession", "ssm:ResumeSession"],
                "Resource": _arn(partition, "ssm", region, account, "session/${aws:userid}-*"),
            },
            {"Sid": "FindTheLoginNodes", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
            *refused,
        ],
    }


def bind_secret_statements(*, secret_arn: str, kms_key_arn: str | None, region: str) -> list[dict[str, Any]]:
    """Every node role's right to the directory's bind password: ``GetSecretValue`` on exactly
    that secret; with a customer managed key, ``kms:Decrypt`` with it through Secrets Manager of the region only
    (``kms:ViaService``). No wildcard. An AWS managed key needs no grant."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ReadTheDirectoryBindPassword",
            "Effect": "Allow",
            "Action": "secretsmanager:GetSecretValue",
            "Resource": secret_arn,
        }
    ]
    if kms_key_arn is not None:
        statements.append(
            {
                "Sid": "DecryptTheDirectoryBindPassword",
                "Effect": "Allow",
                "Action": "kms:Decrypt",
                "Resource": kms_key_arn,
                "Condition": {"StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}},
            }
        )
    return statements


def login_role_policy(
    *,
    munge_secret_arn: str,
    asg_arn: str,
    bind_secret_arn: str | None = None,
    bind_kms_key_arn: str | None = None,
    host_key_secret_arn: str | None = None,
    region: str = "",
    artifact_objects: Sequence[str] = (),
) -> dict[str, Any]:
    """The login nodes' role beyond Session Manager (``session_manager_policy``, attached by ``ec2_ssm_role``),
    exactly: read the munge key, the directory's bind password (a directory identity) and the shared
    SSH host keys (SSH enabled); complete or extend the login group's own terminating lifecycle action (the drain
    program); ``artifact_objects``: read exactly these objects of the cluster's artifact bucket (the node package,
    whose users contract the users program reads its file with, and the declared users' object), nothing else in S3 (the drain program, the log shipper, the
    identity helper and the users program run from that package). Nothing on EC2, no ``iam:PassRole``, no
    ``ssm:SendCommand``. Its log shipping is the monitoring part's policy."""
    secrets = [munge_secret_arn, *(a for a in (host_key_secret_arn,) if a is not None)]
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ReadTheMungeKey" if len(secrets) == 1 else "ReadTheMungeKeyAndHostKeys",
            "Effect": "Allow",
            "Action": "secretsmanager:GetSecretValue",
            "Resource": secrets[0] if len(secrets) == 1 else secrets,
        },
        {
            "Sid": "DrainBeforeScaleIn",
            "Effect": "Allow",
            "Action": ["autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"],
            "Resource": asg_arn,
        },
    ]
    if artifact_objects:
        statements.append(
            {
                "Sid": "FetchTheNodePackageAndUsers",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": list(artifact_objects),
            }
        )
    if bind_secret_arn is not None:
        statements += bind_secret_statements(secret_arn=bind_secret_arn, kms_key_arn=bind_kms_key_arn, region=region)
    return {"Version": "2012-10-17", "Statement": statements}


def host_key_writer_statement(secret_arn: str) -> dict[str, Any]:
    """The head node's right to the login nodes' shared SSH host keys: it makes them once at first boot and
    writes them into the (empty) secret, the munge key's pattern."""
    return {
        "Sid": "MakeTheLoginHostKeys",
        "Effect": "Allow",
        "Action": ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"],
        "Resource": secret_arn,
    }


def statements_policy(statements: list[dict[str, Any]]) -> dict[str, Any]:
    """``statements`` as one permission policy document (a role's extra inline policy)."""
    return {"Version": "2012-10-17", "Statement": statements}
