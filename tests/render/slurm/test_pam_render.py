"""sshd on Slurm nodes: the compute PAM stack (pam_slurm_adopt last, options exact, no pam_systemd), the login stack, the
sshd drop-in (checked by ``sshd -t``), and the real PAM library loading the compute stack (``pamtester``) in a private
mount namespace. Admission while a job runs is the e2e tests' (tests/e2e, with slurmd)."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.load import load_spec
from gpucluster.render.core import WriteFile, render_cloud_config
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.conf import slurm_conf
from gpucluster.render.slurm.image import node_packages
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.render.slurm.pam import (
    ADMIN_ACCESS_FILE,
    COMPUTE_PAM_TEMPLATE,
    HEAD_ACCESS_FILE,
    HEAD_PAM,
    SSHD_DROP_IN,
    admin_access,
    compute_pam_sshd,
    head_ssh_files,
    login_pam_sshd,
    sshd_drop_in,
)
from gpucluster.resolve.slurm.identity import ResolvedIdentity
from tests.conftest import GOLDEN, IN_CI, check_golden, group, make_config, require_tool
from tests.render.identity_cases import DECLARED, DECLARED_NO_ADMIN, DIRECTORY

pytestmark = pytest.mark.slow  # runs slurmctld on the rendered files

GOLDEN_DIR = GOLDEN / "slurm" / "identity"
MODULE_DIRS = (Path("/lib/x86_64-linux-gnu/security"), Path("/lib/security"), Path("/usr/lib/x86_64-linux-gnu/security"))


def context(identity: ResolvedIdentity | None) -> SlurmContext:
    ctx = SlurmContext.of(load_spec(make_config(group(name="p5", maxSize=2), slurm={}), stack="pam").cluster)
    return dataclasses.replace(ctx, identity=identity)


def account_lines(stack: str) -> list[str]:
    return [line for line in stack.splitlines() if re.match(r"^-?account\b", line) or line == "@include common-account"]


@pytest.mark.parametrize(
    ("name", "identity"), [("pam-sshd-compute", DECLARED), ("pam-sshd-compute-directory", DIRECTORY)], ids=["declared", "dir"]
)
def test_compute_stack_golden_and_shape(name, identity, update_golden):
    stack = compute_pam_sshd("c1", identity)
    check_golden(GOLDEN_DIR / name, stack, update_golden)
    account = account_lines(stack)
    assert account[-1] == (
        "account    required     pam_slurm_adopt.so action_no_jobs=deny action_unknown=newest "
        "action_adopt_failure=deny action_generic_failure=deny nodename=@NODENAME@"
    )
    assert account[-2] == f"account    sufficient   pam_access.so accessfile={ADMIN_ACCESS_FILE}"
    rules = "\n".join(line for line in stack.splitlines() if not line.startswith("#"))
    assert "pam_systemd" not in rules and "common-session" not in rules  # Ubuntu's common-session holds pam_systemd
    assert not any(line.startswith("-") for line in stack.splitlines())  # a missing module fails closed
    assert ("pam_sss.so" in stack) == (identity is DIRECTORY)


def test_compute_stack_without_admins_has_no_access_rule():
    stack = compute_pam_sshd("c1", DECLARED_NO_ADMIN)
    assert "pam_access" not in stack
    assert account_lines(stack)[-1].startswith("account    required     pam_slurm_adopt.so ")


def test_admin_access_file_golden(update_golden):
    text = admin_access("hpc-admins")
    check_golden(GOLDEN_DIR / "access-gpucluster-admins.conf", text, update_golden)
    assert text.splitlines()[1:] == ["+:(hpc-admins):ALL", "-:ALL:ALL"]


def test_login_stack_golden(update_golden):
    stack = login_pam_sshd("c1", DIRECTORY)
    check_golden(GOLDEN_DIR / "pam-sshd-login-directory", stack, update_golden)
    assert "session    optional     pam_oddjob_mkhomedir.so" in stack.splitlines()
    assert "@include common-session" in stack  # Ubuntu's own: pam_systemd on login nodes is fine
    assert "pam_oddjob_mkhomedir" not in login_pam_sshd("c1", DECLARED)  # declared homes come from the users program


def modules(stack: str) -> set[str]:
    return {m for m in re.findall(r"\b(pam_\w+\.so)\b", stack)}


@pytest.mark.parametrize("identity", [DECLARED, DIRECTORY], ids=["declared", "dir"])
def test_every_module_of_the_stacks_exists(identity):
    """Each module the stacks name is one the packages install (here: libpam-modules, libpam-sss,
    libpam-slurm-adopt, oddjob-mkhomedir); pam_selinux is module_unknown=ignore on Ubuntu."""
    require_tool("pamtester")
    names = modules(compute_pam_sshd("c1", identity)) | modules(login_pam_sshd("c1", identity))
    missing = sorted(n for n in names - {"pam_selinux.so"} if not any((d / n).exists() for d in MODULE_DIRS))
    assert missing == [], "not installed: " + ", ".join(missing)


def pamtester(tmp_path: Path, stack: str, user: str, binds: dict[str, Path] | None = None) -> subprocess.CompletedProcess[str]:
    """``pamtester sshd <user> acct_mgmt`` with ``stack`` as sshd's PAM file: a copy of /etc/pam.d bind-mounted over
    it in a private mount namespace (the host's PAM configuration is not touched); ``binds``: more fixture files or
    directories mounted over their paths there (``/etc/passwd``, ``/etc/security`` …)."""
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("needs root (a private mount namespace); CI runs as root")
    tool, unshare = require_tool("pamtester"), require_tool("unshare")
    pam_d = tmp_path / "pam.d"
    tmp_path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "/etc/pam.d", str(pam_d)], check=True)
    (pam_d / "sshd").write_text(stack)
    mounts = "".join(f"mount --bind {shlex.quote(str(src))} {shlex.quote(dst)} && " for dst, src in (binds or {}).items())
    script = f'{mounts}mount --bind "$1" /etc/pam.d && exec {tool} -v sshd {user} acct_mgmt'
    return subprocess.run(
        [unshare, "--mount", "--propagation", "private", "sh", "-c", script, "pam-check", str(pam_d)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_the_real_pam_library_runs_the_compute_stack(tmp_path):
    """The rendered stack through the real libpam (the access file moved to a temporary path): ``nobody``, with no job
    here and no slurmd to ask, is refused by pam_slurm_adopt itself (its own message: the module loaded and decided);
    a member of the admin group (here the group ``root``, of which root is a member) is admitted by pam_access before
    pam_slurm_adopt is asked; root without the admin rule is admitted (pam_slurm_adopt ignores root); the same stack naming a module that is not installed admits no one (fails closed)."""
    require_tool("pamtester")
    access = tmp_path / "access.conf"
    access.write_text(admin_access("root"))
    identity = dataclasses.replace(DECLARED, admin_group="root")
    stack = compute_pam_sshd("c1", identity).replace("@NODENAME@", "p5-1").replace(ADMIN_ACCESS_FILE, str(access))
    nobody = pamtester(tmp_path / "nobody", stack, "nobody")
    assert nobody.returncode != 0 and "pam_slurm_adopt" in nobody.stderr, nobody.stdout + nobody.stderr
    admin = pamtester(tmp_path / "admin", stack, "root")
    assert admin.returncode == 0, admin.stdout + admin.stderr
    # Without the admin rule root is left to pam_slurm_adopt, which ignores root (root is always admitted;
    # sshd's PermitRootLogin no keeps it off SSH): the stack's own success (pam_permit) stands, as Ubuntu's does.
    no_admin = pamtester(tmp_path / "no-admin", stack.replace(str(access), str(tmp_path / "none.conf")), "root")
    assert no_admin.returncode == 0, no_admin.stdout + no_admin.stderr
    still = pamtester(tmp_path / "still", stack.replace(str(access), str(tmp_path / "none.conf")), "nobody")
    assert still.returncode != 0 and "pam_slurm_adopt" in still.stderr  # pam_permit admits nobody else
    # a stack whose pam_slurm_adopt is missing admits no one (not: skips it and lets pam_permit's yes stand)
    broken = stack.replace("pam_slurm_adopt.so", "pam_slurm_adopt_missing.so")
    assert pamtester(tmp_path / "broken", broken, "nobody").returncode != 0


@pytest.mark.parametrize(
    ("name", "identity", "host_keys"),
    [("sshd-gpucluster.conf", DECLARED, ()), ("sshd-gpucluster-directory.conf", DIRECTORY, ("ed25519", "rsa"))],
    ids=["declared", "dir-host-keys"],
)
def test_sshd_drop_in_golden_and_accepted_by_sshd(name, identity, host_keys, tmp_path, update_golden):
    sshd, keygen = require_tool("sshd"), require_tool("ssh-keygen")
    paths = []
    for kind in host_keys or ("ed25519",):
        key = tmp_path / f"ssh_host_{kind}_key"
        subprocess.run([keygen, "-q", "-t", kind, "-N", "", "-f", str(key)], check=True)
        paths.append(str(key))
    rendered = sshd_drop_in(identity, tuple(f"/etc/ssh/gpucluster/ssh_host_{k}_key" for k in host_keys))
    check_golden(GOLDEN_DIR / name, rendered, update_golden)
    assert "PasswordAuthentication no" in rendered and "PermitRootLogin no" in rendered
    assert "KbdInteractiveAuthentication no" in rendered
    text = rendered
    for kind, path in zip(host_keys, paths, strict=False):
        text = text.replace(f"/etc/ssh/gpucluster/ssh_host_{kind}_key", path)
    conf = tmp_path / "sshd_config"
    conf.write_text(text)
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd -t wants its privilege separation directory
    extra = [] if host_keys else ["-o", f"HostKey={paths[0]}"]
    result = subprocess.run([sshd, "-t", "-f", str(conf), *extra], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    conf.write_text(text + "PermitRootLogin maybe\n")  # the check can fail
    assert subprocess.run([sshd, "-t", "-f", str(conf), *extra], capture_output=True, text=True).returncode != 0


def test_declared_keys_come_from_roots_files_and_directory_keys_from_sssd():
    assert "AuthorizedKeysFile /etc/gpucluster/ssh/authorized_keys/%u .ssh/authorized_keys" in sshd_drop_in(DECLARED)
    directory = sshd_drop_in(DIRECTORY)
    assert "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u" in directory
    assert "AuthorizedKeysCommandUser nobody" in directory


def compute_doc(identity: ResolvedIdentity | None) -> dict:
    ctx = context(identity)
    return yaml.safe_load(render_cloud_config("compute", node_slurm_part(ctx, ctx.node_groups[0]), gzipped=True))


def setup_text(doc: dict) -> str:
    entry = next(f for f in doc["write_files"] if f["path"] == "/usr/local/sbin/gpucluster-slurm-node")
    return WriteFile(entry["path"], entry["content"], encoding=entry.get("encoding")).text()


def test_compute_user_data_installs_the_stack_with_the_node_name_before_slurmd(tmp_path):
    doc = compute_doc(DECLARED)
    paths = {f["path"] for f in doc["write_files"]}
    assert {COMPUTE_PAM_TEMPLATE, SSHD_DROP_IN, ADMIN_ACCESS_FILE} <= paths
    setup = setup_text(doc)
    # the package is baked into the image (the install part) or installed at boot with `bake: false`: one list
    assert "libpam-slurm-adopt" in node_packages(context(DECLARED))
    substitute = f's/@NODENAME@/$node/g" {COMPUTE_PAM_TEMPLATE} >/etc/pam.d/.sshd.new'
    assert setup.index("node=$(") < setup.index(substitute) < setup.index("systemctl enable --now slurmd")
    script = tmp_path / "setup.sh"
    script.write_text(setup)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    # no identity: no SSH stack of ours, no extra package
    plain = compute_doc(None)
    assert COMPUTE_PAM_TEMPLATE not in {f["path"] for f in plain["write_files"]}
    assert "libpam-slurm-adopt" not in setup_text(plain) and "libpam-slurm-adopt" not in node_packages(context(None))


def test_prolog_flags_contain_whenever_the_compute_stack_renders():
    """pam_slurm_adopt adopts into the job's extern step, which only PrologFlags=Contain makes (privacy.py renders it
    for every version): a later change there must not silently break adoption."""
    for identity in (DECLARED, DIRECTORY):
        ctx = context(identity)
        assert compute_pam_sshd(ctx.cluster, identity)
        flags = re.search(r"^PrologFlags=(\S+)$", slurm_conf(ctx), re.M)
        assert flags is not None and "Contain" in flags.group(1).split(","), flags
        assert not re.search(r"^UsePAM", slurm_conf(ctx), re.M | re.I)


def test_srun_port_range_only_with_login_nodes(tmp_path):
    """SrunPortRange=60001-63000 when login nodes exist (srun listens there), read cleanly by slurmctld 22.05; absent
    otherwise. (LaunchParameters=ulimit_pam_adopt is not rendered: slurmctld 22.05 and 24.11 accept any value of that
    key, a made-up one included, so reading it proves nothing about the nodes' support.)"""
    from tests.render.slurm_check import check_slurmctld, conf_files

    ctx = context(DECLARED)
    assert "SrunPortRange" not in slurm_conf(ctx)
    with_login = dataclasses.replace(ctx, srun_ports=(60001, 63000))
    text = slurm_conf(with_login)
    assert re.search(r"^SrunPortRange=60001-63000$", text, re.M)
    require_tool("slurmctld")
    files = {**conf_files(with_login), "slurm.conf": text}
    rc, problems = check_slurmctld(files, tmp_path)
    assert rc == 124 and problems == [], problems


# --- the head node (H1: a researcher's key in the shared /home opened a shell on the controller) ---------------------


def head_files(identity: ResolvedIdentity | None) -> dict[str, str]:
    return {f.path: f.text() for f in head_ssh_files("c1", identity)}


@pytest.mark.parametrize(
    ("name", "identity"), [("head", DECLARED), ("head-directory", DIRECTORY), ("head-no-identity", None)], ids=str
)
def test_h1_head_sshd_and_pam_files_golden_and_accepted_by_sshd(name, identity, tmp_path, update_golden):
    """The head node's three files, pinned; the drop-in read by the real ``sshd -t``; only the admin group (root's
    without one) is allowed, and pam_access is requisite before Ubuntu's account stack."""
    files = head_files(identity)
    assert set(files) == {SSHD_DROP_IN, HEAD_PAM, HEAD_ACCESS_FILE}
    text = "".join(f"==> {path} <==\n{body}" for path, body in sorted(files.items()))
    check_golden(GOLDEN_DIR / f"ssh-{name}", text, update_golden)
    group = identity.admin_group if identity is not None and identity.admin_group else "root"
    drop_in = files[SSHD_DROP_IN]
    assert re.findall(r"^AllowGroups .*$", drop_in, re.M) == [f"AllowGroups {group}"]
    account = account_lines(files[HEAD_PAM])
    assert account[:3] == [
        "account    required     pam_nologin.so",
        f"account    requisite    pam_access.so accessfile={HEAD_ACCESS_FILE}",
        "@include common-account",
    ]
    sshd, keygen = require_tool("sshd"), require_tool("ssh-keygen")
    key = tmp_path / "ssh_host_ed25519_key"
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    conf = tmp_path / "sshd_config"
    conf.write_text(drop_in)
    Path("/run/sshd").mkdir(exist_ok=True)
    result = subprocess.run([sshd, "-t", "-f", str(conf), "-o", f"HostKey={key}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    # sshd's own view of the file: the allowed groups are what it will enforce
    shown = subprocess.run([sshd, "-T", "-f", str(conf), "-o", f"HostKey={key}"], capture_output=True, text=True)
    assert shown.returncode == 0 and f"allowgroups {group}" in shown.stdout.splitlines(), shown.stderr


PASSWD = "root:x:0:0:root:/root:/bin/bash\nalice:x:10001:10001::/home/alice:/bin/bash\nbob:x:10002:10002::/home/bob:/bin/bash\n"
GROUP = "root:x:0:\nhpc-admins:x:5000:alice\nllm:x:5002:bob\nalice:x:10001:\nbob:x:10002:\n"
SHADOW = "root:*:20000:0:99999:7:::\nalice:*:20000:0:99999:7:::\nbob:*:20000:0:99999:7:::\n"


def test_h1_the_real_pam_library_admits_an_admin_and_refuses_a_researcher_on_the_head(tmp_path):
    """The head node's rendered stack and access file (at its real path) through the real libpam, with fixture
    accounts (alice in hpc-admins, bob a researcher in llm) bound over /etc/passwd, /etc/group and /etc/shadow in a
    private mount namespace: alice and root are admitted, bob is refused by pam_access. The same stack without the
    pam_access line admits bob (the refusal is that line's)."""
    require_tool("pamtester")
    files = head_files(DECLARED)
    etc = tmp_path / "etc"
    security = etc / "security"
    etc.mkdir()
    subprocess.run(["cp", "-a", "/etc/security", str(security)], check=True)
    Path(security / Path(HEAD_ACCESS_FILE).name).write_text(files[HEAD_ACCESS_FILE])
    binds: dict[str, Path] = {"/etc/security": security}
    for name, text in (("passwd", PASSWD), ("group", GROUP), ("shadow", SHADOW)):
        (etc / name).write_text(text)
        binds[f"/etc/{name}"] = etc / name
    stack = files[HEAD_PAM]
    alice = pamtester(tmp_path / "alice", stack, "alice", binds)
    assert alice.returncode == 0, alice.stdout + alice.stderr
    root = pamtester(tmp_path / "root", stack, "root", binds)
    assert root.returncode == 0, root.stdout + root.stderr
    bob = pamtester(tmp_path / "bob", stack, "bob", binds)
    assert bob.returncode != 0 and "Permission denied" in bob.stderr, bob.stdout + bob.stderr
    without = "\n".join(line for line in stack.splitlines() if "pam_access" not in line) + "\n"
    bob_without = pamtester(tmp_path / "bob-without", without, "bob", binds)
    assert bob_without.returncode == 0, bob_without.stdout + bob_without.stderr
