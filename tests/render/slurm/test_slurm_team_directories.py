"""Each Slurm team's group and its directory on Lustre: with declared users a team gets a POSIX group named like it
(its members the team's users, on every node through the declared users' file), and the head node — the file system's
no-squash client — makes ``/fsx/teams/<team>``, root and the team's group, 2770. The head node's script is run for
real as root (real mkdir, chown, chmod and stat) on a directory standing in for the mount, ``mountpoint`` a stub. The
teams are a live list (the head node's live bundle): a team added changes the list, never the script.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.config.kubernetes.team_posix import TeamPosixSpec
from gpucluster.load import load_spec
from gpucluster.render.slurm.headfiles import LIVE_PATHS
from gpucluster.render.slurm.identity import users_json
from gpucluster.render.slurm.names import HEAD_SETUP, SlurmContext
from gpucluster.render.slurm.team_directories import (
    TEAM_DIRECTORIES_LIST,
    TEAM_DIRECTORIES_PATH_UNIT,
    TEAM_DIRECTORIES_SCRIPT,
    TEAM_DIRECTORIES_UNIT,
    team_directories,
)
from gpucluster.resolve.slurm.identity import DeclaredIdentity
from gpucluster.tools.plan.run.stackfile import read_stack_file
from gpucluster_agents.contract import users as users_contract
from tests.conftest import IDENTITY_DECLARED, IDENTITY_DIRECTORY, IN_CI, group, make_config, require_tool
from tests.render.slurm.test_head_files import rendered

RESEARCH_GID = TeamPosixSpec().resolve("research").gid
APPLIED_GID = TeamPosixSpec().resolve("applied").gid


def head_files_of(stack: str) -> dict[str, str]:
    """The head node's fetched files: the pinned bundle's and the live bundle's."""
    head = rendered(stack)
    live = json.loads(head.live or '{"files": []}')["files"]
    return {e["path"]: e["content"] for e in [*json.loads(head.bundle)["files"], *live]}


@pytest.fixture(scope="module")
def p5_files() -> dict[str, str]:
    return head_files_of("slurm-p5")


def owner_mode(path: Path) -> tuple[int, int, str]:
    st = path.stat()
    return st.st_uid, st.st_gid, f"{stat.S_IMODE(st.st_mode):o}"


def run(script: str, tmp: Path, *, mounted: bool = True, teams: str | None = None) -> subprocess.CompletedProcess[str]:
    """The script with its mount point moved to tmp/fsx and its list to tmp/list (``teams``, when given, as the list's
    text), ``mountpoint`` answering ``mounted``."""
    root = tmp / "fsx"
    root.mkdir(exist_ok=True)
    if teams is not None:
        (tmp / "list").write_text(teams)
    path = tmp / "team-directories.sh"
    moved = script.replace("mount_point=/fsx\n", f"mount_point={root}\n", 1)
    path.write_text(moved.replace(f"list={TEAM_DIRECTORIES_LIST}\n", f"list={tmp / 'list'}\n", 1))
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "mountpoint").write_text(f"#!/bin/bash\nexit {0 if mounted else 1}\n")
    (bin_dir / "mountpoint").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUCLUSTER_LOG": str(tmp / "log")}
    return subprocess.run([require_tool("bash"), str(path)], env=env, capture_output=True, text=True, timeout=60)


def test_l1_each_slurm_team_gets_a_group_of_its_users_on_every_node() -> None:
    """slurm-p5's teams research (alice, bob) and applied (carol, bob): groups named like the teams, gid from the
    team's name (as kubernetes.teams' default), in the declared users' file every node fetches and applies."""
    ctx = SlurmContext.of(load_spec(read_stack_file("slurm-p5")["config"], stack="slurm-p5").cluster)
    assert ctx.identity is not None and isinstance(ctx.identity.source, DeclaredIdentity)
    declared = users_contract.parse(json.loads(users_json(ctx.identity.source)))
    assert {(g.name, g.gid) for g in declared.groups} >= {("research", RESEARCH_GID), ("applied", APPLIED_GID)}
    assert {u.name: u.groups for u in declared.users} == {
        "alice": ("hpc-admins", "research", "vision"),
        "bob": ("applied", "llm", "research"),
        "carol": ("applied", "llm"),
    }


def test_l1_the_head_node_makes_each_teams_directory_2770_with_its_group(p5_files: dict[str, str], tmp_path: Path) -> None:
    if os.geteuid() != 0:  # the head node runs it as root (a no-squash client): chown to the teams' gids needs root
        (pytest.fail if IN_CI else pytest.skip)("the script chowns to the teams' gids: it needs root (CI runs as root)")
    script = p5_files[TEAM_DIRECTORIES_SCRIPT]
    assert f"{TEAM_DIRECTORIES_SCRIPT} ||" in p5_files[HEAD_SETUP]  # after the mount, the head setup runs it
    result = run(script, tmp_path, teams=p5_files[TEAM_DIRECTORIES_LIST])
    assert result.returncode == 0, result.stdout + result.stderr
    root = tmp_path / "fsx"
    assert owner_mode(root / "teams") == (0, 0, "755")
    assert owner_mode(root / "teams" / "research") == (0, RESEARCH_GID, "2770")
    assert owner_mode(root / "teams" / "applied") == (0, APPLIED_GID, "2770")
    data = root / "teams" / "research" / "ckpt.pt"
    data.write_text("weights")
    os.chown(data, 10001, RESEARCH_GID)
    os.chmod(root / "teams" / "research", 0o777)  # someone widened it: the next run puts 2770 back, contents untouched
    again = run(script, tmp_path)  # the list as it is
    assert again.returncode == 0 and owner_mode(root / "teams" / "research")[2] == "2770"
    assert data.read_text() == "weights" and owner_mode(data)[:2] == (10001, RESEARCH_GID)


def test_l1_nothing_is_made_when_the_file_system_is_not_mounted(p5_files: dict[str, str], tmp_path: Path) -> None:
    result = run(p5_files[TEAM_DIRECTORIES_SCRIPT], tmp_path, mounted=False, teams=p5_files[TEAM_DIRECTORIES_LIST])
    assert result.returncode == 1 and not (tmp_path / "fsx" / "teams").exists()
    assert "is not mounted" in (tmp_path / "log" / "team-directories.log").read_text()


def test_l1_a_team_added_changes_the_live_list_not_the_script(p5_files: dict[str, str], tmp_path: Path) -> None:
    """The teams are the live list's lines: the script, the units and everything else the head node fetches pinned
    are the same with a team more; the path unit runs the script when the list changes; the new team's directory is
    made from the new list by the same script."""
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("the script chowns to the teams' gids: it needs root (CI runs as root)")
    assert TEAM_DIRECTORIES_LIST in LIVE_PATHS
    assert (
        f"PathChanged={TEAM_DIRECTORIES_LIST}\nUnit={TEAM_DIRECTORIES_UNIT}"
        in p5_files[f"/etc/systemd/system/{TEAM_DIRECTORIES_PATH_UNIT}"]
    )
    assert f"systemctl enable --now {TEAM_DIRECTORIES_PATH_UNIT}" in p5_files[HEAD_SETUP]
    one = [f"/teams/{d.team}" for d in team_directories(ctx([{"name": "research", "users": ["alice"]}]))]
    two = team_directories(ctx([{"name": "research", "users": ["alice"]}, {"name": "speech", "users": ["bob"]}]))
    assert one == ["/teams/research"] and [d.path for d in two] == ["/teams/research", "/teams/speech"]
    script = p5_files[TEAM_DIRECTORIES_SCRIPT]
    assert "research" not in script and "applied" not in script
    lines = p5_files[TEAM_DIRECTORIES_LIST] + f"/teams/speech 0 {two[1].gid} 2770 speech\n"
    assert run(script, tmp_path, teams=lines).returncode == 0
    assert owner_mode(tmp_path / "fsx" / "teams" / "speech") == (0, two[1].gid, "2770")


def test_l1_a_line_that_is_not_a_team_directory_is_not_acted_on(p5_files: dict[str, str], tmp_path: Path) -> None:
    """Whatever the list says, the script makes nothing but ``/teams/<name>`` with numeric ids and an octal mode: a
    path out of the file system, a nested or dotted one, a name for an id or a bad mode is logged and skipped."""
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("the script chowns to the teams' gids: it needs root (CI runs as root)")
    hostile = [
        "/../../etc 0 0 777 x",
        "/teams/../../etc 0 0 777 x",
        "/teams/a/b 0 0 2770 x",
        "/teams/ok root 0 2770 x",
        "/teams/ok2 0 0 rwx x",
        "/etc 0 0 2770 x",
    ]
    result = run(p5_files[TEAM_DIRECTORIES_SCRIPT], tmp_path, teams="\n".join(hostile) + "\n/teams/good 0 0 2770 good\n")
    assert result.returncode == 1
    made = sorted(p.name for p in (tmp_path / "fsx" / "teams").iterdir())
    assert made == ["good"] and not (tmp_path / "etc").exists() and not (tmp_path / "fsx" / "etc").exists()
    log = (tmp_path / "log" / "team-directories.log").read_text()
    assert log.count("not a team directory line, skipped") == len(hostile)


def ctx(teams: list[dict[str, Any]], identity: dict[str, Any] = IDENTITY_DECLARED) -> SlurmContext:
    config = make_config(group(name="p5", maxSize=4), slurm={"identity": identity, "accounting": {}, "teams": teams})
    return SlurmContext.of(load_spec(config, stack="teams").cluster)


def test_l1_a_declared_group_named_like_the_team_is_its_group() -> None:
    identity = {**IDENTITY_DECLARED, "groups": [*IDENTITY_DECLARED.get("groups", []), {"name": "research", "gid": 7000}]}
    c = ctx([{"name": "research", "users": ["alice"]}], identity)
    assert [(d.path, d.uid, d.gid, d.mode) for d in team_directories(c)] == [("/teams/research", 0, 7000, "2770")]
    assert isinstance(c.identity.source if c.identity else None, DeclaredIdentity)


@pytest.mark.parametrize(
    ("teams", "identity", "code", "fragment"),
    [
        ([{"name": "admins", "users": ["alice"]}], {"adminGroup": "admins", "groups": [{"name": "admins", "gid": 5000}]},
         "team-group-admin", "would have sudo"),
        ([{"name": "alice", "users": ["bob"]}], {}, "team-group-taken", "user 'alice''s private group"),
        ([{"name": "research", "users": ["alice"]}], {"groups": [{"name": "x", "gid": RESEARCH_GID}]},
         "team-group-gid", f"gid {RESEARCH_GID}"),
        ([{"name": "docker", "users": ["alice"]}], {}, "team-group-reserved", "'docker'"),
    ],
)  # fmt: skip
def test_l1_a_team_group_that_would_grant_or_collide_is_refused(
    teams: list[dict[str, Any]], identity: dict[str, Any], code: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as err:
        ctx(teams, {**IDENTITY_DECLARED, **identity})
    [finding] = [f for f in err.value.findings if f.code == code]
    assert finding.path == "gpucluster:slurm.teams[0].name" and finding.value == teams[0]["name"]
    assert fragment in finding.message and finding.fix


def test_l1_a_directory_team_gets_no_group_or_directory_here() -> None:
    """With a directory the groups are the directory's: no local group, no directory made by the head node."""
    c = ctx([{"name": "research", "directoryGroups": ["ml"]}], IDENTITY_DIRECTORY)
    assert team_directories(c) == ()


def test_systemd_reads_the_team_directories_units(p5_files: dict[str, str], tmp_path: Path) -> None:
    """The service and its path unit as systemd reads them (``systemd-analyze verify``), the script the service runs
    put where the unit names it under the test's root."""
    analyze = require_tool("systemd-analyze")
    script = tmp_path / "gpucluster-team-directories"
    script.write_text(p5_files[TEAM_DIRECTORIES_SCRIPT])
    script.chmod(0o755)
    paths = []
    for unit in (TEAM_DIRECTORIES_UNIT, TEAM_DIRECTORIES_PATH_UNIT):
        path = tmp_path / unit
        path.write_text(p5_files[f"/etc/systemd/system/{unit}"].replace(TEAM_DIRECTORIES_SCRIPT, str(script)))
        paths.append(str(path))
    done = subprocess.run([analyze, "verify", "--man=no", *paths], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    service = p5_files[f"/etc/systemd/system/{TEAM_DIRECTORIES_UNIT}"]
    assert "ReadWritePaths=-/fsx/teams /var/log/gpucluster\n" in service and "ProtectSystem=strict" in service
