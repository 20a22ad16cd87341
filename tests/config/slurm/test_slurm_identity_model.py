"""The people models (``slurm.identity``, ``slurm.loginNodes``, ``slurm.home``): defaults, camelCase keys, strict
scalars, the canonical configs loading, and any identity either loading and resolving or failing with a ConfigError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.config.errors import ConfigError
from gpucluster.config.slurm import SlurmSpec
from gpucluster.config.slurm.home import HomeSpec
from gpucluster.config.slurm.identity import DirectoryServiceSpec, PosixUserSpec, parse_principal
from gpucluster.config.slurm.login import LoginNodesSpec
from gpucluster.load import load_spec
from tests.conftest import IDENTITY_DECLARED, IDENTITY_DIRECTORY, TEST_SSH_KEY, group, identity_config, make_config

I = "gpucluster:slurm.identity"  # noqa: E741


def test_sections_default_to_none():
    slurm = SlurmSpec()
    assert (slurm.identity, slurm.login_nodes, slurm.home) == (None, None, None)


def test_login_and_home_defaults():
    login = LoginNodesSpec()
    assert (login.count, login.instance_type, login.subnet_ids, login.image_id) == (1, "m7i.2xlarge", (), None)
    assert (login.root_volume_size_gib, login.grace_period_minutes, login.ssh) == (100, 10, None)
    home = HomeSpec()
    assert (home.enabled, home.deployment_type, home.storage_capacity_gib, home.throughput_capacity) == (
        True,
        "SINGLE_AZ_1",
        128,
        64,
    )
    assert (home.default_user_quota_gib, home.automatic_backup_retention_days, home.kms_key_id, home.protect) == (
        50,
        7,
        None,
        None,
    )


def test_user_defaults_and_camel_case_keys():
    user = PosixUserSpec.model_validate(
        {"name": "carol", "uid": 10003, "sshPublicKeys": [TEST_SSH_KEY], "attachSessionPolicy": False, "homeQuotaGib": 5}
    )
    assert (user.gid, user.groups, user.session_principal, user.shell) == (None, (), None, "/bin/bash")
    assert (user.ssh_public_keys, user.attach_session_policy, user.home_quota_gib) == ((TEST_SSH_KEY,), False, 5)


def test_directory_defaults_and_schema_key():
    d = DirectoryServiceSpec.model_validate(IDENTITY_DIRECTORY["directory"])
    assert d.schema_ == "ad"
    assert (d.tls_reqcert, d.start_tls, d.id_mapping, d.domain_name) == ("demand", False, None, None)
    assert (d.user_search_base, d.group_search_base) == (None, None)


@pytest.mark.parametrize("bad", [True, 10.5, "ten"])
def test_a_uid_must_be_a_whole_number(bad):
    config = identity_config({"users": [{"name": "dave", "uid": bad}]})
    with pytest.raises(ConfigError) as exc:
        load_spec(config, stack="people")
    assert f"{I}.users[0].uid" in [f.path for f in exc.value.findings]


@pytest.mark.parametrize(("key", "bad"), [("attachSessionPolicy", 1), ("attachSessionPolicy", "yes"), ("homeQuotaGib", True)])
def test_switches_and_quotas_are_strict(key, bad):
    config = identity_config({"users": [{"name": "dave", "uid": 10009, key: bad}]})
    with pytest.raises(ConfigError) as exc:
        load_spec(config, stack="people")
    assert f"{I}.users[0].{key}" in [f.path for f in exc.value.findings]


def test_unknown_key_is_refused_with_its_path():
    config = identity_config({**IDENTITY_DECLARED, "admins": "x"})
    with pytest.raises(ConfigError) as exc:
        load_spec(config, stack="people")
    assert f"{I}.admins" in [f.path for f in exc.value.findings]


def test_canonical_declared_and_directory_identities_load(identity_declared_spec, identity_directory_spec):
    assert identity_declared_spec.slurm.identity is not None
    assert identity_directory_spec.slurm.identity is not None
    assert identity_declared_spec.slurm.login.count == 2
    assert identity_directory_spec.slurm.login.ssh.allowed_cidrs == ("10.20.0.0/16",)


@pytest.mark.parametrize(
    ("arn", "parts"),
    [
        ("arn:aws:iam::123456789012:role/alice", ("aws", "123456789012", "role", "/", "alice")),
        ("arn:aws-us-gov:iam::123456789012:user/a/b/bob", ("aws-us-gov", "123456789012", "user", "/a/b/", "bob")),
        ("arn:aws:iam::123456789012:group/x", None),
        ("arn:aws:sts::123456789012:assumed-role/alice/s", None),
        ("arn:aws:iam::123456789012:role/", None),
    ],
)
def test_parse_principal(arn, parts):
    assert (tuple(parse_principal(arn)) if parse_principal(arn) else None) == parts


NAMES = st.sampled_from(["alice", "bob", "root", "munge", "Dave", "ml", "hpc-admins", "x" * 40, ""])
IDS = st.one_of(st.integers(-5, 70000), st.sampled_from([64030, 65534, 2**31, 2**32]), st.booleans(), st.just("7"))
USERS = st.fixed_dictionaries(
    {"name": NAMES, "uid": IDS},
    optional={
        "gid": IDS,
        "groups": st.lists(NAMES, max_size=2),
        "sshPublicKeys": st.lists(st.sampled_from([TEST_SSH_KEY, "ssh-rsa AAAA", "x"]), max_size=1),
        "sessionPrincipal": st.sampled_from(["arn:aws:iam::123456789012:role/a", "arn:aws:iam::1:role/a", "r"]),
        "homeQuotaGib": st.one_of(st.integers(-1, 1000), st.none()),
        "shell": st.sampled_from(["/bin/bash", "/bin/csh"]),
    },
)
IDENTITIES = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "users": st.lists(USERS, max_size=3),
            "groups": st.lists(st.fixed_dictionaries({"name": NAMES, "gid": IDS}), max_size=2),
            "adminGroup": NAMES,
        },
    ),
    st.fixed_dictionaries(
        {"directory": st.fixed_dictionaries({k: st.just(v) for k, v in IDENTITY_DIRECTORY["directory"].items()})},
        optional={"adminGroup": NAMES, "users": st.lists(USERS, max_size=1)},
    ),
    st.just(None),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(identity=IDENTITIES, login=st.one_of(st.none(), st.just({}), st.just({"ssh": {"allowedCidrs": ["10.0.0.0/8"]}})))
def test_any_identity_loads_and_resolves_or_fails_with_config_error(identity: Any, login: Any):
    slurm: dict[str, Any] = {}
    if identity is not None:
        slurm["identity"] = identity
    if login is not None:
        slurm["loginNodes"] = login
    config = make_config(group(), slurm=slurm)
    try:
        result = load_spec(config, stack="people")
    except ConfigError as exc:
        assert exc.findings and all(f.path and f.message for f in exc.findings)
        return
    resolved = result.cluster.slurm
    assert resolved is not None
    assert (resolved.identity is None) == (identity is None)
    assert (resolved.login is None) == (login is None)


def test_a_trailing_newline_never_passes_a_pattern():
    """The load refuses control characters anywhere; the checks do not lean on it (a ``$`` would match before one)."""
    from gpucluster.config.checks.slurm.identity import key_problem, name_problem

    assert name_problem("alice\n") is not None
    assert key_problem(TEST_SSH_KEY + "\nssh-rsa AAAA") is not None
    assert parse_principal("arn:aws:iam::123456789012:role/alice\n") is None
