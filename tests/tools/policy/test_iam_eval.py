"""The offline IAM evaluator's semantics, one rule of IAM's at a time (the cases the agent's tests lean on)."""

from __future__ import annotations

import pytest

from gpucluster.policy.iam_eval import ALLOW, DENY, IMPLICIT_DENY, Request, UnsupportedPolicy, authorize, evaluate

INSTANCE = "arn:aws:ec2:us-east-1:123456789012:instance/*"


def one(statement: dict, request: Request) -> str:
    return evaluate([{"Version": "2012-10-17", "Statement": [statement]}], request).result


def allow(condition: dict | None = None, **more) -> dict:
    st = {"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": INSTANCE, **more}
    return {**st, "Condition": condition} if condition else st


def run(**context) -> Request:
    return Request("ec2:RunInstances", INSTANCE, context)


def test_nothing_allowed_is_an_implicit_deny_and_a_deny_wins():
    assert evaluate([], run()).result == IMPLICIT_DENY
    deny = {"Effect": "Deny", "Action": "ec2:*", "Resource": "*"}
    decision = evaluate([{"Statement": [allow(Sid="A"), {**deny, "Sid": "D"}]}], run())
    assert (decision.result, decision.allowed_by, decision.denied_by) == (DENY, ("A",), ("D",))


def test_actions_match_case_insensitively_with_wildcards_and_notaction():
    assert one(allow(Action="EC2:run*"), run()) == ALLOW
    assert one(allow(Action="ec2:Run?nstances"), run()) == ALLOW
    assert one(allow(Action="ec2:CreateFleet"), run()) == IMPLICIT_DENY
    st = {"Effect": "Allow", "NotAction": "ec2:Terminate*", "Resource": "*"}
    assert one(st, run()) == ALLOW
    assert one({**st, "NotAction": ["ec2:RunInstances"]}, run()) == IMPLICIT_DENY


def test_resources_match_segment_by_segment():
    assert one(allow(Resource="*"), run()) == ALLOW
    assert one(allow(Resource="arn:aws:ec2:*:*:instance/*"), run()) == ALLOW
    assert one(allow(Resource="arn:aws:ec2:us-west-2:*:instance/*"), run()) == IMPLICIT_DENY
    # a wildcard does not cross into another segment: "*" in the region is not "region:account"
    assert one(allow(Resource="arn:aws:ec2:*:instance/*"), run()) == IMPLICIT_DENY
    subnet = "arn:aws:ec2:us-east-1:123456789012:subnet/subnet-0aaa"
    assert one(allow(Resource=subnet), Request("ec2:RunInstances", subnet)) == ALLOW
    other = Request("ec2:RunInstances", "arn:aws:ec2:us-east-1:123456789012:subnet/subnet-0bbb")
    assert one(allow(Resource=subnet), other) == IMPLICIT_DENY
    assert one({"Effect": "Allow", "Action": "ec2:RunInstances", "NotResource": subnet}, other) == ALLOW
    # the resource part may hold colons
    asg = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:uuid:autoScalingGroupName/x"
    pattern = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/*"
    assert one(allow(Resource=pattern), Request("ec2:RunInstances", asg)) == ALLOW


def test_a_missing_key_fails_positive_operators_and_satisfies_negated_ones():
    assert one(allow({"StringEquals": {"ec2:InstanceType": "p5.48xlarge"}}), run()) == IMPLICIT_DENY
    assert one(allow({"StringNotEquals": {"ec2:InstanceType": "p5.48xlarge"}}), run()) == ALLOW
    assert one(allow({"ArnLike": {"ec2:LaunchTemplate": "*"}}), run()) == IMPLICIT_DENY
    assert one(allow({"StringEqualsIfExists": {"ec2:InstanceType": "p5.48xlarge"}}), run()) == ALLOW
    assert one(allow({"StringEqualsIfExists": {"ec2:InstanceType": "p5.48xlarge"}}), run(**{"ec2:InstanceType": "x"})) == (
        IMPLICIT_DENY
    )


def test_values_are_alternatives_keys_and_operators_all_apply():
    cond = {"StringEquals": {"ec2:InstanceType": ["p5.48xlarge", "p4d.24xlarge"], "ec2:MetadataHttpTokens": "required"}}
    assert one(allow(cond), run(**{"ec2:InstanceType": "p4d.24xlarge", "ec2:MetadataHttpTokens": "required"})) == ALLOW
    assert one(allow(cond), run(**{"ec2:InstanceType": "p4d.24xlarge", "ec2:MetadataHttpTokens": "optional"})) == IMPLICIT_DENY
    both = {**cond, "ArnEquals": {"ec2:InstanceProfile": "arn:aws:iam::1:instance-profile/p"}}
    assert one(allow(both), run(**{"ec2:InstanceType": "p5.48xlarge", "ec2:MetadataHttpTokens": "required"})) == IMPLICIT_DENY


def test_condition_key_names_are_case_insensitive_values_are_not():
    assert one(allow({"StringEquals": {"EC2:instancetype": "p5.48xlarge"}}), run(**{"ec2:InstanceType": "p5.48xlarge"})) == ALLOW
    assert one(allow({"StringEquals": {"ec2:InstanceType": "P5.48XLARGE"}}), run(**{"ec2:InstanceType": "p5.48xlarge"})) == (
        IMPLICIT_DENY
    )
    assert one(
        allow({"StringEqualsIgnoreCase": {"ec2:InstanceType": "P5.48XLARGE"}}), run(**{"ec2:InstanceType": "p5.48xlarge"})
    ) == (ALLOW)


def test_set_operators_on_multivalued_keys():
    only = allow({"ForAllValues:StringEquals": {"aws:TagKeys": ["gpucluster:node-name", "Name"]}})
    assert one(only, run(**{"aws:TagKeys": ["Name"]})) == ALLOW
    assert one(only, run(**{"aws:TagKeys": ["Name", "gpucluster:cluster"]})) == IMPLICIT_DENY
    # IAM's pitfall, kept: ForAllValues holds when the key is missing or empty
    assert one(only, run()) == ALLOW and one(only, run(**{"aws:TagKeys": []})) == ALLOW
    some = allow({"ForAnyValue:StringEquals": {"aws:TagKeys": ["gpucluster:cluster"]}})
    assert one(some, run(**{"aws:TagKeys": ["Name", "gpucluster:cluster"]})) == ALLOW
    assert one(some, run()) == IMPLICIT_DENY and one(some, run(**{"aws:TagKeys": ["Name"]})) == IMPLICIT_DENY
    # a plain operator on a multi-valued key: any value matching
    assert one(allow({"StringEquals": {"aws:TagKeys": "Name"}}), run(**{"aws:TagKeys": ["Name", "x"]})) == ALLOW


def test_null_bool_like_and_arn_operators():
    assert one(allow({"Null": {"aws:RequestTag/x": "false"}}), run(**{"aws:RequestTag/x": "1"})) == ALLOW
    assert one(allow({"Null": {"aws:RequestTag/x": "false"}}), run()) == IMPLICIT_DENY
    assert one(allow({"Null": {"aws:RequestTag/x": "true"}}), run()) == ALLOW
    assert (
        one(allow({"Bool": {"ec2:IsLaunchTemplateResource": "false"}}), run(**{"ec2:IsLaunchTemplateResource": False})) == ALLOW
    )
    assert one(allow({"Bool": {"ec2:IsLaunchTemplateResource": "false"}}), run(**{"ec2:IsLaunchTemplateResource": True})) == (
        IMPLICIT_DENY
    )
    assert (
        one(
            allow({"StringLike": {"aws:PrincipalTag/x509Subject/CN": "gpu-node-?*"}}),
            run(**{"aws:PrincipalTag/x509Subject/CN": "gpu-node-1"}),
        )
        == ALLOW
    )
    assert one(
        allow({"StringLike": {"aws:PrincipalTag/x509Subject/CN": "gpu-node-?*"}}),
        run(**{"aws:PrincipalTag/x509Subject/CN": "gpu-node-"}),
    ) == (IMPLICIT_DENY)
    subnet = "arn:aws:ec2:us-east-1:123456789012:subnet/subnet-0aaa"
    assert one(allow({"ArnEquals": {"ec2:Subnet": [subnet]}}), run(**{"ec2:Subnet": subnet})) == ALLOW
    assert one(allow({"ArnEquals": {"ec2:Subnet": [subnet]}}), run(**{"ec2:Subnet": subnet + "b"})) == IMPLICIT_DENY
    assert one(allow({"ArnNotLike": {"ec2:Subnet": "arn:aws:ec2:*:*:subnet/subnet-0a*"}}), run(**{"ec2:Subnet": subnet})) == (
        IMPLICIT_DENY
    )


def test_policy_variables_and_principals_in_a_trust_policy():
    trust = {
        "Effect": "Allow",
        "Principal": {"Service": "rolesanywhere.amazonaws.com"},
        "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"sts:RoleSessionName": "${aws:PrincipalTag/x509Subject/CN}"}},
    }
    ra = {"Service": "rolesanywhere.amazonaws.com"}
    ok = Request("sts:AssumeRole", "role", {"aws:PrincipalTag/x509Subject/CN": "n1", "sts:RoleSessionName": "n1"}, ra)
    assert one(trust, ok) == ALLOW
    assert one(trust, Request(ok.action, ok.resource, {**ok.context, "sts:RoleSessionName": "n2"}, ra)) == IMPLICIT_DENY
    assert one(trust, Request(ok.action, ok.resource, {"sts:RoleSessionName": "n1"}, ra)) == IMPLICIT_DENY  # no tag
    assert one(trust, Request(ok.action, ok.resource, ok.context, {"Service": "ec2.amazonaws.com"})) == IMPLICIT_DENY


def test_a_call_is_allowed_only_when_every_context_is():
    policies = [{"Statement": [allow()]}]
    decisions = authorize(policies, [run(), Request("ec2:RunInstances", "arn:aws:ec2:us-east-1:123456789012:subnet/s")])
    assert [d.allowed for d in decisions.values()] == [True, False]


@pytest.mark.parametrize(
    "statement",
    [
        allow({"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}),
        allow({"ForEvery:StringEquals": {"aws:TagKeys": "x"}}),
        allow({"NullIfExists": {"aws:TagKeys": "true"}}),
        {"Effect": "Maybe", "Action": "*", "Resource": "*"},
        {"Effect": "Allow", "Resource": "*"},
    ],
)
def test_what_it_does_not_implement_it_refuses(statement):
    with pytest.raises(UnsupportedPolicy):
        one(statement, run(**{"aws:TagKeys": ["x"]}))
