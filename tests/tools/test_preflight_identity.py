"""Preflight of the people (gpucluster/tools/preflight/identity.py) against moto's server: the directory's bind
secret (Secrets Manager, its resource policy, its KMS key), the users' session principals (IAM roles and users and
their SSMSessionRunAs tag), the login and load balancer subnets' routes (EC2), and the OpenZFS offering it cannot
check. moto implements every call used here; the specs are the shipped stacks' (slurm-p5: declared users,
slurm-directory: Active Directory), the subnet checks read only ``slurm.loginNodes`` and get a spec of that part."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

import pytest

from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.tools.preflight import Clients, preflight
from gpucluster.tools.preflight.identity import (
    check_bind_secret,
    check_home_offering,
    check_login_subnets,
    check_session_principals,
)
from tests.tools.test_preflight_hybrid import stack

CATALOG = load_catalog()
S = "gpucluster:slurm"


@pytest.fixture
def aws(moto_endpoint, aws_env) -> Clients:
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"))
    return Clients.create("us-east-1", moto_endpoint)


def spec(name: str, **directory: Any):
    config = copy.deepcopy(stack(name))
    if directory:
        config[S]["identity"]["directory"].update(directory)
    return load_spec(config, stack=name, catalog=CATALOG).spec


def codes(findings: Any) -> list[tuple[str, str]]:
    return [(f.code, f.path) for f in findings]


def bind_secret(aws: Clients, **kwargs: Any) -> str:
    return aws.secretsmanager.create_secret(Name="gpucluster/ad-bind", SecretString="example-bind-pw", **kwargs)["ARN"]


# --- the bind secret -----------------------------------------------------------------------------------------------


def test_a_present_secret_on_secrets_managers_key_passes(aws: Clients):
    arn = bind_secret(aws)
    assert list(check_bind_secret(spec("slurm-directory", bindPasswordSecret=arn), CATALOG, aws)) == []


def test_a_missing_secret_is_an_error(aws: Clients):
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/nothing-AbCdEf"
    [finding] = check_bind_secret(spec("slurm-directory", bindPasswordSecret=arn), CATALOG, aws)
    assert (finding.code, finding.path) == ("bind-secret-missing", f"{S}.identity.directory.bindPasswordSecret")
    assert arn in finding.message and "create it" in finding.fix


def test_a_secret_scheduled_for_deletion_is_an_error(aws: Clients):
    arn = bind_secret(aws)
    aws.secretsmanager.delete_secret(SecretId=arn, RecoveryWindowInDays=7)
    found = list(check_bind_secret(spec("slurm-directory", bindPasswordSecret=arn), CATALOG, aws))
    assert [f.code for f in found] == ["bind-secret-deleted"] and "restore-secret" in found[0].fix


def test_a_deny_in_the_secrets_policy_is_a_warning(aws: Clients):
    arn = bind_secret(aws)
    deny = {
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": "secretsmanager:GetSecretValue",
        "Resource": "*",
        "Condition": {"StringNotLike": {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/directory-admins"}},
    }
    aws.secretsmanager.put_resource_policy(
        SecretId=arn, ResourcePolicy=json.dumps({"Version": "2012-10-17", "Statement": [deny]})
    )
    [finding] = check_bind_secret(spec("slurm-directory", bindPasswordSecret=arn), CATALOG, aws)
    assert finding.code == "bind-secret-deny" and "StringNotLike" in finding.message


def test_a_customer_managed_key_is_a_warning_and_a_disabled_one_an_error(aws: Clients):
    meta = aws.kms.create_key(Description="bind secret key")["KeyMetadata"]
    key = meta["Arn"]
    arn = bind_secret(aws, KmsKeyId=key)
    config = spec("slurm-directory", bindPasswordSecret=arn)
    assert [f.code for f in check_bind_secret(config, CATALOG, aws)] == ["bind-secret-cmk"]
    aws.kms.disable_key(KeyId=meta["KeyId"])  # (moto answers DisableKey on a key ARN with a 500; AWS takes both)
    found = list(check_bind_secret(config, CATALOG, aws))
    assert [f.code for f in found] == ["bind-secret-key-disabled", "bind-secret-cmk"]
    assert "which is Disabled" in found[0].message


def test_declared_users_have_no_bind_secret_to_check(aws: Clients):
    assert list(check_bind_secret(spec("slurm-p5"), CATALOG, aws)) == []


# --- the session principals -----------------------------------------------------------------------------------------


TRUST = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "123456789012"}, "Action": "sts:AssumeRole"}]})  # fmt: skip


def test_present_principals_pass_and_missing_ones_are_errors(aws: Clients):
    """slurm-p5 declares alice (role/alice) and bob (user/bob)."""
    config = spec("slurm-p5")
    found = list(check_session_principals(config, CATALOG, aws))
    assert sorted(f.code for f in found) == ["principal-missing", "principal-missing"]
    assert any("no IAM role 'alice'" in f.message for f in found) and any("no IAM user 'bob'" in f.message for f in found)
    aws.iam.create_role(RoleName="alice", AssumeRolePolicyDocument=TRUST)
    aws.iam.create_user(UserName="bob")
    assert list(check_session_principals(config, CATALOG, aws)) == []


def test_m4_a_principal_tagged_for_another_user_is_refused(aws: Clients):
    """The tag wins over the user's own document: alice's principal tagged bob would open bob's account. An error
    (refused before anything is made), naming the field, the value and the fix."""
    aws.iam.create_role(RoleName="alice", AssumeRolePolicyDocument=TRUST, Tags=[{"Key": "SSMSessionRunAs", "Value": "bob"}])
    aws.iam.create_user(UserName="bob", Tags=[{"Key": "SSMSessionRunAs", "Value": "bob"}])  # its own name: fine
    [finding] = check_session_principals(spec("slurm-p5"), CATALOG, aws)
    assert (finding.code, finding.path, finding.level) == (
        "principal-run-as-other",
        f"{S}.identity.users[0].sessionPrincipal",
        "error",
    )
    assert finding.value == "arn:aws:iam::123456789012:role/alice"
    assert "SSMSessionRunAs=bob" in finding.message and "the tag wins" in finding.message
    assert "aws iam untag-role --role-name alice --tag-keys SSMSessionRunAs" in finding.fix


# --- the subnets ----------------------------------------------------------------------------------------------------


def vpc(aws: Clients) -> dict[str, Any]:
    """A VPC with a private subnet (NAT-less, no default route) and a public one (0.0.0.0/0 to an internet gateway) in
    us-east-1a, and a public one in us-east-1b."""
    ec2 = aws.ec2
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc_id)
    public_rt = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=public_rt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    out = {"vpc": vpc_id, "igw": igw}
    for name, cidr, zone, public in (("private", "10.0.1.0/24", "us-east-1a", False), ("public_a", "10.0.2.0/24", "us-east-1a", True), ("public_b", "10.0.3.0/24", "us-east-1b", True)):  # fmt: skip
        subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"]["SubnetId"]
        if public:
            ec2.associate_route_table(RouteTableId=public_rt, SubnetId=subnet)
        out[name] = subnet
    return out


def login_spec(subnets: list[str], scheme: str | None = None, public: list[str] | None = None) -> Any:
    ssh = (
        SimpleNamespace(scheme=scheme, public_subnet_ids=tuple(public or ()), allowed_cidrs=("203.0.113.0/24",))
        if scheme
        else None
    )
    return SimpleNamespace(slurm=SimpleNamespace(login_nodes=SimpleNamespace(subnet_ids=tuple(subnets), ssh=ssh)))


def test_private_login_subnets_and_public_nlb_subnets_pass(aws: Clients):
    net = vpc(aws)
    config = login_spec([net["private"]], "internet-facing", [net["public_a"]])
    assert list(check_login_subnets(config, CATALOG, aws)) == []


def test_a_public_login_subnet_is_an_error(aws: Clients):
    net = vpc(aws)
    [finding] = check_login_subnets(login_spec([net["public_a"]]), CATALOG, aws)
    assert (finding.code, finding.path) == ("login-subnet-public", f"{S}.loginNodes.subnetIds[0]")
    assert net["igw"] in finding.message


def test_nlb_subnets_without_an_internet_route_or_a_login_zone_are_errors(aws: Clients):
    net = vpc(aws)
    config = login_spec([net["private"]], "internet-facing", [net["private"], net["public_b"]])
    assert codes(check_login_subnets(config, CATALOG, aws)) == [
        ("nlb-subnet-private", f"{S}.loginNodes.ssh.publicSubnetIds[0]"),
        ("nlb-zone-missing", f"{S}.loginNodes.ssh.publicSubnetIds"),  # us-east-1a's listed subnet is not public
    ]
    config = login_spec([net["private"]], "internet-facing", [net["public_b"]])
    assert codes(check_login_subnets(config, CATALOG, aws)) == [("nlb-zone-missing", f"{S}.loginNodes.ssh.publicSubnetIds")]


def test_an_internal_load_balancer_needs_no_public_subnet(aws: Clients):
    net = vpc(aws)
    assert list(check_login_subnets(login_spec([net["private"]], "internal"), CATALOG, aws)) == []


# --- OpenZFS and the runner --------------------------------------------------------------------------------------------


def test_the_openzfs_offering_is_said_to_be_unchecked(aws: Clients):
    [finding] = check_home_offering(spec("slurm-p5"), CATALOG, aws)
    assert finding.code == "home-offering-unchecked" and finding.level.name == "INFO"
    assert "not checked" in finding.message


def test_preflight_runs_the_identity_checks(aws: Clients):
    found = preflight(spec("slurm-p5"), CATALOG, aws)
    assert {"principal-missing", "home-offering-unchecked"} <= {f.code for f in found}
    # moto lacks Service Quotas and capacity reservations (those checks fail there); none of the people's fails
    failed = {f.path for f in found if f.code == "check-failed"}
    assert not failed & {f"{S}.identity.directory.bindPasswordSecret", f"{S}.identity.users", f"{S}.loginNodes", f"{S}.home"}


def _own_vpc_login(net: dict[str, Any], *listed: str, **head: Any) -> Any:
    """A Slurm cluster in your own VPC with login nodes that name no subnets (they take the head node's)."""
    from tests.conftest import IDENTITY_DECLARED, identity_config

    config = identity_config(IDENTITY_DECLARED, loginNodes={"count": 1}, **({"headNode": head} if head else {}))
    subnets = [{"id": s, "availabilityZone": "us-east-1a"} for s in listed]
    config["gpucluster:network"] = {"vpcId": net["vpc"], "subnets": subnets}
    return load_spec(config, stack="own-vpc", catalog=CATALOG).spec


def test_login_nodes_defaulting_to_a_public_head_subnet_are_an_error(aws: Clients):
    """Your own VPC, its public subnet listed, no loginNodes.subnetIds: the login nodes take the head node's subnet,
    which routes to an internet gateway (before: no finding at all, the check read loginNodes.subnetIds only)."""
    net = vpc(aws)
    [finding] = check_login_subnets(_own_vpc_login(net, net["public_a"]), CATALOG, aws)
    assert (finding.code, finding.path, finding.value) == (
        "login-subnet-public",
        "gpucluster:network.subnets[0].id",
        net["public_a"],
    )
    assert finding.message == (
        f"login nodes run in the head node's subnet (no loginNodes.subnetIds), and {net['public_a']} routes 0.0.0.0/0 to "
        f"{net['igw']}: a public subnet; login nodes live in private subnets"
    )
    assert "or set loginNodes.subnetIds to private ones" in finding.fix
    assert list(check_login_subnets(_own_vpc_login(net, net["private"]), CATALOG, aws)) == []
    both = _own_vpc_login(net, net["private"], net["public_a"], subnetId=net["public_a"])  # the head node's, named
    [named] = check_login_subnets(both, CATALOG, aws)
    assert (named.code, named.path) == ("login-subnet-public", "gpucluster:network.subnets[1].id")
