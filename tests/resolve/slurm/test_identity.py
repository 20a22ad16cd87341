"""Resolution of the people sections: each decision of the design (private groups, members, admin flag, homes,
quotas, session grants, directory defaults, login nodes, the shared home) asserted once, on the canonical configs."""

from __future__ import annotations

import copy

import pytest

from gpucluster.config.slurm import SlurmSpec
from gpucluster.load import load_spec
from gpucluster.resolve.slurm.identity import (
    DeclaredIdentity,
    DirectoryIdentity,
    PosixGroup,
    SessionGrant,
    resolve_declared,
)
from tests.conftest import (
    IDENTITY_DECLARED,
    IDENTITY_DIRECTORY,
    TEST_ACCOUNT,
    TEST_CA_PEM,
    TEST_SSH_KEY,
    group,
    identity_config,
    make_config,
)

OWN_VPC = {
    "vpcId": "vpc-0123456789abcdef0",
    "subnets": [
        {"id": "subnet-0123456789abcdef0", "availabilityZone": "us-east-1a"},
        {"id": "subnet-0123456789abcdef1", "availabilityZone": "us-east-1b"},
    ],
}


def declared(cluster) -> DeclaredIdentity:
    source = cluster.slurm.identity.source
    assert isinstance(source, DeclaredIdentity)
    return source


def user(cluster, name):
    return next(u for u in declared(cluster).users if u.name == name)


def resolved(config, stack="people"):
    return load_spec(config, stack=stack).cluster


def test_private_group_is_named_like_the_user_with_gid_uid(identity_declared_spec):
    alice = user(identity_declared_spec, "alice")
    assert alice.gid == 10001 and "alice" not in alice.groups
    assert PosixGroup("alice", 10001, ()) in declared(identity_declared_spec).groups


def test_gid_naming_a_declared_group_makes_it_primary_and_no_private_group():
    identity = copy.deepcopy(IDENTITY_DECLARED)
    identity["users"][1]["gid"] = 5002
    cluster = resolved(identity_config(identity))
    bob = user(cluster, "bob")
    assert (bob.gid, bob.groups) == (5002, ())  # llm is primary: not listed again
    assert "bob" not in {g.name for g in declared(cluster).groups}


def test_group_members_come_from_users_groups(identity_declared_spec):
    groups = {g.name: g.members for g in declared(identity_declared_spec).groups}
    assert groups["llm"] == ("bob", "carol")
    assert groups["hpc-admins"] == ("alice",)
    assert groups["vision"] == ("alice",)


def test_admin_is_a_member_of_the_admin_group(identity_declared_spec):
    assert [u.name for u in declared(identity_declared_spec).users if u.admin] == ["alice"]
    assert identity_declared_spec.slurm.identity.admin_group == "hpc-admins"


def test_homes_are_under_slash_home(identity_declared_spec):
    assert [u.home for u in declared(identity_declared_spec).users] == ["/home/alice", "/home/bob", "/home/carol"]


def test_quota_is_the_users_else_the_homes_default(identity_declared_spec):
    assert [u.home_quota_gib for u in declared(identity_declared_spec).users] == [50, 100, 50]
    assert identity_declared_spec.slurm.home.quotas == ((10001, 50), (10002, 100), (10003, 50))


def test_no_quota_without_a_default_or_without_a_home():
    cluster = resolved(identity_config(IDENTITY_DECLARED, home={"defaultUserQuotaGib": None}))
    assert [u.home_quota_gib for u in declared(cluster).users] == [None, 100, None]
    cluster = resolved(identity_config(IDENTITY_DECLARED, home={"enabled": False}))
    assert cluster.slurm.home is None
    assert [u.home_quota_gib for u in declared(cluster).users] == [None, None, None]


def test_session_grant_is_parsed_from_the_arn(identity_declared_spec):
    assert user(identity_declared_spec, "alice").session == SessionGrant(
        f"arn:aws:iam::{TEST_ACCOUNT}:role/alice", "role", "alice", True
    )
    assert user(identity_declared_spec, "bob").session is None


def test_session_grant_names_the_principal_under_its_path_and_keeps_the_attach_choice():
    identity = copy.deepcopy(IDENTITY_DECLARED)
    arn = f"arn:aws:iam::{TEST_ACCOUNT}:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_R_0123"
    identity["users"][0].update(sessionPrincipal=arn, attachSessionPolicy=False)
    grant = user(resolved(identity_config(identity)), "alice").session
    assert grant == SessionGrant(arn, "role", "AWSReservedSSO_R_0123", False)


def test_users_and_groups_are_sorted_by_id():
    identity = copy.deepcopy(IDENTITY_DECLARED)
    identity["users"].reverse()
    identity["groups"].reverse()
    cluster = resolved(identity_config(identity))
    assert [u.uid for u in declared(cluster).users] == [10001, 10002, 10003]
    assert [g.gid for g in declared(cluster).groups] == [5000, 5001, 5002, 10001, 10002, 10003]


def test_ssh_keys_and_shell_are_carried(identity_declared_spec):
    carol = user(identity_declared_spec, "carol")
    assert (carol.ssh_public_keys, carol.shell) == ((TEST_SSH_KEY,), "/bin/bash")


def test_directory_defaults(identity_directory_spec):
    d = identity_directory_spec.slurm.identity.source
    assert isinstance(d, DirectoryIdentity)
    assert d.domain == "directory"
    assert (d.user_search_base, d.group_search_base) == ("dc=corp,dc=example,dc=com",) * 2
    assert d.id_mapping is True
    assert d.idmap_range == (200000, 2000200000, 200000)
    assert d.ca_certificate_pem == TEST_CA_PEM.strip()
    assert (d.tls_reqcert, d.start_tls, d.ssh_public_key_attribute) == ("demand", False, "sshPublicKey")


def test_directory_id_mapping_is_off_for_rfc2307bis_and_bases_are_kept():
    identity = copy.deepcopy(IDENTITY_DIRECTORY)
    identity["directory"].update(schema="rfc2307bis", userSearchBase="ou=People,dc=x", domainName="corp")
    d = resolved(identity_config(identity)).slurm.identity.source
    assert (d.id_mapping, d.user_search_base, d.group_search_base, d.domain) == (
        False,
        "ou=People,dc=x",
        "dc=corp,dc=example,dc=com",
        "corp",
    )


def test_directory_home_has_no_quotas(identity_directory_spec):
    assert identity_directory_spec.slurm.home.quotas == ()


def test_login_nodes_new_vpc(identity_declared_spec):
    login = identity_declared_spec.slurm.login
    assert login.asg_name == "people-login"
    assert (login.count, login.instance_type, login.facts.instance_type) == (2, "m7i.2xlarge", "m7i.2xlarge")
    assert (login.subnets, login.zones) == ((), (identity_declared_spec.slurm.head_zone,))
    assert (login.grace_seconds, login.srun_ports, login.root_volume_gib, login.ssh) == (600, (60001, 63000), 100, None)


def test_login_image_is_the_head_nodes_kind_unless_given(identity_declared_spec):
    login = identity_declared_spec.slurm.login
    assert (login.image.source, login.image.value) == ("ssm-parameter", identity_declared_spec.slurm.head_image_parameter)
    cluster = resolved(identity_config(IDENTITY_DECLARED, loginNodes={"imageId": "ami-0123456789abcdef0"}))
    assert (cluster.slurm.login.image.source, cluster.slurm.login.image.value) == ("ami", "ami-0123456789abcdef0")


def test_login_nodes_own_vpc_default_to_the_head_nodes_subnet():
    config = identity_config(IDENTITY_DECLARED, loginNodes={"gracePeriodMinutes": 3})
    config["gpucluster:network"] = OWN_VPC
    cluster = resolved(config)
    assert (cluster.slurm.login.subnets, cluster.slurm.login.zones) == (("subnet-0123456789abcdef0",), ("us-east-1a",))
    assert cluster.slurm.login.grace_seconds == 180
    assert (cluster.slurm.home.zone, cluster.slurm.home.subnet) == ("us-east-1a", "subnet-0123456789abcdef0")


def test_login_ssh_internet_facing_own_vpc_uses_the_public_subnets():
    ssh = {"allowedCidrs": ["203.0.113.0/24", "198.51.100.0/24"], "scheme": "internet-facing",
           "publicSubnetIds": ["subnet-0fedcba9876543210"]}  # fmt: skip
    config = identity_config(IDENTITY_DECLARED, loginNodes={"subnetIds": ["subnet-0123456789abcdef1"], "ssh": ssh})
    config["gpucluster:network"] = OWN_VPC
    s = resolved(config).slurm.login
    assert (s.subnets, s.zones) == (("subnet-0123456789abcdef1",), ("us-east-1b",))
    assert s.ssh is not None
    assert (s.ssh.allowed_cidrs, s.ssh.scheme) == (("198.51.100.0/24", "203.0.113.0/24"), "internet-facing")
    assert (s.ssh.subnets, s.ssh.zones, s.ssh.port) == (("subnet-0fedcba9876543210",), ("us-east-1b",), 22)


def test_home_defaults(identity_declared_spec):
    home = identity_declared_spec.slurm.home
    assert (home.deployment_type, home.storage_gib, home.throughput, home.backup_days) == ("SINGLE_AZ_1", 128, 64, 7)
    assert (home.zone, home.subnet, home.kms_key_id, home.default_user_quota_gib) == (
        identity_declared_spec.slurm.head_zone,
        None,
        None,
        50,
    )
    assert (home.volume_path, home.mount_point, home.mount_options) == (
        "/fsx/home",
        "/home",
        "nfsvers=4.1,nosuid,nodev,_netdev",
    )


@pytest.mark.parametrize(
    ("slurm", "protect"),
    [
        ({}, True),
        ({"protectData": False}, False),
        ({"home": {"protect": False}}, False),
        ({"protectData": False, "home": {"protect": True}}, True),
    ],
)
def test_home_protect_follows_the_slurm_protect_data_rule(slurm, protect):
    home = resolved(identity_config(IDENTITY_DECLARED, **slurm)).slurm.home
    assert home.protect is protect


def test_nothing_without_identity_or_login():
    cluster = resolved(make_config(group(), slurm={}))
    assert (cluster.slurm.identity, cluster.slurm.login, cluster.slurm.home) == (None, None, None)


def test_resolve_declared_on_its_own_gives_no_quota_without_a_home():
    spec = SlurmSpec.model_validate({"identity": IDENTITY_DECLARED})
    assert spec.identity is not None
    assert {u.home_quota_gib for u in resolve_declared(spec.identity, None).users} == {None}


def test_resolution_is_deterministic(identity_declared_spec):
    again = resolved(identity_config(IDENTITY_DECLARED, loginNodes={"count": 2, "instanceType": "m7i.2xlarge"}))
    assert again.slurm.identity == identity_declared_spec.slurm.identity
    assert again.slurm.home == identity_declared_spec.slurm.home
