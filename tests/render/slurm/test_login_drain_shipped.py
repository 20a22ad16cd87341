"""The login node's drain program comes with the node package (render/slurm/login.py): the user data names the
package (its pointer, checked against the sha256 of the bytes the stack uploads) and carries the drain unit, not the
program's source; the unit's own words, run from the package unzipped as systemd runs them from its directory,
start the module that is in the package: ``--help``, and the unit's way of passing the config (a positional path)."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

from gpucluster.render.core import render_cloud_config
from gpucluster.render.slurm.agent import agent_bundle, node_package_file, sha256
from gpucluster.render.slurm.login import DRAIN_CONFIG, DRAIN_UNIT, LOGIN_SETUP, drain_unit, login_cloud_config, login_title
from tests.conftest import require_tool
from tests.render.identity_cases import DECLARED
from tests.render.slurm.test_login_render import context, inputs


def shipped() -> dict[str, str]:
    ctx = context(DECLARED)
    text = render_cloud_config(login_title(ctx), login_cloud_config(ctx, inputs()), gzipped=True)
    return {str(f["path"]): str(f["content"]) for f in yaml.safe_load(text)["write_files"]}


def test_the_login_user_data_names_the_package_and_installs_it_before_the_drain_unit():
    files = shipped()
    pointer = node_package_file()
    assert json.loads(files[pointer.path]) == json.loads(pointer.text())
    assert json.loads(files[pointer.path])["sha256"] == sha256(agent_bundle())
    assert "/usr/local/sbin/gpucluster-login-drain" not in files and "def drain(" not in "".join(files.values())
    assert files[f"/etc/systemd/system/{DRAIN_UNIT}"] == drain_unit()
    setup = files[LOGIN_SETUP]
    assert setup.index("install-agent") < setup.index(f"systemctl enable {DRAIN_UNIT}")


def test_the_units_words_run_the_packages_drain_program(tmp_path: Path):
    lib = tmp_path / "lib"
    zipfile.ZipFile(io.BytesIO(agent_bundle())).extractall(lib)
    unit = drain_unit(agent_lib=str(lib), python=sys.executable)
    keys = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line)
    assert keys["WorkingDirectory"] == str(lib) and keys["ConditionPathIsDirectory"] == str(lib)
    words = shlex.split(keys["ExecStart"])
    assert words[1:5] == ["-E", "-s", "-m", "gpucluster_agents.boot.login_drain"] and words[-1] == DRAIN_CONFIG
    env = {"PATH": "/usr/bin:/bin"}
    helped = subprocess.run([*words[:-1], "--help"], cwd=lib, capture_output=True, text=True, timeout=60, env=env)
    assert helped.returncode == 0 and "usage: gpucluster-login-drain" in helped.stdout
    config = tmp_path / "login-drain.json"
    config.write_text(json.dumps({"region": "us-east-1", "asg_name": "c1-login", "hook_name": "h", "grace_seconds": 1}))
    run = [*words[:-1], str(config), "--log", str(tmp_path / "log")]
    bad = subprocess.run(run, cwd=lib, capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 1 and f"bad config {config}" in bad.stderr
    assert "poll_seconds: required key is missing" in bad.stderr and "grace_seconds: must be" in bad.stderr


def test_the_drain_unit_passes_systemd_analyze(tmp_path: Path):
    analyze = require_tool("systemd-analyze")
    path = tmp_path / DRAIN_UNIT
    path.write_text(drain_unit(agent_lib=str(tmp_path), python=sys.executable))
    verify = subprocess.run([analyze, "verify", "--man=no", str(path)], capture_output=True, text=True, check=False)
    assert verify.returncode == 0 and "gpucluster-login-drain" not in verify.stderr, verify.stderr
