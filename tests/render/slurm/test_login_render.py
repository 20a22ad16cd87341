"""A login node's user data: pinned by goldens (declared users with /home; a directory with SSH), accepted by
cloud-init's schema and bash, under EC2's 16 KB gzipped with a CA of real size, the guard and the lockdown first, the
drain contract's config exact, and no secret in it."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
import yaml

from gpucluster.load import load_spec
from gpucluster.render.core import USER_DATA_LIMIT, WriteFile, cloud_config_text, render_cloud_config, user_data_size
from gpucluster.render.slurm.guard import imds_guard_bootcmd
from gpucluster.render.slurm.home import HomeMount
from gpucluster.render.slurm.identity import USERS_PROGRAM, session_lockdown_bootcmd, session_lockdown_runcmd
from gpucluster.render.slurm.login import (
    DRAIN_CONFIG,
    LOGIN_SETUP,
    ODDJOB_CONFIG,
    ODDJOB_CONFIG_IN,
    LoginInputs,
    login_cloud_config,
    login_title,
)
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.slurm.identity import DeclaredIdentity, PosixGroup, PosixUser, ResolvedIdentity
from gpucluster_agents import contract
from tests.conftest import GOLDEN, check_golden, group, make_config, require_tool
from tests.render.identity_cases import AD, BIND_SECRET, DECLARED, DIRECTORY_AD

GOLDEN_DIR = GOLDEN / "slurm" / "identity"
HOME = HomeMount("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com")
HOST_KEYS = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpucluster/c1/login-host-keys-AbCdEf"
# A CA certificate's PEM is about 1.9 KB (2048-bit RSA): base64 that gzip barely shrinks. Same length here.
BIG_CA = (
    "-----BEGIN CERTIFICATE-----\n"
    + "\n".join(["QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2"] * 28)
    + "\n-----END CERTIFICATE-----\n"
)


def context(identity: ResolvedIdentity) -> SlurmContext:
    ctx = SlurmContext.of(load_spec(make_config(group(name="p5", maxSize=2), slurm={}), stack="c1").cluster)
    return dataclasses.replace(ctx, identity=identity, srun_ports=(60001, 63000))


def inputs(**changes) -> LoginInputs:
    base = LoginInputs("us-east-1", "c1-login", "c1-login-grace", 600, home=HOME)
    return dataclasses.replace(base, **changes)


CASES = {
    "login-declared": (DECLARED, inputs()),
    "login-ad-ssh": (DIRECTORY_AD, inputs(host_key_secret_arn=HOST_KEYS)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_cloud_init_schema_and_shells(name, tmp_path, update_golden):
    identity, given = CASES[name]
    ctx = context(identity)
    text = render_cloud_config(login_title(ctx), login_cloud_config(ctx, given), gzipped=True)
    check_golden(GOLDEN_DIR / f"{name}.yaml", text, update_golden)
    path = tmp_path / "user-data.yaml"
    path.write_text(text)
    result = subprocess.run([require_tool("cloud-init"), "schema", "-c", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    doc = yaml.safe_load(text)
    assert doc["bootcmd"][:2] == [list(imds_guard_bootcmd()), list(session_lockdown_bootcmd())]
    assert doc["runcmd"] == [list(session_lockdown_runcmd()), [LOGIN_SETUP]]
    assert not [
        f["path"] for f in doc["write_files"] if f["path"].startswith("/etc/sudoers.d/") and "60-gpucluster" not in f["path"]
    ]
    for entry in doc["write_files"]:
        content = WriteFile(entry["path"], entry["content"], encoding=entry.get("encoding")).text()
        if content.startswith("#!/bin/bash") or content.startswith("#!/bin/sh"):
            script = tmp_path / "script"
            script.write_text(content)
            assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, entry["path"]
    assert "ldap_default_authtok" not in text and "PRIVATE KEY" not in text


def test_setup_order_home_before_users_and_sackd():
    ctx = context(DECLARED)
    setup = next(f for f in login_cloud_config(ctx, inputs()).write_files if f.path == LOGIN_SETUP).text()
    steps = ("munge-key", "install-agent", "gpucluster-mount-home", "gpucluster-users.service", "gpucluster-sackd.service")
    order = [setup.index(s) for s in steps]
    assert order == sorted(order)  # the package (the users program and its contract) before the users
    files = {f.path: f.text() for f in login_cloud_config(ctx, inputs()).write_files}
    assert files["/etc/systemd/system/gpucluster-users.service"].count(f"ExecStart=/bin/bash {USERS_PROGRAM} --homes") == 1
    assert "--conf-server slurmctld.c1.gpucluster.internal:6817" in files["/etc/systemd/system/gpucluster-sackd.service"]


def test_directory_with_ssh_installs_host_keys_and_sssd():
    ctx = context(DIRECTORY_AD)
    files = {f.path: f.text() for f in login_cloud_config(ctx, inputs(host_key_secret_arn=HOST_KEYS)).write_files}
    setup = files[LOGIN_SETUP]
    assert f"ssh-host-keys --secret-arn {HOST_KEYS}" in setup and "--create" not in setup
    assert f"sssd-conf --secret-arn {BIND_SECRET}" in setup
    assert "HostKey /etc/ssh/gpucluster/ssh_host_ed25519_key" in files["/etc/ssh/sshd_config.d/60-gpucluster.conf"]
    assert "session    optional     pam_oddjob_mkhomedir.so" in files["/etc/pam.d/sshd"].splitlines()
    assert "HOME_MODE 0700" in setup


def test_a_directory_login_node_lets_people_make_their_own_home(update_golden):
    """oddjobd's mkhomedir service as the node runs it: the package allows ``mkmyhomedir`` (a Session Manager
    session's own call: no PAM there) to nobody; ours allows it from uid 1000, umask 0077 for both methods. The
    e2e test (tests/e2e/test_mkhomedir_e2e.py) runs the real oddjobd with this file."""
    import xml.etree.ElementTree as ET

    files = {f.path: f.text() for f in login_cloud_config(context(DIRECTORY_AD), inputs()).write_files}
    text = files[ODDJOB_CONFIG_IN]
    check_golden(GOLDEN_DIR / "oddjobd-mkhomedir.conf", text, update_golden)
    methods = {m.get("name"): m for m in ET.fromstring(text).iter("method")}
    assert [a.attrib for a in methods["mkmyhomedir"].iter("allow")] == [{"min_uid": "1000"}]
    assert [a.attrib for a in methods["mkhomedirfor"].iter("allow")] == [{"user": "root"}]
    assert all(m.find("helper").get("exec") == "/usr/libexec/oddjob/mkhomedir -u 0077" for m in methods.values())
    assert f"install -m 0644 -o root -g root {ODDJOB_CONFIG_IN} {ODDJOB_CONFIG}" in files[LOGIN_SETUP]
    declared = {f.path for f in login_cloud_config(context(DECLARED), inputs()).write_files}
    assert ODDJOB_CONFIG_IN not in declared  # declared users' homes are made by the users program


def test_sackd_makes_its_runtime_directory():
    """sackd creates /run/slurm/conf but not /run/slurm: without RuntimeDirectory it stops at once."""
    files = {f.path: f.text() for f in login_cloud_config(context(DECLARED), inputs()).write_files}
    unit = files["/etc/systemd/system/gpucluster-sackd.service"]
    assert "RuntimeDirectory=slurm" in unit.splitlines()


def test_drain_config_is_the_contract():
    ctx = context(DECLARED)
    files = {f.path: f.text() for f in login_cloud_config(ctx, inputs()).write_files}
    assert json.loads(files[DRAIN_CONFIG]) == {
        "region": "us-east-1",
        "asg_name": "c1-login",
        "hook_name": "c1-login-grace",
        "grace_seconds": 600,
        "poll_seconds": 5,
    }
    assert "/usr/local/sbin/gpucluster-login-drain" not in files  # the package's: tests/render/slurm/test_login_drain_shipped.py


def test_fits_ec2_user_data_with_a_real_sized_ca():
    """Declared users do not grow the document (they are the users file every node fetches, and the users program is
    in the node package): 3 users or 500 give the same bytes, about 11.4 KB gzipped. A directory's does not grow with
    its users either: 2 KB kept for a second CA certificate (a chain)."""
    big = dataclasses.replace(DIRECTORY_AD, source=dataclasses.replace(AD, ca_certificate_pem=BIG_CA))
    many = dataclasses.replace(DECLARED, source=many_users(500))
    sizes = {}
    for name, identity, given in (
        ("declared", DECLARED, inputs()),
        ("500 users", many, inputs()),
        ("directory", big, inputs(host_key_secret_arn=HOST_KEYS)),
    ):
        ctx = context(identity)
        text = cloud_config_text(login_title(ctx), login_cloud_config(ctx, given))
        sizes[name] = (text, user_data_size(text, gzipped=True))
    assert sizes["declared"][0] == sizes["500 users"][0]
    assert sizes["declared"][1] < 11_520, sizes["declared"][1]  # 12,256 bytes when the users program was inline
    assert sizes["directory"][1] < USER_DATA_LIMIT - 2048, sizes["directory"][1]


def many_users(count: int) -> DeclaredIdentity:
    """``count`` declared users (uids from 20000), each with a private group and a key: a lab-sized list."""
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ0000000000000000000000000000000000000000000"
    users = tuple(
        PosixUser(
            f"u{i:04d}",
            20000 + i,
            20000 + i,
            (),
            "/bin/bash",
            f"/home/u{i:04d}",
            (f"{key} u{i}",),
            False,
            None,
            None,
        )
        for i in range(count)
    )
    return DeclaredIdentity(users, tuple(PosixGroup(u.name, u.uid, ()) for u in users))


def test_login_nodes_need_an_identity():
    ctx = dataclasses.replace(context(DECLARED), identity=None)
    with pytest.raises(ValueError, match=r"need slurm\.identity"):
        login_cloud_config(ctx, inputs())


def test_role_tag():
    assert contract.TAG_ROLE == "gpucluster:role" and contract.ROLES == ("head", "login", "compute")


def test_head_makes_the_login_host_keys_once_with_ssh():
    from gpucluster.render.slurm.agent import AgentBundle, LaunchTarget, agent_config
    from gpucluster.render.slurm.head import HeadInputs, head_files

    ctx = context(DECLARED)
    targets = {g.name: LaunchTarget("lt-0123456789abcdef0", ("subnet-0",)) for g in ctx.node_groups}
    base = HeadInputs("vol-0", AgentBundle("b", "k", "0" * 64), agent_config(ctx, targets))
    for given, expect in ((base, False), (dataclasses.replace(base, login_host_key_secret_arn=HOST_KEYS), True)):
        files = {f.path: f.text() for f in head_files(ctx, given)}
        setup = files["/usr/local/sbin/gpucluster-slurm-head"]
        command = f"gpucluster-identity ssh-host-keys --create --secret-arn {HOST_KEYS}"
        assert (command in setup) == expect
        assert ("/usr/local/sbin/gpucluster-identity" in files) == expect
        if expect:
            assert setup.index("install-agent") < setup.index(command)  # the helper comes with the package
