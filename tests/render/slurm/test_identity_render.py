"""Who is root on a Slurm node, and the declared users: the session lockdown and the admin rule (checked by visudo), the
lockdown in every Slurm node's bootcmd, and the users program run for real, twice, on a temporary root."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpucluster.load import load_spec
from gpucluster.render.core import render_cloud_config
from gpucluster.render.slurm.agent import AgentBundle, LaunchTarget, agent_config
from gpucluster.render.slurm.compute import node_slurm_part
from gpucluster.render.slurm.guard import imds_guard_bootcmd
from gpucluster.render.slurm.head import HeadInputs, head_user_data
from gpucluster.render.slurm.identity import (
    ADMIN_SUDOERS,
    AUTHORIZED_KEYS_DIR,
    CLOUD_INIT_SUDOERS,
    DENY_SUDOERS,
    SSM_SUDOERS,
    USERS_PROGRAM,
    USERS_STAMP,
    USERS_TIMER,
    USERS_UNIT,
    admin_sudoers,
    session_lockdown_bootcmd,
    session_lockdown_runcmd,
    users_bundle,
    users_json,
    users_timer,
    users_unit,
)
from gpucluster.render.slurm.image import needs_package
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.slurm.identity import DeclaredIdentity, ResolvedIdentity
from gpucluster_agents.boot import users as boot_users
from gpucluster_agents.contract import users as users_contract
from tests.conftest import GOLDEN, IN_CI, ROOT, check_golden, group, make_config, require_tool
from tests.plans import shipped_plan
from tests.render.hybrid.join_cases import SECRET_ARN, hybrid_spec, p5
from tests.render.identity_cases import ALICE, BOB, CAROL, CAROL_KEY, DECLARED, DECLARED_NO_ADMIN, DIRECTORY, GROUPS

GOLDEN_DIR = GOLDEN / "slurm" / "identity"
# shadow's "last change" day comes from SOURCE_DATE_EPOCH, not the host's clock: 2026-01-01 = day 20454
EPOCH, DAY = "1767225600", "20454"


def context(identity: ResolvedIdentity | None) -> SlurmContext:
    ctx = SlurmContext.of(load_spec(make_config(group(name="p5", maxSize=2), slurm={}), stack="identity").cluster)
    return dataclasses.replace(ctx, identity=identity)


def head_doc(identity: ResolvedIdentity | None) -> dict:
    ctx = context(identity)
    targets = {g.name: LaunchTarget("lt-0123456789abcdef0", ("subnet-0123456789abcdef0",)) for g in ctx.node_groups}
    inputs = HeadInputs("vol-0123456789abcdef0", AgentBundle("bucket", "key", "0" * 64), agent_config(ctx, targets))
    both = head_user_data(ctx, inputs)
    doc = yaml.safe_load(render_cloud_config("head", both.config, gzipped=True))
    # After its first boot the head node also holds its bundle's files (render/slurm/headfiles.py), written by the boot
    # helper as root: root's files, as cloud-init's.
    doc["write_files"] += [dict(f, owner="root:root") for f in json.loads(both.bundle)["files"]]
    doc["write_files"] += [dict(f, owner="root:root") for f in json.loads(both.live or '{"files": []}')["files"]]
    return doc


def compute_doc(identity: ResolvedIdentity | None) -> dict:
    ctx = context(identity)
    return yaml.safe_load(render_cloud_config("compute", node_slurm_part(ctx, ctx.node_groups[0]), gzipped=True))


def files_of(doc: dict) -> dict[str, dict]:
    return {f["path"]: f for f in doc["write_files"]}


def visudo(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_tool("visudo"), "-c", "-f", str(path)], capture_output=True, text=True, check=False)


# --- the admin rule ------------------------------------------------------------------------------------------


def test_admin_sudoers_golden_and_accepted_by_visudo(tmp_path, update_golden):
    text = admin_sudoers("hpc-admins")
    check_golden(GOLDEN_DIR / "60-gpucluster-admins", text, update_golden)
    assert [line for line in text.splitlines() if not line.startswith("#")] == ["%hpc-admins ALL=(ALL:ALL) NOPASSWD: ALL"]
    path = tmp_path / "60-gpucluster-admins"
    path.write_text(text)
    assert visudo(path).returncode == 0, visudo(path).stderr
    path.write_text(text.replace("NOPASSWD:", "NOPASSWD"))  # the check can fail
    assert visudo(path).returncode != 0


@pytest.mark.parametrize("bad", ["hpc admins", "x\nALL ALL=(ALL) ALL", "%wheel", ""])
def test_admin_group_that_is_no_group_name_is_refused(bad):
    with pytest.raises(ValueError, match="not a group name"):
        admin_sudoers(bad)


# --- the session lockdown, run for real on a temporary root ---------------------------------------------------


def lockdown_root(tmp_path: Path, *, default_user: bool) -> Path:
    root = tmp_path / "root"
    (root / "etc/sudoers.d").mkdir(parents=True)
    passwd = "root:x:0:0:root:/root:/bin/bash\n" + ("ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash\n" if default_user else "")
    (root / "etc/passwd").write_text(passwd)
    (root / "etc/group").write_text("root:x:0:\n" + ("ubuntu:x:1000:\n" if default_user else ""))
    (root / "etc/shadow").write_text("root:*:20000:0:99999:7:::\n" + ("ubuntu:!:20000:0:99999:7:::\n" if default_user else ""))
    (root / "etc/gshadow").write_text("root:*::\n" + ("ubuntu:!::\n" if default_user else ""))
    (root / "etc/sudoers.d/90-cloud-init-users").write_text("# Created by cloud-init\nubuntu ALL=(ALL) NOPASSWD:ALL\n")
    return root


def run_lockdown(root: Path) -> subprocess.CompletedProcess[str]:
    """The boot command as cloud-init runs a bootcmd list entry (argv, no shell of its own)."""
    env = {"PATH": os.environ["PATH"], "GPUCLUSTER_ROOT": str(root)}
    return subprocess.run(list(session_lockdown_bootcmd()), env=env, capture_output=True, text=True, check=False)


def run_installed_lockdown(root: Path) -> subprocess.CompletedProcess[str]:
    """The runcmd: the script the boot command left behind."""
    (program,) = session_lockdown_runcmd()
    env = {"PATH": os.environ["PATH"], "GPUCLUSTER_ROOT": str(root)}
    return subprocess.run([f"{root}{program}"], env=env, capture_output=True, text=True, check=False)


def test_lockdown_script_golden(update_golden):
    check_golden(GOLDEN_DIR / "session-lockdown.sh", session_lockdown_bootcmd()[-1], update_golden)


def test_lockdown_takes_sudo_from_ssm_user_and_the_default_user(tmp_path):
    root = lockdown_root(tmp_path, default_user=True)
    for n in range(2):  # every boot: the second run changes nothing
        result = run_lockdown(root) if n == 0 else run_installed_lockdown(root)
        assert result.returncode == 0, result.stderr
        ssm = root / SSM_SUDOERS.lstrip("/")
        cloud = root / CLOUD_INIT_SUDOERS.lstrip("/")
        deny = root / DENY_SUDOERS.lstrip("/")
        assert ssm.read_text() == "#User rules for ssm-user\n"
        assert cloud.read_text() == ""
        assert [x for x in deny.read_text().splitlines() if not x.startswith("#")] == [
            "ssm-user ALL=(ALL:ALL) !ALL",
            "ubuntu ALL=(ALL:ALL) !ALL",
        ]
        for path in (ssm, cloud, deny):
            st = path.stat()
            assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o440, 0, 0), path
            assert visudo(path).returncode == 0, visudo(path).stderr
        assert sorted(p.name for p in (root / "etc/sudoers.d").iterdir()) == [
            "90-cloud-init-users",
            "ssm-agent-users",
            "zz-gpucluster-no-session-sudo",
        ]
        ubuntu = [line for line in (root / "etc/shadow").read_text().splitlines() if line.startswith("ubuntu:")]
        fields = ubuntu[0].split(":")
        assert fields[1].startswith("!") and fields[7] == "1", ubuntu  # locked and expired (1970-01-02)


def sudo_allows(sudoers_d: Path, user: str) -> bool:
    """``sudo -l -U <user> /bin/true`` (root asks sudo whether ``user`` may) with ``sudoers_d`` bind-mounted over
    /etc/sudoers.d in a private mount namespace: the host's sudo configuration is not touched."""
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("needs root (a private mount namespace); CI runs as root")
    sudo, unshare = require_tool("sudo"), require_tool("unshare")
    check = f'mount --bind "$1" /etc/sudoers.d && exec {sudo} -n -l -U {user} /bin/true'
    result = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "sh", "-c", check, "sudo-check", str(sudoers_d)],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode == 0


def test_sudo_refuses_the_grants_cloud_init_appends_after_bootcmd(tmp_path):
    """The first boot's order: bootcmd's lockdown, then cloud-init's users_groups appends the default user's grant to
    90-cloud-init-users (and an agent older than 2.3.634.0 may rewrite ssm-agent-users). The real sudo, reading the
    resulting directory, still refuses both users; the same directory without the lockdown's deny file allows them
    (the check can fail). ``nobody`` stands for the default user (sudo -l -U needs an account this host has)."""
    root = lockdown_root(tmp_path, default_user=False)
    assert run_lockdown(root).returncode == 0
    d = root / "etc/sudoers.d"
    deny = d / DENY_SUDOERS.rsplit("/", 1)[1]
    deny.write_text(deny.read_text().replace("ubuntu ALL", "nobody ALL"))
    with (d / "90-cloud-init-users").open("a") as f:
        f.write("\n# User rules for nobody\nnobody ALL=(ALL) NOPASSWD:ALL\n")
    assert not sudo_allows(d, "nobody")
    deny.unlink()
    assert sudo_allows(d, "nobody")


def test_lockdown_without_a_default_user_does_not_fail(tmp_path):
    root = lockdown_root(tmp_path, default_user=False)
    shadow = (root / "etc/shadow").read_text()
    result = run_lockdown(root)
    assert result.returncode == 0, result.stderr
    assert (root / SSM_SUDOERS.lstrip("/")).read_text() == "#User rules for ssm-user\n"
    assert (root / "etc/shadow").read_text() == shadow


def test_lockdown_fails_when_it_cannot_write_sudoers(tmp_path):
    """A lockdown that did not happen is reported (cloud-init logs the failed boot command), never silent."""
    root = lockdown_root(tmp_path, default_user=False)
    (root / "etc/sudoers.d/90-cloud-init-users").unlink()
    (root / "etc/sudoers.d").rmdir()
    (root / "etc/sudoers.d").write_text("not a directory")
    assert run_lockdown(root).returncode != 0


# --- every Slurm node's user data -----------------------------------------------------------------------------


def sudoers_writes(doc: dict) -> list[str]:
    return sorted(p for p in files_of(doc) if p.startswith("/etc/sudoers.d/"))


@pytest.mark.parametrize("identity", [None, DECLARED_NO_ADMIN, DECLARED, DIRECTORY], ids=["none", "no-admin", "admin", "dir"])
def test_head_and_compute_lock_sessions_down_in_bootcmd(identity):
    admin = identity is not None and identity.admin_group is not None
    for role, doc in (("head", head_doc(identity)), ("compute", compute_doc(identity))):
        lockdown = list(session_lockdown_bootcmd())
        assert lockdown in doc["bootcmd"], role
        if role == "compute":  # the IMDS guard stays first (tests/e2e/test_imds_guard_e2e.py), the lockdown next
            assert doc["bootcmd"][:2] == [list(imds_guard_bootcmd()), lockdown]
        else:
            assert doc["bootcmd"][0] == lockdown
        assert doc["runcmd"][0] == list(session_lockdown_runcmd()), role  # again after cloud-init made the default user
        assert sudoers_writes(doc) == ([ADMIN_SUDOERS] if admin else []), role
        if admin:
            entry = files_of(doc)[ADMIN_SUDOERS]
            assert (entry["permissions"], entry["owner"]) == ("0440", "root:root")
            assert "%hpc-admins ALL=(ALL:ALL) NOPASSWD: ALL" in entry["content"]


def test_every_stack_slurm_node_locks_sessions_down():
    """The shipped stacks' head and compute user data (plans): the lockdown in bootcmd, and no sudoers file written but
    the admin group's (slurm-p5 declares hpc-admins)."""
    files = shipped_plan("slurm-p5").files
    docs = {p: yaml.safe_load(t) for p, t in files.items() if p.endswith("/user-data") and "slurm" in p}
    assert any("head" in p for p in docs) and len(docs) >= 3, sorted(docs)
    for path, doc in docs.items():
        assert list(session_lockdown_bootcmd()) in doc["bootcmd"], path
        assert list(session_lockdown_runcmd()) in doc["runcmd"], path
        bundle = path.removesuffix("/user-data") + "-files"  # the head node's other files (render/slurm/headfiles.py)
        written = sudoers_writes(doc) + [p.removeprefix(bundle) for p in files if p.startswith(bundle + "/etc/sudoers.d/")]
        assert written == ["/etc/sudoers.d/60-gpucluster-admins"], path


def test_hybrid_cloud_node_locks_sessions_down():
    from gpucluster.render.hybrid.compute import render_hybrid_compute_user_data

    spec = hybrid_spec(controller={"slurmVersion": "24.11"})
    doc = yaml.safe_load(render_hybrid_compute_user_data(spec, p5(spec), SECRET_ARN))
    assert doc["bootcmd"][:2] == [list(imds_guard_bootcmd()), list(session_lockdown_bootcmd())]
    assert doc["runcmd"].index(list(session_lockdown_runcmd())) < doc["runcmd"].index(["/usr/local/sbin/gpucluster-hybrid-join"])
    assert sudoers_writes(doc) == []


def test_users_program_runs_before_slurm_on_head_and_compute():
    """The unit and its timer on head and compute nodes, enabled after the node package (which holds the program and
    the users contract) is installed and before Slurm's daemon; the program and the users are in no node's files."""
    for role, doc, setup, daemon in (
        ("head", head_doc(DECLARED), "/usr/local/sbin/gpucluster-slurm-head", "systemctl enable --now slurmctld"),
        ("compute", compute_doc(DECLARED), "/usr/local/sbin/gpucluster-slurm-node", "systemctl enable --now slurmd"),
    ):
        files = files_of(doc)
        assert USERS_PROGRAM not in files and "/etc/gpucluster/users.json" not in files, role
        assert {f"/etc/systemd/system/{USERS_UNIT}", f"/etc/systemd/system/{USERS_TIMER}"} <= set(files), role
        assert not [p for p, f in files.items() if "alice" in str(f.get("content", ""))], role
        from gpucluster.render.core import WriteFile

        text = WriteFile(setup, files[setup]["content"], encoding=files[setup].get("encoding")).text()
        enable = text.index(f"systemctl enable --now {USERS_UNIT} {USERS_TIMER}")
        assert enable < text.index(daemon), role
        if "install-agent" in text:  # else the node boots the baked image, which holds the package
            assert text.index("install-agent") < enable, role
        else:
            assert role == "compute" and needs_package(context(DECLARED), metrics=False), role
    for doc in (head_doc(DIRECTORY), compute_doc(None)):  # a directory's users come from SSSD; no identity: none
        assert f"/etc/systemd/system/{USERS_UNIT}" not in files_of(doc)


def test_users_unit_runs_after_home_and_before_slurm(tmp_path, update_golden):
    """The unit (fetch, then the program) and its timer, pinned and read by systemd (``systemd-analyze verify``, the
    python and bash the unit names replaced by this machine's so the executables exist here)."""
    import shutil

    check_golden(GOLDEN_DIR / "gpucluster-users.service", users_unit(homes=False), update_golden)
    check_golden(GOLDEN_DIR / "gpucluster-users.timer", users_timer(), update_golden)
    unit = users_unit(homes=True)
    assert f"ExecStart=/bin/bash {USERS_PROGRAM} --homes" in unit
    assert "remote-fs.target" in unit and "Before=slurmctld.service slurmd.service sackd.service" in unit
    assert "ExecStartPre=-/usr/bin/python3 -I -c" in unit and " fetch /usr/local/sbin/gpucluster-aws.json" in unit
    assert "RemainAfterExit" not in unit  # the timer starts it again
    analyze = require_tool("systemd-analyze")
    (tmp_path / USERS_UNIT).write_text(
        unit.replace("/usr/bin/python3 ", f"{sys.executable} ").replace("/bin/bash ", f"{shutil.which('bash')} ")
    )
    (tmp_path / USERS_TIMER).write_text(users_timer())
    done = subprocess.run(
        [analyze, "verify", "--man=no", str(tmp_path / USERS_UNIT), str(tmp_path / USERS_TIMER)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


# --- the users program, run for real -----------------------------------------------------------------------------


def users_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "home").mkdir()
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc/group").write_text("root:x:0:\n")
    (root / "etc/shadow").write_text("root:*:20000:0:99999:7:::\n")
    (root / "etc/gshadow").write_text("root:*::\n")
    return root


def run_users(
    declared: DeclaredIdentity | ResolvedIdentity, root: Path, *args: str, stamp: bool = False
) -> subprocess.CompletedProcess[str]:
    """The rendered users program on ``root``, with ``declared`` as its users file (``users_json``) and this
    checkout's node package; ``stamp``: keep the record of the last applied file (a timer's run), else it is removed
    (a boot's run: /run is empty)."""
    for tool in ("useradd", "usermod", "groupadd"):
        require_tool(tool)
    source = declared.source if isinstance(declared, ResolvedIdentity) else declared
    assert isinstance(source, DeclaredIdentity)
    users_file = root / "etc/gpucluster/users.json"
    users_file.parent.mkdir(parents=True, exist_ok=True)
    users_file.write_text(users_json(source))
    if not stamp:
        (root / USERS_STAMP.lstrip("/")).unlink(missing_ok=True)
    path = ROOT / "gpucluster_agents/boot/users.sh"  # as the node package ships it
    env = {
        "PATH": os.environ["PATH"],
        "GPUCLUSTER_ROOT": str(root),
        "SOURCE_DATE_EPOCH": EPOCH,
        "GPUCLUSTER_AGENT_LIB": str(ROOT),
        "GPUCLUSTER_PYTHON": sys.executable,
    }
    return subprocess.run(["bash", str(path), *args], env=env, capture_output=True, text=True, check=False)


def lines(root: Path, name: str) -> list[str]:
    return (root / "etc" / name).read_text().splitlines()


def declared(*users) -> DeclaredIdentity:
    names = {u.name for u in users}
    groups = tuple(g for g in GROUPS if g.gid < 10000 or g.name in names)
    return DeclaredIdentity(tuple(users), groups)


def test_users_program_parses_passes_shellcheck_and_names_the_renderers_paths(tmp_path):
    """The shipped program (gpucluster_agents/boot/users.sh) under ``bash -n`` and shellcheck; the paths and the
    comment it spells out are the renderer's constants (the unit, sshd's AuthorizedKeysFile, the contract's file)."""
    from gpucluster.render.slurm.identity import AUTHORIZED_KEYS_DIR, MANAGED_COMMENT, USERS_MAIN
    from gpucluster.render.slurm.names import AGENT_LIB

    script = Path(boot_users.__file__).with_name("users.sh").read_text()  # the shipped program, the same on every node
    assert USERS_PROGRAM == f"{AGENT_LIB}/gpucluster_agents/boot/users.sh"
    for value in (USERS_STAMP, MANAGED_COMMENT, AUTHORIZED_KEYS_DIR, USERS_MAIN, AGENT_LIB, users_contract.USERS_PATH):
        assert value in script, value
    path = tmp_path / "users.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    lint = subprocess.run([require_tool("shellcheck"), "-s", "bash", "-S", "warning", str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    path.write_text(script.replace("fi\n", "", 1))  # the check can fail
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode != 0


def test_users_are_made_exactly_and_idempotently(tmp_path):
    root = users_root(tmp_path)
    first = run_users(DECLARED, root, "--homes")
    assert first.returncode == 0, first.stderr
    expected = {
        "passwd": [
            "root:x:0:0:root:/root:/bin/bash",
            "alice:x:10001:10001:gpucluster-managed:/home/alice:/bin/bash",
            "bob:x:10002:10002:gpucluster-managed:/home/bob:/bin/bash",
            "carol:x:10003:10003:gpucluster-managed:/home/carol:/bin/bash",
        ],
        "group": [
            "root:x:0:",
            "hpc-admins:x:5000:alice",
            "vision:x:5001:alice",
            "llm:x:5002:bob,carol",
            "alice:x:10001:",
            "bob:x:10002:",
            "carol:x:10003:",
        ],
        "shadow": ["root:*:20000:0:99999:7:::", *(f"{u}:!:{DAY}::::::" for u in ("alice", "bob", "carol"))],
    }
    for name, want in expected.items():
        assert lines(root, name) == want, name
    keys = root / AUTHORIZED_KEYS_DIR.lstrip("/")
    assert (keys / "carol").read_text() == CAROL_KEY + "\n"
    assert (keys / "alice").read_text() == ""
    st = (keys / "carol").stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o644, 0)
    for u in (ALICE, BOB, CAROL):
        st = (root / "home" / u.name).stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o700, u.uid, u.gid)
    (root / "home/alice/notes").write_text("kept")

    second = run_users(DECLARED, root, "--homes")
    assert second.returncode == 0, second.stderr
    assert "made" not in second.stderr, second.stderr  # nothing new the second time
    for name, want in expected.items():
        assert lines(root, name) == want, name
    assert (root / "home/alice/notes").read_text() == "kept"


def test_homes_only_with_the_flag(tmp_path):
    root = users_root(tmp_path)
    assert run_users(DECLARED, root).returncode == 0
    assert list((root / "home").iterdir()) == []


def test_an_undeclared_user_is_locked_and_a_declared_one_again_unlocked(tmp_path):
    root = users_root(tmp_path)
    assert run_users(declared(ALICE, BOB, CAROL), root).returncode == 0
    without_carol = run_users(declared(ALICE, BOB), root)
    assert without_carol.returncode == 0, without_carol.stderr
    assert "user carol is no longer declared: locked" in without_carol.stderr
    shadow = {line.split(":")[0]: line for line in lines(root, "shadow")}
    assert shadow["carol"] == f"carol:!:{DAY}:::::1:"  # expired since 1970-01-02: no login, no Run As session
    assert shadow["alice"] == f"alice:!:{DAY}::::::"
    assert "carol:x:10003:10003:gpucluster-managed:/home/carol:/bin/bash" in lines(root, "passwd")  # files keep their owner
    assert not (root / AUTHORIZED_KEYS_DIR.lstrip("/") / "carol").exists()
    again = run_users(declared(ALICE, BOB), root)
    assert "locked" not in again.stderr  # already locked: left as it is
    back = run_users(declared(ALICE, BOB, CAROL), root)
    assert back.returncode == 0, back.stderr
    assert f"carol:!:{DAY}::::::" in lines(root, "shadow")


def test_a_foreign_account_is_never_renumbered(tmp_path):
    root = users_root(tmp_path)
    with (root / "etc/passwd").open("a") as f:
        f.write("bob:x:2000:2000::/home/bob:/bin/sh\ndave:x:10001:10001::/home/dave:/bin/sh\n")
    result = run_users(declared(ALICE, BOB, CAROL), root)
    assert result.returncode != 0
    assert "refused: uid 10001 is dave's on this node, declared for alice" in result.stderr
    assert "refused: user bob has uid 2000 on this node, declared 10002" in result.stderr
    passwd = lines(root, "passwd")
    assert "bob:x:2000:2000::/home/bob:/bin/sh" in passwd and not any(p.startswith("alice:") for p in passwd)
    assert any(p.startswith("carol:x:10003:") for p in passwd)  # the others are still made
    assert not (root / AUTHORIZED_KEYS_DIR.lstrip("/") / "bob").exists()


def test_a_clashing_group_stops_before_any_user(tmp_path):
    root = users_root(tmp_path)
    with (root / "etc/group").open("a") as f:
        f.write("llm:x:7000:\n")
    result = run_users(declared(BOB), root)
    assert result.returncode != 0
    assert "refused: group llm has gid 7000 on this node, declared 5002" in result.stderr
    assert not any(p.startswith("bob:") for p in lines(root, "passwd"))


def test_from_the_config_to_the_nodes_files():
    """slurm.identity in the config reaches every node's files through resolution (no fixture in between), and the
    slurm-p5-shaped node groups' user data stays under EC2's limit with it (user_data_findings: no finding)."""
    from gpucluster.render.compute.user_data import user_data_findings

    people = {
        "adminGroup": "hpc-admins",
        "groups": [{"name": "hpc-admins", "gid": 5000}, {"name": "llm", "gid": 5002}],
        "users": [
            {"name": "alice", "uid": 10001, "groups": ["hpc-admins"]},
            {"name": "carol", "uid": 10003, "groups": ["llm"], "sshPublicKeys": [CAROL_KEY]},
        ],
    }
    cluster = load_spec(make_config(group(name="p5", maxSize=2), slurm={"identity": people}), stack="people").cluster
    ctx = SlurmContext.of(cluster)
    files = files_of(yaml.safe_load(render_cloud_config("compute", node_slurm_part(ctx, ctx.node_groups[0]), gzipped=True)))
    assert "%hpc-admins ALL=(ALL:ALL) NOPASSWD: ALL" in files[ADMIN_SUDOERS]["content"]
    assert USERS_PROGRAM not in files and not [p for p, f in files.items() if "alice" in str(f.get("content", ""))]
    assert ctx.identity is not None
    bundle = json.loads(users_bundle(ctx.identity) or "")["files"]
    assert [(f["path"], f["permissions"]) for f in bundle] == [("/etc/gpucluster/users.json", "0644")]
    users = {u.name: u for u in users_contract.parse(json.loads(bundle[0]["content"])).users}
    assert (users["alice"].uid, users["alice"].gid, users["alice"].groups) == (10001, 10001, ("hpc-admins",))
    assert (users["carol"].groups, users["carol"].ssh_public_keys) == (("llm",), (CAROL_KEY,))
    assert user_data_findings(cluster) == []
