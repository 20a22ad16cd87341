"""The session and login-node IAM documents (docs/people.md, "Security"): exact JSON per case, what the offline evaluator says
they allow and refuse (docs/people.md), and their size under IAM's quotas."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from gpucluster.policy.iam_eval import Request, authorize, evaluate
from gpucluster.render.slurm.iam_sessions import (
    INLINE_POLICY_LIMIT,
    MANAGED_POLICY_LIMIT,
    bind_secret_statements,
    host_key_writer_statement,
    login_role_policy,
    session_document_arn,
    session_policy,
)

WHERE = {"partition": "aws", "region": "us-east-1", "account": "123456789012"}
INSTANCES = "arn:aws:ec2:us-east-1:123456789012:instance/*"
DOC = "arn:aws:ssm:us-east-1:123456789012:document/"
CHECK = {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}}
MUNGE = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/p5/munge-AbCdEf"
BIND = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/ad-bind-AbCdEf"
HOST_KEYS = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/p5/login-host-keys-XyZ123"
ASG = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/p5-login"
PACKAGE = "arn:aws:s3:::p5-slurm-0a1b2c/agent/gpucluster_agents-0123456789abcdef.zip"
USERS = "arn:aws:s3:::p5-slurm-0a1b2c/users/users.json"
CMK = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _tail(documents: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "Sid": "WithTheClustersSessionDocumentOnly",
            "Effect": "Allow",
            "Action": "ssm:StartSession",
            "Resource": [DOC + d for d in documents],
            "Condition": CHECK,
        },
        {
            "Sid": "EndOrResumeOwnSessions",
            "Effect": "Allow",
            "Action": ["ssm:TerminateSession", "ssm:ResumeSession"],
            "Resource": "arn:aws:ssm:us-east-1:123456789012:session/${aws:userid}-*",
        },
        {"Sid": "FindTheLoginNodes", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
    ]


def test_a_users_policy_is_exactly_start_on_login_nodes_with_their_document() -> None:
    as_bob = {"StringEqualsIfExists": {"aws:PrincipalTag/SSMSessionRunAs": "bob"}}
    tail = _tail(["p5-session-bob"])
    tail[0]["Condition"] = {**CHECK, **as_bob}
    assert session_policy(**WHERE, cluster="p5", documents=("p5-session-bob",), admin=False, run_as="bob") == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "StartSessionsOnTheLoginNodes",
                "Effect": "Allow",
                "Action": "ssm:StartSession",
                "Resource": INSTANCES,
                "Condition": {
                    "StringEquals": {"ssm:resourceTag/gpucluster:cluster": "p5", "ssm:resourceTag/gpucluster:role": "login"},
                    **CHECK,
                    **as_bob,
                },
            },
            *tail,
            {
                "Sid": "NoSessionsAsAnotherUser",
                "Effect": "Deny",
                "Action": "ssm:StartSession",
                "Resource": "*",
                "Condition": {
                    "StringNotEquals": {"aws:PrincipalTag/SSMSessionRunAs": "bob"},
                    "Null": {"aws:PrincipalTag/SSMSessionRunAs": "false"},
                },
            },
        ],
    }


@pytest.mark.parametrize(("tag", "allowed"), [(None, True), ("bob", True), ("alice", False), ("Bob", False)])
def test_m4_bobs_principal_tagged_alice_is_denied(tag: str | None, allowed: bool) -> None:
    """Session Manager runs the shell as the principal's SSMSessionRunAs tag when there is one, whatever the document
    says: bob's policy must refuse a principal tagged for anybody else — even beside the exported login-sessions
    policy (the shared document, where the tag is the choice), so the refusal is an explicit Deny."""
    bobs = session_policy(**WHERE, cluster="p5", documents=("p5-session-bob",), admin=False, run_as="bob")
    shared = session_policy(**WHERE, cluster="p5", documents=("p5-session",), admin=False)
    context = {} if tag is None else {"aws:PrincipalTag/SSMSessionRunAs": tag}
    for document, policies in (("p5-session-bob", [bobs]), ("p5-session-bob", [bobs, shared]), ("p5-session", [bobs, shared])):
        requests = [Request(r.action, r.resource, {**r.context, **context}) for r in _start(LOGIN, document)]
        decisions = authorize(policies, requests)
        assert all(d.allowed for d in decisions.values()) is allowed, (document, len(policies))
        if not allowed:
            assert all(d.denied_by == ("NoSessionsAsAnotherUser",) for d in decisions.values())


def test_an_admins_policy_reaches_every_node_role_of_the_cluster_only() -> None:
    doc = session_policy(**WHERE, cluster="p5", documents=("p5-session-alice",), admin=True)
    assert doc["Statement"][0] == {
        "Sid": "StartSessionsOnTheClustersNodes",
        "Effect": "Allow",
        "Action": "ssm:StartSession",
        "Resource": INSTANCES,
        "Condition": {
            "StringEquals": {
                "ssm:resourceTag/gpucluster:cluster": "p5",
                "ssm:resourceTag/gpucluster:role": ["head", "login", "compute"],
            },
            **CHECK,
        },
    }
    assert doc["Statement"][1:] == _tail(["p5-session-alice"])


def test_the_exported_directory_policy_names_the_shared_document() -> None:
    doc = session_policy(**WHERE, cluster="p5", documents=("p5-session",), admin=False)
    assert doc["Statement"][1]["Resource"] == [DOC + "p5-session"]


def test_every_start_session_statement_carries_the_document_access_check() -> None:
    for admin in (False, True):
        doc = session_policy(**WHERE, cluster="p5", documents=("p5-session",), admin=admin)
        starts = [s for s in doc["Statement"] if "ssm:StartSession" in json.dumps(s["Action"])]
        assert len(starts) == 2
        assert all(s["Condition"]["BoolIfExists"] == {"ssm:SessionDocumentAccessCheck": "true"} for s in starts)


def test_no_document_refused() -> None:
    with pytest.raises(ValueError, match="at least one Session document"):
        session_policy(**WHERE, cluster="p5", documents=(), admin=False)


def _start(instance_tags: dict[str, str], document: str) -> list[Request]:
    """StartSession is authorised once for the instance (with its tags) and once for the document."""
    context: dict[str, str | bool] = {"ssm:SessionDocumentAccessCheck": True}
    return [
        Request(
            "ssm:StartSession",
            "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc",
            {**context, **{f"ssm:resourceTag/{k}": v for k, v in instance_tags.items()}},
        ),
        Request("ssm:StartSession", DOC + document, context),
    ]


LOGIN = {"gpucluster:cluster": "p5", "gpucluster:role": "login"}


@pytest.mark.parametrize(
    ("admin", "tags", "document", "allowed"),
    [
        (False, LOGIN, "p5-session-bob", True),
        (False, LOGIN, "SSM-SessionManagerRunShell", False),  # the default document: Run As not bound to bob
        (False, LOGIN, "p5-session-alice", False),  # another user's document
        (False, {"gpucluster:cluster": "p5", "gpucluster:role": "compute"}, "p5-session-bob", False),
        (False, {"gpucluster:cluster": "p5", "gpucluster:role": "head"}, "p5-session-bob", False),
        (False, {"gpucluster:cluster": "other", "gpucluster:role": "login"}, "p5-session-bob", False),
        (False, {}, "p5-session-bob", False),  # an untagged instance of the account
        (True, {"gpucluster:cluster": "p5", "gpucluster:role": "head"}, "p5-session-bob", True),
        (True, {"gpucluster:cluster": "p5", "gpucluster:role": "compute"}, "p5-session-bob", True),
        (True, {"gpucluster:cluster": "p5"}, "p5-session-bob", False),  # no role tag: not one of our nodes
        (True, {"gpucluster:cluster": "other", "gpucluster:role": "head"}, "p5-session-bob", False),
    ],
)
def test_what_the_evaluator_says_a_session_policy_allows(admin: bool, tags: dict[str, str], document: str, allowed: bool) -> None:
    doc = session_policy(**WHERE, cluster="p5", documents=("p5-session-bob",), admin=admin)
    decisions = authorize([doc], _start(tags, document))
    assert all(d.allowed for d in decisions.values()) is allowed


def test_own_sessions_only_may_be_ended() -> None:
    doc = session_policy(**WHERE, cluster="p5", documents=("p5-session-bob",), admin=False)
    me = {"aws:userid": "AROAEXAMPLE:bob"}
    own = "arn:aws:ssm:us-east-1:123456789012:session/AROAEXAMPLE:bob-0a1b2c3d"
    theirs = "arn:aws:ssm:us-east-1:123456789012:session/AROAOTHER:alice-0a1b2c3d"
    assert evaluate([doc], Request("ssm:TerminateSession", own, me)).allowed
    assert not evaluate([doc], Request("ssm:TerminateSession", theirs, me)).allowed
    assert not evaluate([doc], Request("ssm:SendCommand", "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc", me)).allowed


def test_login_role_policy_sessions_only_cluster() -> None:
    assert login_role_policy(munge_secret_arn=MUNGE, asg_arn=ASG, artifact_objects=[PACKAGE, USERS]) == {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadTheMungeKey", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": MUNGE},
            {
                "Sid": "DrainBeforeScaleIn",
                "Effect": "Allow",
                "Action": ["autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"],
                "Resource": ASG,
            },
            {"Sid": "FetchTheNodePackageAndUsers", "Effect": "Allow", "Action": "s3:GetObject", "Resource": [PACKAGE, USERS]},
        ],
    }


def test_login_role_policy_directory_and_ssh() -> None:
    doc = login_role_policy(
        munge_secret_arn=MUNGE,
        asg_arn=ASG,
        artifact_objects=[PACKAGE, USERS],
        bind_secret_arn=BIND,
        bind_kms_key_arn=CMK,
        host_key_secret_arn=HOST_KEYS,
        region="us-east-1",
    )
    assert doc["Statement"] == [
        {
            "Sid": "ReadTheMungeKeyAndHostKeys",
            "Effect": "Allow",
            "Action": "secretsmanager:GetSecretValue",
            "Resource": [MUNGE, HOST_KEYS],
        },
        doc["Statement"][1],
        doc["Statement"][2],
        {"Sid": "ReadTheDirectoryBindPassword", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": BIND},
        {
            "Sid": "DecryptTheDirectoryBindPassword",
            "Effect": "Allow",
            "Action": "kms:Decrypt",
            "Resource": CMK,
            "Condition": {"StringEquals": {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"}},
        },
    ]


def test_login_role_may_not_write_secrets_touch_ec2_or_pass_roles() -> None:
    doc = login_role_policy(munge_secret_arn=MUNGE, asg_arn=ASG, artifact_objects=[PACKAGE, USERS], host_key_secret_arn=HOST_KEYS)
    for action, resource in [
        ("secretsmanager:PutSecretValue", HOST_KEYS),
        ("secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:123456789012:secret:other-AbCdEf"),
        ("ec2:TerminateInstances", "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc"),
        ("iam:PassRole", "arn:aws:iam::123456789012:role/p5-head-role"),
        ("ssm:SendCommand", "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc"),
        ("autoscaling:CompleteLifecycleAction", ASG.replace("p5-login", "p5-compute")),
        ("s3:GetObject", PACKAGE.rsplit("/", 2)[0] + "/node-maps/i-0abc.json"),
        ("s3:GetObject", PACKAGE.rsplit("/", 2)[0] + "/head/files-0123456789abcdef.json"),
        ("s3:PutObject", PACKAGE),
    ]:
        assert not evaluate([doc], Request(action, resource)).allowed, action
    assert evaluate([doc], Request("autoscaling:CompleteLifecycleAction", ASG)).allowed
    assert evaluate([doc], Request("s3:GetObject", PACKAGE)).allowed
    assert evaluate([doc], Request("s3:GetObject", USERS)).allowed


def test_bind_secret_statement_without_a_cmk_has_no_kms() -> None:
    assert bind_secret_statements(secret_arn=BIND, kms_key_arn=None, region="us-east-1") == [
        {"Sid": "ReadTheDirectoryBindPassword", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": BIND}
    ]


def test_bind_secrets_cmk_decrypts_only_through_secrets_manager() -> None:
    doc = {"Version": "2012-10-17", "Statement": bind_secret_statements(secret_arn=BIND, kms_key_arn=CMK, region="us-east-1")}
    assert evaluate([doc], Request("kms:Decrypt", CMK, {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"})).allowed
    assert not evaluate([doc], Request("kms:Decrypt", CMK)).allowed
    assert not evaluate([doc], Request("kms:Decrypt", CMK, {"kms:ViaService": "s3.us-east-1.amazonaws.com"})).allowed


def test_head_writes_the_host_keys() -> None:
    assert host_key_writer_statement(HOST_KEYS) == {
        "Sid": "MakeTheLoginHostKeys",
        "Effect": "Allow",
        "Action": ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"],
        "Resource": HOST_KEYS,
    }


def test_document_arn() -> None:
    assert session_document_arn(partition="aws-cn", region="cn-north-1", account="1", document="d") == (
        "arn:aws-cn:ssm:cn-north-1:1:document/d"
    )


def _size(doc: dict[str, Any]) -> int:
    return len(re.sub(r"\s", "", json.dumps(doc)))


def test_sizes_fit_iams_quotas_at_the_longest_names() -> None:
    cluster = "c" * 40
    long_secret = MUNGE.replace("gpucluster/p5/munge", "x" * 400)
    session = session_policy(**WHERE, cluster=cluster, documents=(f"{cluster}-session-{'u' * 32}",), admin=True, run_as="u" * 32)
    login = login_role_policy(
        munge_secret_arn=long_secret,
        asg_arn=ASG.replace("p5-login", f"{cluster}-login"),
        artifact_objects=[
            f"arn:aws:s3:::{'b' * 63}/agent/gpucluster_agents-{'0' * 16}.zip",
            f"arn:aws:s3:::{'b' * 63}/users/users.json",
        ],
        bind_secret_arn=long_secret,
        bind_kms_key_arn=CMK,
        host_key_secret_arn=long_secret,
        region="us-east-1",
    )
    assert _size(session) < MANAGED_POLICY_LIMIT
    assert _size(login) < INLINE_POLICY_LIMIT // 2  # room for Session Manager's own statements on the same role
