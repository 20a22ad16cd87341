"""The declared users as data (render/slurm/identity.py): the users file in the artifact bucket, fetched by the node
package's ``gpucluster_agents/boot/users.py`` against a real S3 API (moto's server) and applied by the users program,
both run as the unit runs them (subprocesses, on a temporary root with ``useradd --prefix``) — a user added, a team's
members changed and a user removed reach a node without a new user data; a file the users contract refuses changes
nothing."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest

from gpucluster.load import load_spec
from gpucluster.render.slurm.agent import boot_config
from gpucluster.render.slurm.identity import USERS_KEY, USERS_MAIN, users_bundle
from gpucluster.render.slurm.names import AGENT_PACKAGE_PATH, AWS_HELPER_CONFIG, SlurmContext
from gpucluster.tools.plan.run.stackfile import read_stack_file
from gpucluster_agents.contract.users import USERS_PATH
from tests.conftest import ROOT, require_tool
from tests.render.slurm.test_identity_render import EPOCH, lines, users_root
from tests.render.slurm.test_slurm_render import helper_env

BUCKET = "slurm-p5-artifacts"


def p5_config(change=None) -> dict[str, Any]:
    config = copy.deepcopy(read_stack_file("slurm-p5")["config"])
    if change:
        change(config["gpucluster:slurm"])
    return config


def bundle_of(config: dict[str, Any]) -> str:
    ctx = SlurmContext.of(load_spec(config, stack="slurm-p5").cluster)
    text = users_bundle(ctx.identity)
    assert text is not None
    return text


def node_root(tmp_path: Path) -> Path:
    """A compute node's root: its accounts, the boot helper's config and the package file naming the bucket."""
    root = users_root(tmp_path)
    ctx = SlurmContext.of(load_spec(p5_config(), stack="slurm-p5").cluster)
    config = root / AWS_HELPER_CONFIG.lstrip("/")
    config.parent.mkdir(parents=True)
    config.write_text(boot_config(ctx, compute=True).to_json())
    package = root / AGENT_PACKAGE_PATH.lstrip("/")
    package.parent.mkdir(parents=True, exist_ok=True)
    package.write_text(json.dumps({"bucket": BUCKET, "key": "agent/x.zip", "sha256": "0" * 64, "dest": "/opt/gpucluster/lib"}))
    return root


@pytest.fixture
def s3(moto_endpoint, aws_env):
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", data=b"", method="POST"), timeout=10)
    client = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_endpoint)
    client.create_bucket(Bucket=BUCKET)
    return client


def fetch(moto: str, root: Path) -> subprocess.CompletedProcess[str]:
    """The unit's first step: ``python3 -I -c USERS_MAIN <package> fetch <helper config>`` (without ``-I``, which
    would drop the test's environment), this checkout's package, moto's S3, ``root`` for every path."""
    env = helper_env(moto, root / "munge.key", root)
    argv = [sys.executable, "-c", USERS_MAIN, str(ROOT), "fetch", str(root / AWS_HELPER_CONFIG.lstrip("/"))]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False, cwd="/")


def apply(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The unit's second step: the users program of the node package (a timer's run: the last run's record kept)."""
    for tool in ("useradd", "usermod", "groupadd", "shellcheck"):
        require_tool(tool)
    env = {
        "PATH": os.environ["PATH"],
        "GPUCLUSTER_ROOT": str(root),
        "SOURCE_DATE_EPOCH": EPOCH,
        "GPUCLUSTER_AGENT_LIB": str(ROOT),
        "GPUCLUSTER_PYTHON": sys.executable,
    }
    program = ROOT / "gpucluster_agents/boot/users.sh"
    return subprocess.run(["bash", str(program), *args], env=env, capture_output=True, text=True, check=False)


def add_dave_and_move_bob(slurm: dict[str, Any]) -> None:
    """A new user in team research (its POSIX group), and bob into the vision group."""
    slurm["identity"]["users"].append({"name": "dave", "uid": 10004, "groups": ["llm"]})
    slurm["identity"]["users"][1]["groups"] = ["llm", "vision"]
    slurm["teams"][0]["users"].append("dave")


def group_members(root: Path, name: str) -> list[str]:
    (line,) = [g for g in lines(root, "group") if g.startswith(f"{name}:")]
    return [m for m in line.rsplit(":", 1)[1].split(",") if m]


def test_a_users_change_reaches_a_running_node_from_the_bucket(tmp_path, moto_endpoint, s3):
    """slurm-p5's users, then a user added and a team's and a group's members changed, then a user removed: each time
    the stack rewrites the object in place, and the node's fetch and users program (its timer) apply it."""
    root = node_root(tmp_path)
    s3.put_object(Bucket=BUCKET, Key=USERS_KEY, Body=bundle_of(p5_config()).encode())
    assert fetch(moto_endpoint, root).returncode == 0
    first = apply(root)
    assert first.returncode == 0, first.stderr
    assert {p.split(":")[0] for p in lines(root, "passwd")} == {"root", "alice", "bob", "carol"}
    assert group_members(root, "vision") == ["alice"] and "dave" not in group_members(root, "research")

    s3.put_object(Bucket=BUCKET, Key=USERS_KEY, Body=bundle_of(p5_config(add_dave_and_move_bob)).encode())
    got = fetch(moto_endpoint, root)
    assert got.returncode == 0 and USERS_PATH in got.stdout, got.stdout + got.stderr
    second = apply(root)
    assert second.returncode == 0, second.stderr
    assert "user dave (10004) made" in second.stderr
    assert "dave:x:10004:10004:gpucluster-managed:/home/dave:/bin/bash" in lines(root, "passwd")
    assert sorted(group_members(root, "vision")) == ["alice", "bob"]
    assert "dave" in group_members(root, "research")  # the team's POSIX group

    # the timer's next run with the same file: nothing to do, nothing touched
    before = {n: lines(root, n) for n in ("passwd", "group", "shadow")}
    again = fetch(moto_endpoint, root), apply(root)
    assert again[0].returncode == 0 and "did not change" in again[0].stdout
    assert again[1].returncode == 0 and again[1].stderr == ""
    assert {n: lines(root, n) for n in before} == before

    def remove_carol(slurm: dict[str, Any]) -> None:
        add_dave_and_move_bob(slurm)
        slurm["identity"]["users"] = [u for u in slurm["identity"]["users"] if u["name"] != "carol"]
        for team in slurm["teams"]:
            team["users"] = [u for u in team["users"] if u != "carol"]

    s3.put_object(Bucket=BUCKET, Key=USERS_KEY, Body=bundle_of(p5_config(remove_carol)).encode())
    assert fetch(moto_endpoint, root).returncode == 0
    third = apply(root)
    assert third.returncode == 0 and "user carol is no longer declared: locked" in third.stderr, third.stderr
    assert [s for s in lines(root, "shadow") if s.startswith("carol:")] == ["carol:!:20454:::::1:"]


def _bundle(path: str = USERS_PATH, permissions: str = "0644", content: Any = None) -> str:
    good = json.loads(bundle_of(p5_config()))["files"][0]["content"]
    return json.dumps({"files": [{"path": path, "permissions": permissions, "content": good if content is None else content}]})


def _root_user() -> str:
    doc = json.loads(json.loads(bundle_of(p5_config()))["files"][0]["content"])
    doc["users"][0]["uid"] = 0
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_bundle(content=_root_user()), "users[0].uid: uid 0 is a system account's range"),
        (_bundle(permissions="0755"), "only /etc/gpucluster/users.json, mode 0644"),
        (_bundle(path="/usr/local/sbin/gpucluster-users"), "only /etc/gpucluster/users.json, mode 0644"),
        (_bundle(content="not json"), "refusing s3://"),
        ("[]", "not a files bundle"),
    ],
    ids=["uid-0", "a-program-mode", "another-path", "not-json", "not-a-bundle"],
)
def test_a_users_object_the_contract_refuses_is_not_written(tmp_path, moto_endpoint, s3, body, expected):
    """Nothing pins the object (that is the point of it), so the node parses it strictly before it writes anything;
    the file the node had stays."""
    root = node_root(tmp_path)
    s3.put_object(Bucket=BUCKET, Key=USERS_KEY, Body=bundle_of(p5_config()).encode())
    assert fetch(moto_endpoint, root).returncode == 0
    kept = (root / USERS_PATH.lstrip("/")).read_text()
    s3.put_object(Bucket=BUCKET, Key=USERS_KEY, Body=body.encode())
    refused = fetch(moto_endpoint, root)
    assert refused.returncode != 0 and expected in refused.stderr, refused.stderr
    assert (root / USERS_PATH.lstrip("/")).read_text() == kept
    assert not (root / "usr/local/sbin/gpucluster-users").exists()


def test_a_users_file_the_contract_refuses_changes_no_account(tmp_path):
    """The program parses the file again (it may have been written by other means): a system group for a user, and
    nothing is made."""
    root = users_root(tmp_path)
    doc = json.loads(json.loads(bundle_of(p5_config()))["files"][0]["content"])
    doc["groups"].append({"name": "sudo", "gid": 27})
    doc["users"][1]["groups"].append("sudo")
    (root / "etc/gpucluster").mkdir(parents=True)
    (root / USERS_PATH.lstrip("/")).write_text(json.dumps(doc))
    result = apply(root)
    assert result.returncode == 1, result.stderr
    assert "'sudo' is a system account's or group's name" in result.stderr and "no account changed" in result.stderr
    assert lines(root, "passwd") == ["root:x:0:0:root:/root:/bin/bash"]
    assert lines(root, "group") == ["root:x:0:"]
