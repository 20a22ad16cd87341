"""Each Slurm team's group and its directory on Lustre: with declared users a team gets a POSIX group named like it
(its members the team's users, on every node through the declared users' file), and the head node — the file system's
no-squash client — makes ``/fsx/teams/<team>``, root and the team's group, 2770. The head node's script is run for
real as root (real mkdir, chown, chmod and stat) on a directory standing in for the mount, ``mountpoint`` a stub.
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
from gpucluster.render.slurm.head import TEAM_DIRECTORIES_SCRIPT, team_directories
from gpucluster.render.slurm.identity import users_json
from gpucluster.render.slurm.names import HEAD_SETUP, SlurmContext
from gpucluster.resolve.slurm.identity import DeclaredIdentity
from gpucluster.tools.plan.run.stackfile import read_stack_file
from gpucluster_agents.contract import users as users_contract
from tests.conftest import IDENTITY_DECLARED, IDENTITY_DIRECTORY, IN_CI, group, make_config, require_tool
from tests.render.slurm.test_head_files import rendered

RESEARCH_GID = TeamPosixSpec().resolve("research").gid
APPLIED_GID = TeamPosixSpec().resolve("applied").gid


@pytest.fixture(scope="module")
def p5_files() -> dict[str, str]:
    return {e["path"]: e["content"] for e in json.loads(rendered("slurm-p5").bundle)["files"]}


def owner_mode(path: Path) -> tuple[int, int, str]:
    st = path.stat()
    return st.st_uid, st.st_gid, f"{stat.S_IMODE(st.st_mode):o}"


def run(script: str, tmp: Path, *, mounted: bool = True) -> subprocess.CompletedProcess[str]:
    """The script with its mount point moved to tmp/fsx, ``mountpoint`` answering ``mounted``."""
    root = tmp / "fsx"
    root.mkdir(exist_ok=True)
    path = tmp / "team-directories.sh"
    path.write_text(script.replace("mount_point=/fsx\n", f"mount_point={root}\n", 1))
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
    result = run(script, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    root = tmp_path / "fsx"
    assert owner_mode(root / "teams") == (0, 0, "755")
    assert owner_mode(root / "teams" / "research") == (0, RESEARCH_GID, "2770")
    assert owner_mode(root / "teams" / "applied") == (0, APPLIED_GID, "2770")
    data = root / "teams" / "research" / "ckpt.pt"
    data.write_text("weights")
    os.chown(data, 10001, RESEARCH_GID)
    os.chmod(root / "teams" / "research", 0o777)  # someone widened it: the next run puts 2770 back, contents untouched
    again = run(script, tmp_path)
    assert again.returncode == 0 and owner_mode(root / "teams" / "research")[2] == "2770"
    assert data.read_text() == "weights" and owner_mode(data)[:2] == (10001, RESEARCH_GID)


def test_l1_nothing_is_made_when_the_file_system_is_not_mounted(p5_files: dict[str, str], tmp_path: Path) -> None:
    result = run(p5_files[TEAM_DIRECTORIES_SCRIPT], tmp_path, mounted=False)
    assert result.returncode == 1 and not (tmp_path / "fsx" / "teams").exists()
    assert "is not mounted" in (tmp_path / "log" / "team-directories.log").read_text()


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
