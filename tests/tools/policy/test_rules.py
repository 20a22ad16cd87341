"""The rules over their failing fixtures and over every shipped stack's plan."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpucluster.policy.evaluate import RULES, evaluate, from_plan
from gpucluster.policy.model import UNKNOWN, Resource
from gpucluster.policy.rules import PROTECTED
from tests.conftest import ROOT
from tests.tools.policy.fixtures import FIXTURES

GOLDEN_PLANS = sorted((ROOT / "tests" / "golden" / "plans").glob("*.json"))


def test_every_rule_has_a_failing_fixture():
    assert sorted(FIXTURES) == sorted(rule.name for rule in RULES)


@pytest.mark.parametrize("rule", sorted(FIXTURES))
def test_each_rule_fails_its_fixture_and_only_there(rule: str):
    doc, expected = FIXTURES[rule]
    found = evaluate(from_plan(doc))
    assert {(v.rule, v.name, v.property) for v in found} == expected
    for v in found:
        # The message names the resource, the property and a fix.
        text = v.render()
        assert v.name in text and v.property in text and "Fix: " in text and v.fix


def test_the_messages_say_what_is_wrong():
    doc, _ = FIXTURES["no-public-ingress"]
    (ssh,) = [v for v in evaluate(from_plan(doc)) if v.name == "ssh-world"]
    assert ssh.render() == (
        'aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule "ssh-world" cidrIpv4: admits 0.0.0.0/0: anyone on the '
        "internet can reach this port range. Fix: admit the VPC CIDR or a security group (referencedSecurityGroupId) "
        "instead; reach nodes with Session Manager"
    )
    doc, _ = FIXTURES["imdsv2-required"]
    unset = next(v for v in evaluate(from_plan(doc)) if v.name == "unset")
    assert "not set (EC2 then accepts IMDSv1)" in unset.message and 'httpTokens = "required"' in unset.fix


def test_the_golden_plans_cover_every_shipped_stack():
    stacks = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert [p.stem for p in GOLDEN_PLANS] == stacks


@pytest.mark.parametrize("path", GOLDEN_PLANS, ids=lambda p: p.stem)
def test_every_shipped_stack_passes_every_rule(path):
    doc = json.loads(path.read_text())
    resources = from_plan(doc)
    assert len(resources) > 20  # the plan's custom resources, not an empty read
    assert [v.render() for v in evaluate(resources)] == []


def _all_unknown(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _all_unknown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_all_unknown(v) for v in value]
    return UNKNOWN


@pytest.mark.parametrize("path", GOLDEN_PLANS, ids=lambda p: p.stem)
def test_unknown_values_are_never_a_violation_nor_a_crash(path):
    """In a preview most values are not known yet: every leaf unknown (and every whole property unknown)
    must neither crash a rule nor be reported; only what the engine always knows (``protect``) counts."""
    leaves = [
        Resource(r.type, r.name, r.urn, _all_unknown(dict(r.props)), protect=r.protect, retain_on_delete=None)
        for r in from_plan(json.loads(path.read_text()))
    ]
    whole = [Resource(r.type, r.name, r.urn, {k: UNKNOWN for k in r.props}, protect=r.protect) for r in leaves]
    for resources in (leaves, whole):
        found = evaluate(resources)
        # A bucket whose forceDestroy is unknown is held to the protection rule; nothing else may fire.
        assert {(v.rule, v.type) for v in found} <= {(PROTECTED, "aws:s3/bucket:Bucket")}


def test_an_nfs_home_mount_without_nosuid_is_named_as_nfs():
    doc, _ = FIXTURES["lustre-mounts-nosuid-nodev"]
    (home,) = [v for v in evaluate(from_plan(doc)) if v.name == "home-suid"]
    assert "mounts NFS at /home without nosuid" in home.message
