"""sssd.conf without the bind password: pinned by goldens (LDAP and Active Directory), accepted by ``sssctl
config-check``; the nodes' user data carries the template, the CA and the helper's wrapper, never a password."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.load import load_spec
from gpucluster.render.core import WriteFile, render_cloud_config
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.render.slurm.sssd import DIRECTORY_CA, IDENTITY_HELPER, SSSD_TEMPLATE, sssd_conf
from tests.conftest import GOLDEN, check_golden, group, make_config, require_tool
from tests.render.identity_cases import AD, DIRECTORY, LDAP

GOLDEN_DIR = GOLDEN / "slurm" / "identity"


def sssctl_check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    conf = tmp_path / "sssd.conf"
    conf.write_text(text)
    conf.chmod(0o600)
    (tmp_path / "conf.d").mkdir(exist_ok=True)
    return subprocess.run([require_tool("sssctl"), "config-check", "-c", str(conf)], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("name", "directory"), [("sssd.conf", LDAP), ("sssd-ad.conf", AD)], ids=["ldap", "ad"])
def test_golden_and_accepted_by_sssctl(name, directory, tmp_path, update_golden):
    text = sssd_conf("c1", directory)
    check_golden(GOLDEN_DIR / name, text, update_golden)
    result = sssctl_check(tmp_path, text)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ldap_default_authtok" not in text and "obfuscated" not in text
    keys = dict(re.findall(r"^(\w+) = (.*)$", text, re.M))
    assert keys["ldap_access_filter"] == directory.access_filter and keys["access_provider"] == "ldap"
    assert keys["ldap_tls_cacert"] == DIRECTORY_CA and keys["override_homedir"] == "/home/%u"
    assert keys["ldap_id_mapping"] == ("true" if directory.schema == "ad" else "false")
    assert ("ldap_idmap_range_size" in keys) == (directory.schema == "ad")


def test_a_line_break_in_a_value_is_refused():
    with pytest.raises(ValueError, match="accessFilter holds a line break"):
        sssd_conf("c1", dataclasses.replace(LDAP, access_filter="(uid=*)\nldap_tls_reqcert = never"))


def test_compute_user_data_carries_the_template_not_the_password():
    # the boot-time install (`images.bake: false`) shows the order install → sssd.conf → slurmd in one script
    slurm = {"images": {"bake": False}}
    ctx = SlurmContext.of(load_spec(make_config(group(name="p5", maxSize=2), slurm=slurm), stack="sssd").cluster)
    ctx = dataclasses.replace(ctx, identity=DIRECTORY)
    text = render_cloud_config("compute", node_slurm_part(ctx, ctx.node_groups[0]), gzipped=True)
    files = {f["path"]: f for f in yaml.safe_load(text)["write_files"]}
    assert files[SSSD_TEMPLATE]["permissions"] == "0600" and files[DIRECTORY_CA]["permissions"] == "0644"
    assert "python3 -I /opt/gpucluster/lib/gpucluster_agents/boot/identity.py" in files[IDENTITY_HELPER]["content"]
    assert "ldap_default_authtok" not in text
    setup = files["/usr/local/sbin/gpucluster-slurm-node"]
    script = WriteFile(setup["path"], setup["content"], encoding=setup.get("encoding")).text()
    assert script.index("install-agent") < script.index(f"{IDENTITY_HELPER} sssd-conf") < script.index("enable --now slurmd")
    assert f"--secret-arn {LDAP.bind_password_secret_arn}" in script
    assert "sudoers: files" in script
