"""``gpucluster-identity`` as a node runs it (the module file as a program, from the node package) against moto's
Secrets Manager: sssd.conf written 0600 with the password only in the domain section, never in its output; a template
holding an authtok refused; the login nodes' SSH host keys made once and installed; and the result accepted by sssctl."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import boto3
import pytest

from gpucluster.render.slurm.sssd import sssd_conf
from gpucluster_agents.boot import identity as helper_module
from tests.agents.moto_env import AWS_ENV
from tests.conftest import require_tool
from tests.render.identity_cases import LDAP

PASSWORD = "s3cr3t-Bind-Pa55word!"  # a fake: never in output, errors or any file but sssd.conf
ARN_NAME = "gpucluster/ldap-bind"


@pytest.fixture
def sm(moto_endpoint, aws_env):
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", data=b"", method="POST"), timeout=10)
    return boto3.client("secretsmanager", region_name="us-east-1", endpoint_url=moto_endpoint)


@pytest.fixture
def program() -> Path:
    """The module file itself: nodes run it from the node package (``render/slurm/sssd.py``)."""
    return Path(helper_module.__file__)


def run(program: Path, moto: str, root: Path, *args: str, wait: str = "2") -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        **AWS_ENV,  # moto's credentials, no config file, no instance metadata
        "GPUCLUSTER_SM_ENDPOINT": moto,
        "GPUCLUSTER_ROOT": str(root),
        "GPUCLUSTER_IDENTITY_WAIT": wait,
    }
    return subprocess.run([sys.executable, str(program), *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def with_template(root: Path, text: str) -> None:
    path = root / "etc/gpucluster/sssd.conf.in"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)


def sssctl_check(conf: Path) -> subprocess.CompletedProcess[str]:
    (conf.parent / "conf.d").mkdir(exist_ok=True)
    return subprocess.run([require_tool("sssctl"), "config-check", "-c", str(conf)], capture_output=True, text=True, check=False)


def test_sssd_conf_gets_the_password_in_the_domain_section_only(program, sm, moto_endpoint, tmp_path):
    arn = sm.create_secret(Name=ARN_NAME, SecretString=PASSWORD)["ARN"]
    with_template(tmp_path, sssd_conf("c1", LDAP))
    args = ("sssd-conf", "--secret-arn", arn, "--region", "us-east-1")
    result = run(program, moto_endpoint, tmp_path, *args)
    assert result.returncode == 0, result.stderr
    conf = tmp_path / "etc/sssd/sssd.conf"
    st = conf.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o600, 0, 0)
    text = conf.read_text()
    lines = text.splitlines()
    at = lines.index("ldap_default_bind_dn = cn=gpucluster-ro,ou=Service,dc=example,dc=com")
    assert lines[at + 1 : at + 3] == ["ldap_default_authtok_type = password", f"ldap_default_authtok = {PASSWORD}"]
    assert text.count(PASSWORD) == 1 and max(i for i, x in enumerate(lines) if x.startswith("[")) < at  # the domain, last
    assert PASSWORD not in result.stdout + result.stderr
    check = sssctl_check(conf)
    assert check.returncode == 0, check.stdout + check.stderr
    # idempotent: the same file again, nothing else changed
    again = run(program, moto_endpoint, tmp_path, *args)
    assert again.returncode == 0 and conf.read_text() == text


def test_the_rendered_template_alone_passes_sssctl(tmp_path):
    conf = tmp_path / "sssd.conf"
    conf.write_text(sssd_conf("c1", LDAP))
    conf.chmod(0o600)
    check = sssctl_check(conf)
    assert check.returncode == 0, check.stdout + check.stderr
    conf.write_text(sssd_conf("c1", LDAP).replace("ldap_access_order", "ldap_acces_order"))  # the check can fail
    assert sssctl_check(conf).returncode != 0


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda t: t + "ldap_default_authtok = hunter2\n", "already sets ldap_default_authtok"),
        (lambda t: t.replace("ldap_default_bind_dn", "# ldap_default_bind_dn"), "no ldap_default_bind_dn"),
    ],
    ids=["authtok-in-template", "no-bind-dn"],
)
def test_a_bad_template_is_refused_without_leaking(program, sm, moto_endpoint, tmp_path, edit, fragment):
    arn = sm.create_secret(Name=ARN_NAME, SecretString=PASSWORD)["ARN"]
    with_template(tmp_path, edit(sssd_conf("c1", LDAP)))
    result = run(program, moto_endpoint, tmp_path, "sssd-conf", "--secret-arn", arn, "--region", "us-east-1")
    assert result.returncode == 1 and fragment in result.stderr, result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert not (tmp_path / "etc/sssd/sssd.conf").exists()


def test_a_password_with_a_line_break_is_refused_without_leaking(program, sm, moto_endpoint, tmp_path):
    arn = sm.create_secret(Name=ARN_NAME, SecretString=PASSWORD + "\nldap_uri = ldap://evil")["ARN"]
    with_template(tmp_path, sssd_conf("c1", LDAP))
    result = run(program, moto_endpoint, tmp_path, "sssd-conf", "--secret-arn", arn, "--region", "us-east-1")
    assert result.returncode == 1 and "line break" in result.stderr
    assert PASSWORD not in result.stdout + result.stderr and "evil" not in result.stderr


def test_an_empty_secret_is_refused(program, sm, moto_endpoint, tmp_path):
    arn = sm.create_secret(Name=ARN_NAME)["ARN"]  # no value yet
    with_template(tmp_path, sssd_conf("c1", LDAP))
    result = run(program, moto_endpoint, tmp_path, "sssd-conf", "--secret-arn", arn, "--region", "us-east-1")
    assert result.returncode == 1 and "has no value" in result.stderr


def test_ssh_host_keys_made_once_and_installed(program, sm, moto_endpoint, tmp_path):
    require_tool("ssh-keygen")
    arn = sm.create_secret(Name="gpucluster/c1/login-host-keys")["ARN"]
    login = run(program, moto_endpoint, tmp_path / "login0", "ssh-host-keys", "--secret-arn", arn, "--region", "us-east-1")
    assert login.returncode == 1 and "no SSH host keys" in login.stderr  # a login node waits, then fails: nothing made
    head = run(
        program, moto_endpoint, tmp_path / "head", "ssh-host-keys", "--secret-arn", arn, "--region", "us-east-1", "--create"
    )
    assert head.returncode == 0, head.stderr
    stored = json.loads(sm.get_secret_value(SecretId=arn)["SecretString"])
    assert sorted(stored) == sorted(f"ssh_host_{k}_key{s}" for k in ("ecdsa", "ed25519", "rsa") for s in ("", ".pub"))
    again = run(
        program, moto_endpoint, tmp_path / "head2", "ssh-host-keys", "--secret-arn", arn, "--region", "us-east-1", "--create"
    )
    assert again.returncode == 0 and "made the login" not in again.stderr
    assert json.loads(sm.get_secret_value(SecretId=arn)["SecretString"]) == stored  # made once
    for node in ("login1", "login2"):
        r = run(program, moto_endpoint, tmp_path / node, "ssh-host-keys", "--secret-arn", arn, "--region", "us-east-1")
        assert r.returncode == 0, r.stderr
        d = tmp_path / node / "etc/ssh/gpucluster"
        for name, text in stored.items():
            assert (d / name).read_text() == text
            assert stat.S_IMODE((d / name).stat().st_mode) == (0o644 if name.endswith(".pub") else 0o600)
        assert "PRIVATE KEY" not in r.stdout + r.stderr


def test_with_authtok_unit():
    template = "[sssd]\ndomains = d\n\n[domain/d]\nldap_default_bind_dn = cn=x\nldap_uri = ldaps://h\n"
    out = helper_module.with_authtok(template, "pw")
    assert out == (
        "[sssd]\ndomains = d\n\n[domain/d]\nldap_default_bind_dn = cn=x\n"
        "ldap_default_authtok_type = password\nldap_default_authtok = pw\nldap_uri = ldaps://h\n"
    )
    with pytest.raises(helper_module.IdentityError, match="no ldap_default_bind_dn"):
        helper_module.with_authtok("[sssd]\nldap_default_bind_dn = cn=x\n", "pw")  # not in a domain section
