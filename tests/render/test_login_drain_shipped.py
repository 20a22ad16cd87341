"""The login node's user data ships the drain program (render/slurm/login.py's login_program_files): decoded from
the gzipped cloud-config as a node would read it, ``/usr/local/sbin/gpucluster-login-drain`` is 0755, is the module
``gpucluster_agents/boot/login_drain.py`` without its docs (the same syntax tree, tests/render/test_pysource.py's
rule), and runs on its own: ``--help``, and the unit's way of passing the config (a positional path)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import yaml

from gpucluster.render.core import render_cloud_config
from gpucluster.render.slurm.login import DRAIN_PROGRAM, drain_unit, login_cloud_config, login_title
from gpucluster_agents.boot import login_drain
from tests.render.identity_cases import DECLARED
from tests.render.test_login_render import context, inputs
from tests.render.test_pysource import _without_strings


def shipped() -> dict[str, object]:
    ctx = context(DECLARED)
    text = render_cloud_config(login_title(ctx), login_cloud_config(ctx, inputs()), gzipped=True)
    [entry] = [f for f in yaml.safe_load(text)["write_files"] if f["path"] == DRAIN_PROGRAM]
    return entry


def test_the_login_user_data_holds_the_program_as_checked(tmp_path: Path):
    entry = shipped()
    assert entry["permissions"] == "0755" and entry.get("owner", "root:root") == "root:root"
    source = str(entry["content"])
    module = Path(login_drain.__file__).read_text()
    assert _without_strings(ast.parse(source)) == _without_strings(ast.parse(module))
    assert len(source) < len(module)  # the docs are left out
    program = tmp_path / "gpucluster-login-drain"
    program.write_text(source)
    program.chmod(0o755)
    helped = subprocess.run([sys.executable, str(program), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "usage: gpucluster-login-drain" in helped.stdout
    # as the unit starts it: ExecStart=<program> <config>
    assert f"ExecStart={DRAIN_PROGRAM} /etc/gpucluster/login-drain.json" in drain_unit()
    config = tmp_path / "login-drain.json"
    config.write_text(json.dumps({"region": "us-east-1", "asg_name": "c1-login", "hook_name": "h", "grace_seconds": 1}))
    run = [sys.executable, str(program), str(config), "--log", str(tmp_path / "log")]
    bad = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and f"bad config {config}" in bad.stderr
    assert "poll_seconds: required key is missing" in bad.stderr and "grace_seconds: must be" in bad.stderr
