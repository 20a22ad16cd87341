"""``no-root-sessions`` (gpucluster/policy/session_rules.py), clause by clause: a resource as
gpucluster makes it passes, each mistake fails with the property named, and a value not known yet is never a
violation. The rule over the shipped stacks' plans is in tests/tools/policy/test_rules.py (every golden plan) and
tests/tools/plan/test_people_plan.py (where the plans have the people's resources)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpucluster.policy.evaluate import RULES, from_plan
from gpucluster.policy.model import UNKNOWN, Resource
from gpucluster.policy.session_rules import NO_ROOT_SESSIONS, no_root_sessions
from tests.tools.policy.fixtures import instance, plan, res
from tests.tools.policy.session_fixtures import (
    ADMINS,
    AS_ALICE,
    CHECKED,
    GOOD_USER_DATA,
    INSTANCES,
    LOCKDOWN,
    SLURM_CONF,
    doc_arn,
    document,
    node_lt,
    policy,
    session_content,
    start,
    user_data,
)

OURS = document("demo-session-alice", session_content())


def found(*resources: dict[str, Any]) -> set[tuple[str, str]]:
    violations = no_root_sessions(from_plan(plan(*resources)))
    assert all(v.rule == NO_ROOT_SESSIONS and "Fix: " in v.render() for v in violations)
    return {(v.name, v.property) for v in violations}


def test_the_rule_is_registered_for_the_pack_and_the_cli():
    (rule,) = [r for r in RULES if r.name == NO_ROOT_SESSIONS]
    assert rule.stack and rule.check is no_root_sessions


# --- 1. session documents ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "prop"),
    [
        (session_content(), None),
        (session_content(runAsDefaultUser=None), None),  # the shared document: Run As through the principal's tag
        (session_content(runAsEnabled="true"), None),
        (session_content(runAsEnabled=False), "inputs.runAsEnabled"),
        ({**session_content(), "inputs": {"s3EncryptionEnabled": True}}, "inputs.runAsEnabled"),
        (session_content(runAsDefaultUser="root"), "inputs.runAsDefaultUser"),
        (session_content(runAsDefaultUser="ubuntu"), "inputs.runAsDefaultUser"),
        (session_content(runAsDefaultUser="ssm-user"), "inputs.runAsDefaultUser"),
        (session_content(shellProfile={"linux": "sudo -i"}), "inputs.shellProfile.linux"),
        (session_content(shellProfile={"linux": "cd $HOME; exec /usr/bin/sudo -s"}), "inputs.shellProfile.linux"),
        (session_content(shellProfile={"linux": "su - root"}), "inputs.shellProfile.linux"),
        (session_content(shellProfile={"linux": "exec bash -l  # no subshell, no sudoedit"}), None),
    ],
)
def test_standard_stream_documents_run_as_the_person(content: dict[str, Any], prop: str | None):
    assert found(document("d", content)) == ({("d", prop)} if prop else set())


def test_command_documents_never_elevate():
    elevated = {
        "schemaVersion": "1.0",
        "sessionType": "InteractiveCommands",
        "properties": {"linux": {"commands": "top", "runAsElevated": True}, "windows": {"commands": "x"}},
    }
    plain = {**elevated, "properties": {"linux": {"commands": "top", "runAsElevated": False}}}
    assert found(document("top", elevated), document("top-plain", plain)) == {("top", "content.properties.linux.runAsElevated")}
    assert found(document("not-a-session", elevated, kind="Command")) == set()  # Run Command is not this rule's


def test_yaml_unreadable_and_unknown_documents():
    yaml_doc = "schemaVersion: '1.0'\nsessionType: Standard_Stream\ninputs:\n  runAsEnabled: false\n"
    assert found(document("y", yaml_doc, fmt="YAML")) == {("y", "inputs.runAsEnabled")}
    assert found(document("broken", "{not json")) == {("broken", "content")}
    unknown = Resource("aws:ssm/document:Document", "u", "urn:u", {"documentType": "Session", "content": UNKNOWN})
    assert no_root_sessions([unknown]) == []
    inputs_unknown = {"sessionType": "Standard_Stream", "inputs": {"runAsEnabled": UNKNOWN}}
    assert no_root_sessions([Resource("aws:ssm/document:Document", "u", "urn:u", {"documentType": "Session", "content": inputs_unknown})]) == []  # fmt: skip


# --- 2. StartSession grants ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "bad"),
    [
        (start(INSTANCES, doc_arn("demo-session-alice")), False),
        (
            start(
                INSTANCES, doc_arn("demo-session-alice"), condition={"Bool": {"ssm:SessionDocumentAccessCheck": True}, **AS_ALICE}
            ),
            False,
        ),
        (start(INSTANCES, doc_arn("demo-session-alice"), action=["ssm:StartSession", "ssm:DescribeSessions"]), False),
        (start(INSTANCES), False),  # names no document: with the check on, no session can start at all
        (start(INSTANCES, doc_arn("demo-session-alice"), condition=None), True),
        (
            start(INSTANCES, doc_arn("demo-session-alice"), condition={"Bool": {"ssm:SessionDocumentAccessCheck": "false"}}),
            True,
        ),
        (start("*"), True),
        (start(INSTANCES, doc_arn("SSM-SessionManagerRunShell", "")), True),
        (start(INSTANCES, doc_arn("*")), True),
        (start(INSTANCES, doc_arn("demo-session-*")), True),
        (start(INSTANCES, doc_arn("someone-elses-session")), True),
        (start(INSTANCES, "arn:aws:ssm:*:*:*"), True),
        (start(INSTANCES, doc_arn("demo-session-alice"), action="ssm:*"), False),
        (start("*", action="ssm:Start*"), True),
        ({"Effect": "Allow", "Action": "ssm:StartSession", "NotResource": doc_arn("x")}, True),
        ({"Effect": "Deny", "Action": "ssm:StartSession", "Resource": "*"}, False),
        ({"Effect": "Allow", "Action": "ssm:TerminateSession", "Resource": "*"}, False),
        ({"Effect": "Allow", "Action": "*", "Resource": "*"}, False),  # an administrator's: root anyway (people.md)
    ],
)
def test_start_session_grants_check_and_name_only_the_stacks_documents(statement: dict[str, Any], bad: bool):
    assert found(OURS, policy("p", statement)) == ({("p", "policy")} if bad else set())


def test_both_faults_of_one_statement_are_reported_and_inline_role_policies_are_read():
    role = res(
        "aws:iam/role:Role",
        "r",
        {"inlinePolicies": [{"name": "s", "policy": json.dumps({"Statement": [start("*", condition=None)]})}]},
    )
    violations = no_root_sessions(from_plan(plan(OURS, role)))
    assert [(v.name, v.property) for v in violations] == [("r", "inlinePolicies[0].policy")] * 2
    assert "without ssm:SessionDocumentAccessCheck" in violations[0].message and "(*)" in violations[1].message


def test_a_document_whose_name_is_not_known_yet_is_no_violation():
    unnamed = Resource(
        "aws:ssm/document:Document", "u", "urn:u", {"documentType": "Session", "name": UNKNOWN, "content": UNKNOWN}
    )
    grant = from_plan(plan(policy("p", start(INSTANCES, doc_arn("demo-session-bob")))))
    assert no_root_sessions([unnamed, *grant]) == []
    assert no_root_sessions([*from_plan(plan(OURS)), *grant]) != []  # with every name known it is one
    assert no_root_sessions([Resource("aws:iam/policy:Policy", "p", "urn:p", {"policy": UNKNOWN})]) == []


# --- 2b. the principal's Run As tag on a person's document ----------------------------------------------------------

SHARED = document("demo-session", session_content(runAsDefaultUser="gpucluster-nobody"))
DENY_OTHERS = {
    "Sid": "NoSessionsAsAnotherUser",
    "Effect": "Deny",
    "Action": "ssm:StartSession",
    "Resource": "*",
    "Condition": {
        "StringNotEquals": {"aws:PrincipalTag/SSMSessionRunAs": "alice"},
        "Null": {"aws:PrincipalTag/SSMSessionRunAs": "false"},
    },
}


@pytest.mark.parametrize(
    ("statements", "bad"),
    [
        ([start(INSTANCES, doc_arn("demo-session-alice"))], False),  # StringEqualsIfExists alice
        (
            [start(INSTANCES, doc_arn("demo-session-alice"), condition=CHECKED)],
            True,
        ),  # any tag: bob's tag opens alice's doc as bob
        ([start(INSTANCES, doc_arn("demo-session-alice"), condition=CHECKED), DENY_OTHERS], False),  # refused by the Deny
        (
            [
                start(
                    doc_arn("demo-session-alice"),
                    condition={**CHECKED, "StringEqualsIfExists": {"aws:PrincipalTag/SSMSessionRunAs": "bob"}},
                )
            ],
            True,  # the tag pinned to somebody else
        ),
        ([start(INSTANCES, doc_arn("demo-session"), condition=CHECKED)], False),  # the shared document: the tag is the choice
    ],
)
def test_m4_a_persons_document_is_refused_to_a_principal_tagged_for_another_user(statements: list[dict[str, Any]], bad: bool):
    assert found(OURS, SHARED, policy("p", *statements)) == ({("p", "policy")} if bad else set())
    if bad:
        [v] = no_root_sessions(from_plan(plan(OURS, SHARED, policy("p", *statements))))
        assert "tagged SSMSessionRunAs=" in v.message and "runs as 'alice'" in v.message
        assert '"StringEqualsIfExists": {"aws:PrincipalTag/SSMSessionRunAs": "alice"}' in v.fix


def test_start_session_condition_aliases():
    assert CHECKED == {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}}  # what the fixtures pass with


# --- 3. the nodes' lockdown ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["head", "slurm-head", "login", "compute"])
def test_a_node_with_the_lockdown_and_only_the_admin_grant_passes(role: str):
    assert found(node_lt(role, role, GOOD_USER_DATA), node_lt(f"{role}-tags", role, GOOD_USER_DATA, where="tags")) == set()


@pytest.mark.parametrize(
    ("ud", "why"),
    [
        (user_data([ADMINS, SLURM_CONF], bootcmd=[["/usr/local/sbin/imds-guard"]]), "lacks"),
        (user_data([ADMINS], runcmd=[LOCKDOWN]), "lacks"),  # in runcmd the agent may have made ssm-user already
        (user_data([ADMINS], bootcmd=[["sh", "-c", "touch /etc/sudoers.d/ssm-agent-users"]]), "lacks"),
        (None, "lacks"),
        (
            user_data(
                [ADMINS, {"path": "/etc/sudoers.d/ssm-agent-users", "content": "ssm-user ALL=(ALL) NOPASSWD:ALL\n"}], [LOCKDOWN]
            ),
            "grants",
        ),
        (user_data([{**ADMINS, "content": "alice ALL=(ALL:ALL) NOPASSWD: ALL\n"}], [LOCKDOWN]), "grants"),
        (user_data([ADMINS], [LOCKDOWN], runcmd=["echo '%users ALL=(ALL) ALL' > /etc/sudoers.d/99-all"]), "grants"),
        (user_data([ADMINS], [LOCKDOWN], users=[{"name": "ops", "sudo": "ALL=(ALL) NOPASSWD:ALL"}]), "grants"),
    ],
)
def test_a_node_without_the_lockdown_or_with_another_grant_fails(ud: Any, why: str):
    violations = no_root_sessions(from_plan(plan(node_lt("n", "compute", ud))))
    assert {(v.name, v.property) for v in violations} == {("n", "userData")}
    assert all(why in v.message for v in violations), [v.message for v in violations]


def test_an_instance_tagged_head_is_read_too():
    bare = "#cloud-config\nbootcmd: []\n"
    head = instance("head", userData=bare, tags={"gpucluster:role": "head"})
    slurm_head = instance("slurm-head", userData=bare, tags={"gpucluster:role": "slurm-head"})
    assert found(head, slurm_head) == {("head", "userData"), ("slurm-head", "userData")}


def test_nodes_that_are_not_the_clusters_or_not_known_yet_are_not_this_rules():
    open_ud = user_data([], bootcmd=[])
    assert found(node_lt("eks-node", None, open_ud), node_lt("other", "bastion", open_ud)) == set()
    template = "aws:ec2/launchTemplate:LaunchTemplate"
    tags_unknown = Resource(template, "t", "urn:t", {"userData": open_ud, "tags": UNKNOWN})
    ud_unknown = Resource(template, "u", "urn:u", {"userData": UNKNOWN, "tags": {"gpucluster:role": "login"}})
    assert no_root_sessions([tags_unknown, ud_unknown]) == []
