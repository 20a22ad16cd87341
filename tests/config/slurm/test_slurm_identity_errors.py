"""Bad people configs (``slurm.identity``, ``slurm.loginNodes``, ``slurm.home``): one row per finding code, each run
through the real load (parse, checks, resolution) and naming its field, value, why and fix.

The issue's four are here verbatim: duplicate uids, a reserved uid (below 1000, 64030, a munge/slurm name), login
SSH without CIDRs / a subnet outside the private ones, a directory over ldaps without a CA certificate.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.config.errors import ConfigError, Finding, Level
from gpucluster.load import load_spec
from tests.conftest import (
    IDENTITY_DECLARED,
    IDENTITY_DIRECTORY,
    TEST_ACCOUNT,
    TEST_SSH_KEY,
    group,
    identity_config,
    make_config,
)

S = "gpucluster:slurm"
I = f"{S}.identity"  # noqa: E741
D = f"{I}.directory"
E, W = Level.ERROR, Level.WARNING
OWN_VPC = {
    "vpcId": "vpc-0123456789abcdef0",
    "subnets": [{"id": "subnet-0123456789abcdef0", "availabilityZone": "us-east-1a"}],
}
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----"
SSO_ROLE = f"arn:aws:iam::{TEST_ACCOUNT}:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Research_0123456789abcdef"


def users(*extra: dict[str, Any], **identity: Any) -> dict[str, Any]:
    """The declared identity with users ``extra`` appended (and identity keys replaced)."""
    out = copy.deepcopy(IDENTITY_DECLARED)
    out["users"] += [copy.deepcopy(u) for u in extra]
    out.update(identity)
    return out


def directory(**fields: Any) -> dict[str, Any]:
    """The directory identity with ``fields`` changed (``None`` removes one)."""
    out = copy.deepcopy(IDENTITY_DIRECTORY)
    for key, value in fields.items():
        if value is None:
            out["directory"].pop(key, None)
        else:
            out["directory"][key] = value
    return out


def login(ssh: dict[str, Any] | None = None, network: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    section = {**fields, **({"ssh": ssh} if ssh is not None else {})}
    config = identity_config(IDENTITY_DECLARED, loginNodes=section)
    if network is not None:
        config["gpucluster:network"] = network
    return config


def home(identity: dict[str, Any] | None = IDENTITY_DECLARED, **fields: Any) -> dict[str, Any]:
    if identity is None:
        return make_config(group(), slurm={"home": fields})
    return identity_config(identity, home=fields)


def hybrid(key: str, value: Any) -> dict[str, Any]:
    stacks = Path(__file__).resolve().parents[3] / "stacks"
    config = yaml.safe_load((stacks / "Pulumi.hybrid-slurm.yaml").read_text())["config"]
    config[S] = {**config.get(S, {}), key: copy.deepcopy(value)}
    return config


def teams_band() -> dict[str, Any]:
    config = identity_config(IDENTITY_DECLARED)
    config["gpucluster:kubernetes"] = {"teams": [{"name": "research", "posix": {"uidFirst": 10000, "uidCount": 100}}]}
    config["gpucluster:nodeGroups"].append(group(name="eks", scheduler="kubernetes"))
    return config


# (code, config, path, message fragment, fix fragment, level)
ROWS = [
    ("uid-twice", identity_config(users({"name": "dave", "uid": 10001})), f"{I}.users[3].uid",
     "users 'alice' and 'dave' both have uid 10001", "uid of its own", E),
    ("gid-twice", identity_config(users(groups=[{"name": "a", "gid": 5000}, {"name": "b", "gid": 5000}])),
     f"{I}.groups[1].gid", "both have gid 5000", "gid of its own", E),
    ("gid-twice", identity_config(users({"name": "dave", "uid": 5001})), f"{I}.users[3].uid",
     "private group would have gid 5001, which group 'vision' has", "another uid", E),
    ("name-twice", identity_config(users({"name": "vision", "uid": 10009})), f"{I}.users[3].name",
     "a declared group is named 'vision'", "rename the user or the group", E),
    ("name-twice", identity_config(users({"name": "bob", "uid": 10009})), f"{I}.users[3].name",
     "user 'bob' is declared twice", "declare each user once", E),
    ("uid-reserved", identity_config(users({"name": "dave", "uid": 999})), f"{I}.users[3].uid",
     "uid 999 is a system account's range (below 1000)", "choose from 1000–59999 or 65536", E),
    ("uid-slurm", identity_config(users({"name": "dave", "uid": 64030})), f"{I}.users[3].uid",
     "uid 64030 is the slurm account's on Ubuntu", "choose from 1000–59999", E),
    ("uid-slurm", identity_config(users({"name": "dave", "uid": 65534})), f"{I}.users[3].uid",
     "uid 65534 is nobody/nogroup", "choose from", E),
    ("uid-slurm", identity_config(users({"name": "dave", "uid": 61000})), f"{I}.users[3].uid",
     "Debian's allocated range 60000–64999", "choose from", E),
    ("uid-slurm", identity_config(users({"name": "dave", "uid": 3_000_000_000})), f"{I}.users[3].uid",
     "above 2147483647", "choose from", E),
    ("uid-reserved", identity_config(users(groups=[{"name": "hpc-admins", "gid": 27}])), f"{I}.groups[0].gid",
     "gid 27 is a system account's range", "choose from", E),
    ("name-reserved", identity_config(users({"name": "munge", "uid": 10009})), f"{I}.users[3].name",
     "'munge' is the account that holds the munge key", "choose another name", E),
    ("name-reserved", identity_config(users({"name": "slurm", "uid": 10009})), f"{I}.users[3].name",
     "'slurm' is the account slurmctld and slurmd run as", "choose another name", E),
    ("name-reserved", identity_config(users({"name": "ssm-user", "uid": 10009})), f"{I}.users[3].name",
     "'ssm-user' is Session Manager's own account", "choose another name", E),
    ("name-reserved", identity_config(users({"name": "systemd-oom", "uid": 10009})), f"{I}.users[3].name",
     "an account or group the node's image already has", "choose another name", E),
    ("name-invalid", identity_config(users({"name": "Dave", "uid": 10009})), f"{I}.users[3].name",
     "'Dave' is not a user or group name", "alice", E),
    ("group-privileged", identity_config(users({"name": "dave", "uid": 10009, "groups": ["sudo"]})),
     f"{I}.users[3].groups[0]", "group 'sudo' gives root on every node", "identity.adminGroup", E),
    ("group-unknown", identity_config(users({"name": "dave", "uid": 10009, "groups": ["ml"]})),
     f"{I}.users[3].groups[0]", "no group 'ml'", "declare it in identity.groups or use one of: hpc-admins", E),
    ("group-unknown", identity_config(users({"name": "dave", "uid": 10009, "gid": 7777})), f"{I}.users[3].gid",
     "no declared group has gid 7777", "leave gid out", E),
    ("group-unknown", identity_config(users(adminGroup="admins")), f"{I}.adminGroup", "no declared group 'admins'",
     "declare it", E),
    ("group-invalid", identity_config({**IDENTITY_DIRECTORY, "adminGroup": "hpc admins"}), f"{I}.adminGroup",
     "cannot be named in sudoers", "without spaces", E),
    ("identity-both", identity_config({**IDENTITY_DIRECTORY, "users": IDENTITY_DECLARED["users"]}), f"{D}",
     "one source of uids per cluster", "keep the directory, or the declared list", E),
    ("identity-empty", identity_config({}), I, "names no users, groups or directory", "declare users", E),
    ("ssh-key-invalid", identity_config(users({"name": "dave", "uid": 10009, "sshPublicKeys": [PRIVATE_KEY]})),
     f"{I}.users[3].sshPublicKeys[0]", "this is a PRIVATE key", "public key (.pub) line", E),
    ("ssh-key-invalid", identity_config(users({"name": "dave", "uid": 10009, "sshPublicKeys": ["ssh-dss AAAAB3Nz"]})),
     f"{I}.users[3].sshPublicKeys[0]", "key type 'ssh-dss' is not one sshd accepts", "ssh-ed25519", E),
    ("ssh-key-invalid", identity_config(users({"name": "dave", "uid": 10009,
                                               "sshPublicKeys": [TEST_SSH_KEY.replace("ed25519 ", "rsa ")]})),
     f"{I}.users[3].sshPublicKeys[0]", "the key's data is not a ssh-rsa key", ".pub file", E),
    ("ssh-key-invalid", identity_config(users({"name": "dave", "uid": 10009, "sshPublicKeys": ["not a key"]})),
     f"{I}.users[3].sshPublicKeys[0]", "key type 'not' is not one", ".pub", E),
    ("principal-invalid", identity_config(users({"name": "dave", "uid": 10009, "sessionPrincipal": "arn:aws:iam::12:role/x"})),
     f"{I}.users[3].sessionPrincipal", "is not an IAM role or user ARN of partition aws",
     "arn:aws:iam::<account>:role/<name>", E),
    ("principal-invalid", identity_config(users({"name": "dave", "uid": 10009,
                                                 "sessionPrincipal": f"arn:aws-cn:iam::{TEST_ACCOUNT}:role/dave"})),
     f"{I}.users[3].sessionPrincipal", "of partition aws (the region's)", "arn:aws:iam", E),
    ("principal-sso", identity_config(users({"name": "dave", "uid": 10009, "sessionPrincipal": SSO_ROLE})),
     f"{I}.users[3].sessionPrincipal", "IAM Identity Center manages this role", "attachSessionPolicy: false", E),
    ("principal-twice", identity_config(users({"name": "dave", "uid": 10009,
                                               "sessionPrincipal": f"arn:aws:iam::{TEST_ACCOUNT}:role/alice"})),
     f"{I}.users[3].sessionPrincipal", "users 'alice' and 'dave' have the same principal", "one user", E),
    ("ldaps-without-ca", identity_config(directory(caCertificate=None)), f"{D}.caCertificate",
     "reached over TLS but no CA certificate says whom to trust", "paste the PEM of the CA", E),
    ("ldaps-without-ca", identity_config(directory(caCertificate="")), f"{D}.caCertificate",
     "no CA certificate", "PEM", E),
    ("ldap-cleartext", identity_config(directory(uris=["ldap://ad.corp.example.com"])), f"{D}.uris[0]",
     "the bind password would cross the network in clear", "use ldaps:// or set startTls: true", E),
    ("uri-invalid", identity_config(directory(uris=["ad.corp.example.com"])), f"{D}.uris[0]",
     "is not an LDAP server URI", "ldaps://host[:port]", E),
    ("ca-invalid", identity_config(directory(caCertificate="hello")), f"{D}.caCertificate",
     "is not a PEM certificate", "-----BEGIN CERTIFICATE-----", E),
    ("ca-invalid", identity_config(directory(caCertificate="-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")),
     f"{D}.caCertificate", "this holds a PRIVATE key", "never its key", E),
    ("secret-arn-invalid", identity_config(directory(
        bindPasswordSecret=f"arn:aws:secretsmanager:eu-west-1:{TEST_ACCOUNT}:secret:bind-AbCdEf")),
     f"{D}.bindPasswordSecret", "is not a Secrets Manager secret ARN of us-east-1",
     "arn:aws:secretsmanager:us-east-1:<account>:secret:<name>", E),
    ("access-filter-missing", identity_config(directory(accessFilter=None)), f"{D}.accessFilter",
     "every account of the directory could log in", "memberOf=", E),
    ("filter-unbalanced", identity_config(directory(accessFilter="(memberOf=cn=x,dc=corp")), f"{D}.accessFilter",
     "do not balance", "close every '('", E),
    ("idmap-not-ad", identity_config(directory(schema="rfc2307bis", idMapping=True)), f"{D}.idMapping",
     "ID mapping derives ids from Active Directory SIDs", "schema: ad", E),
    ("id-range", identity_config(directory(schema="rfc2307bis", idRange=[1000, 70000])), f"{D}.idRange",
     "[1000, 70000] takes directory ids that are system accounts' or Debian's", "1000–59999 or 65536–2147483647", E),
    ("id-range", identity_config(directory(schema="rfc2307bis", idRange=[0, 59999])), f"{D}.idRange",
     "below 1000", "keep it inside one range", E),
    ("id-range", identity_config(directory(schema="rfc2307bis", idRange=[5000, 2000])), f"{D}.idRange",
     "is empty", "[min, max]", E),
    ("id-range", identity_config(directory(idRange=[1000, 59999])), f"{D}.idRange",
     "leaves out ids the AD id mapping hands out", "leave idRange out", E),
    ("directory-value-invalid", identity_config(directory(searchBase="corp")), f"{D}.searchBase",
     "'corp' is not a distinguished name", "dc=example,dc=com", E),
    ("directory-value-invalid", identity_config(directory(sshPublicKeyAttribute="ssh key")),
     f"{D}.sshPublicKeyAttribute", "is not an LDAP attribute name", "sshPublicKey", E),
    ("login-public-subnet", login(network=OWN_VPC, subnetIds=["subnet-0fedcba9876543210"]), f"{S}.loginNodes.subnetIds[0]",
     "login nodes live in private subnets; the load balancer is what faces clients",
     "use a private subnet of network.subnets; expose SSH with loginNodes.ssh", E),
    ("login-public-subnet", login(subnetIds=["subnet-0fedcba9876543210"]), f"{S}.loginNodes.subnetIds[0]",
     "new VPC's private subnets", "remove loginNodes.subnetIds", E),
    ("login-ssh-no-cidrs", login(ssh={}), f"{S}.loginNodes.ssh.allowedCidrs",
     "open to no one (internal) or to the whole internet (internet-facing)", "list the client networks", E),
    ("login-ssh-no-cidrs", login(ssh={"scheme": "internet-facing"}), f"{S}.loginNodes.ssh.allowedCidrs",
     "no client network is listed", "203.0.113.0/24", E),
    ("login-ssh-anywhere", login(ssh={"allowedCidrs": ["10.0.0.0/8", "0.0.0.0/0"]}),
     f"{S}.loginNodes.ssh.allowedCidrs[1]", "0.0.0.0/0 is the whole internet", "name your networks", E),
    ("login-ssh-anywhere", login(ssh={"allowedCidrs": ["::/0"]}), f"{S}.loginNodes.ssh.allowedCidrs[0]",
     "::/0 is the whole internet", "name your networks", E),
    ("login-ssh-cidr-invalid", login(ssh={"allowedCidrs": ["10.0.0.1/16"]}), f"{S}.loginNodes.ssh.allowedCidrs[0]",
     "is not a network in CIDR notation", "203.0.113.0/24", E),
    ("login-ssh-public-subnets", login(ssh={"allowedCidrs": ["203.0.113.0/24"], "scheme": "internet-facing"},
                                       network=OWN_VPC),
     f"{S}.loginNodes.ssh.publicSubnetIds", "needs its public subnets", "a public subnet per login node zone", E),
    ("login-ssh-public-subnets", login(ssh={"allowedCidrs": ["10.0.0.0/8"], "publicSubnetIds": ["subnet-0fedcba9876543210"]}),
     f"{S}.loginNodes.ssh.publicSubnetIds", "only used by an internet-facing load balancer in your own VPC",
     "remove publicSubnetIds", E),
    ("login-ssh-public-subnets", login(ssh={"allowedCidrs": ["203.0.113.0/24"], "scheme": "internet-facing",
                                            "publicSubnetIds": ["subnet-0123456789abcdef0"]}, network=OWN_VPC),
     f"{S}.loginNodes.ssh.publicSubnetIds[0]", "the cluster's private subnets", "name a public subnet", E),
    ("login-without-identity", make_config(group(), slurm={"loginNodes": {}}), f"{S}.loginNodes",
     "nobody could log in but administrators through IAM", "add slurm.identity", E),
    ("unknown-instance-type", login(instanceType="m7i.2xlarg"), f"{S}.loginNodes.instanceType",
     "'m7i.2xlarg' is not in the instance catalog", "did you mean m7i.2xlarge", E),
    ("login-accelerated", login(instanceType="g6e.xlarge"), f"{S}.loginNodes.instanceType",
     "g6e.xlarge has 1 ", "use a CPU type such as m7i.2xlarge", W),
    ("slurm-custom-image", login(imageId="ami-0123456789abcdef0"), f"{S}.loginNodes.imageId",
     "cannot tell which Slurm the custom image ami-0123456789abcdef0 installs", "leave imageId unset", W),
    ("identity-hybrid", hybrid("identity", IDENTITY_DECLARED), f"{S}.identity",
     "the site's slurmctld is the controller: its users, logins and homes are the site's", "hybrid.enableNssSlurm", E),
    ("login-hybrid", hybrid("loginNodes", {}), f"{S}.loginNodes", "users, logins and homes are the site's",
     "remove it", E),
    ("home-hybrid", hybrid("home", {}), f"{S}.home", "users, logins and homes are the site's", "remove it", E),
    ("home-throughput", home(throughputCapacity=100), f"{S}.home.throughputCapacity",
     "100 MB/s is not a throughput of SINGLE_AZ_1", "64, 128, 256", E),
    ("home-throughput", home(deploymentType="SINGLE_AZ_2", throughputCapacity=64), f"{S}.home.throughputCapacity",
     "64 MB/s is not a throughput of SINGLE_AZ_2", "160, 320", E),
    ("quota-over-capacity", home(defaultUserQuotaGib=500), f"{S}.home.defaultUserQuotaGib",
     "a quota of 500 GiB is more than /home's 128 GiB", "raise home.storageCapacityGib", W),
    ("quota-over-capacity", identity_config(users({"name": "dave", "uid": 10009, "homeQuotaGib": 1000})),
     f"{S}.identity.users[3].homeQuotaGib", "1000 GiB", "lower the quota", W),
    ("quota-directory", home(IDENTITY_DIRECTORY, defaultUserQuotaGib=20), f"{S}.home.defaultUserQuotaGib",
     "a directory's uids are not known at deploy", "leave it out, or declare the users", W),
    ("home-without-identity", home(None), f"{S}.home", "no shared /home is made without users", "add slurm.identity", W),
    ("uid-in-team-band", teams_band(), f"{I}.users[0].uid", "in team 'research''s pod uid range 10000–10099",
     "outside kubernetes.teams' ranges", W),
]  # fmt: skip


def findings_of(config: dict[str, Any]) -> list[Finding]:
    """Every finding of the real load: a ConfigError's, else the loaded cluster's warnings."""
    try:
        return list(load_spec(config, stack="people").findings)
    except ConfigError as exc:
        assert "Traceback" not in str(exc)
        return list(exc.findings)


@pytest.mark.parametrize(
    ("code", "config", "path", "message", "fix", "level"), ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)]
)
def test_bad_people_config(code, config, path, message, fix, level):
    found = findings_of(config)
    match = [f for f in found if f.code == code and f.path == path]
    assert match, f"no {code} at {path}; got {[(f.code, f.path, f.message) for f in found]}"
    f = match[0]
    assert f.level is level
    assert message in f.message, f.message
    assert fix in f.fix, f.fix
    if level is E:
        with pytest.raises(ConfigError) as exc:
            load_spec(config, stack="people")
        assert path in str(exc.value)


def test_every_code_of_the_design_has_a_row():
    design = {
        "uid-twice", "gid-twice", "name-twice", "uid-reserved", "uid-slurm", "name-reserved", "group-privileged",
        "group-unknown", "identity-both", "identity-empty", "ssh-key-invalid", "principal-invalid", "principal-sso",
        "principal-twice", "ldaps-without-ca", "ldap-cleartext", "ca-invalid", "secret-arn-invalid",
        "access-filter-missing", "filter-unbalanced", "idmap-not-ad", "id-range", "login-public-subnet", "login-ssh-no-cidrs",
        "login-ssh-anywhere", "login-ssh-public-subnets", "login-without-identity", "login-hybrid", "identity-hybrid",
        "home-hybrid", "home-throughput", "quota-over-capacity", "quota-directory", "uid-in-team-band",
    }  # fmt: skip
    assert design <= {r[0] for r in ROWS}


def test_the_issue_four_are_reported_at_once():
    """Duplicate uids, a reserved uid and a reserved name, SSH without CIDRs: one ConfigError names them all."""
    config = identity_config(
        users({"name": "dave", "uid": 10001}, {"name": "munge", "uid": 999}),
        loginNodes={"ssh": {"scheme": "internet-facing"}},
    )
    with pytest.raises(ConfigError) as exc:
        load_spec(config, stack="people")
    codes = {(f.code, f.path) for f in exc.value.findings}
    assert {
        ("uid-twice", f"{I}.users[3].uid"),
        ("uid-reserved", f"{I}.users[4].uid"),
        ("name-reserved", f"{I}.users[4].name"),
        ("login-ssh-no-cidrs", f"{S}.loginNodes.ssh.allowedCidrs"),
    } <= codes


def test_ldaps_without_ca_is_our_message_not_a_missing_field():
    with pytest.raises(ConfigError) as exc:
        load_spec(identity_config(directory(caCertificate=None)), stack="people")
    assert [f.code for f in exc.value.findings if f.level is Level.ERROR] == ["ldaps-without-ca"]
    assert "required" not in str(exc.value)


def test_a_private_key_is_never_echoed():
    secret = "-----BEGIN OPENSSH PRIVATE KEY-----b3BlbnNzaC1rZXktdjEAAAAABG5vbmUA"
    with pytest.raises(ConfigError) as exc:
        load_spec(identity_config(users({"name": "dave", "uid": 10009, "sshPublicKeys": [secret]})), stack="people")
    assert "b3BlbnNzaC1rZXkt" not in str(exc.value)


def test_canonical_configs_load_without_findings(identity_declared_spec, identity_directory_spec):
    ssh = {"count": 1, "ssh": {"allowedCidrs": ["203.0.113.0/24"]}}  # carol's SSH key opens the login nodes
    for config in (identity_config(IDENTITY_DECLARED, loginNodes=ssh), identity_config(IDENTITY_DIRECTORY)):
        config["gpucluster:monitoring"] = {"alarmEmails": ["oncall@example.com"]}  # somebody receives the alerts
        assert load_spec(config, stack="people").findings == ()


def test_l2_the_directory_id_range_defaults_to_the_declared_low_range_or_the_id_mapping():
    """SSSD's min_id/max_id come from here: without idMapping the declared users' 1000–59999 (no system account,
    no Debian-allocated id such as slurm's 64030), with it the mapped range, and a valid idRange as given."""

    def id_range(**fields: Any) -> tuple[int, int]:
        source = load_spec(identity_config(directory(**fields)), stack="people").cluster.slurm.identity.source  # type: ignore[union-attr]
        return source.id_range  # type: ignore[union-attr]

    assert id_range(schema="rfc2307bis") == (1000, 59999)
    assert id_range() == (200000, 2000199999)  # the directory() default: Active Directory, ids mapped from SIDs
    assert id_range(schema="rfc2307bis", idRange=[100000, 2000000000]) == (100000, 2000000000)
