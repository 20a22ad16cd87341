"""The log shipper on Slurm nodes (gpucluster/render/monitoring/logs.py): its unit read by systemd-analyze and pinned
by a golden, its command run as written from a package directory, and where the head node's and a compute node's
setup start it (after the package, before the Slurm daemons, so systemd stops it after them), and a login node's
(after the package, before sackd); none with the cluster's monitoring off."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import sys
from pathlib import Path

from gpucluster.render.monitoring.logs import LOGS_CONFIG_PATH, LOGS_UNIT, logs_files, logs_unit
from gpucluster.render.slurm.agent import AgentBundle, LaunchTarget, agent_config
from gpucluster.render.slurm.head import HeadInputs, head_files
from gpucluster.render.slurm.names import HEAD_SETUP, NODE_SETUP
from tests.conftest import GOLDEN, ROOT, check_golden, require_tool
from tests.render.slurm.test_slurm_health import CPU, P5, context, part_files

UNIT_PATH = f"/etc/systemd/system/{LOGS_UNIT}"


def test_the_unit_passes_systemd_analyze_and_matches_its_golden(tmp_path: Path, update_golden: bool) -> None:
    text = logs_unit()
    check_golden(GOLDEN / "monitoring" / LOGS_UNIT, text, update_golden)
    unit = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert unit["Before"].split() == ["slurmd.service", "slurmctld.service", "slurmdbd.service"]  # stops after them
    assert unit["After"] == "network-online.target" and unit["StateDirectory"] == "gpucluster-logs"
    assert "User" not in unit and unit["ProtectSystem"] == "strict" and unit["NoNewPrivileges"] == "yes"
    analyze = require_tool("systemd-analyze")
    path = tmp_path / LOGS_UNIT
    path.write_text(logs_unit(agent_lib=str(tmp_path), python=sys.executable))
    verify = subprocess.run([analyze, "verify", "--man=no", str(path)], capture_output=True, text=True, check=False)
    assert (verify.returncode, verify.stderr) == (0, ""), verify.stderr
    path.write_text(path.read_text().replace("StateDirectory=", "StateDirectroy="))  # the check can fail
    assert "Unknown key" in subprocess.run([analyze, "verify", "--man=no", str(path)], capture_output=True, text=True).stderr


def test_the_units_command_reads_the_rendered_config(tmp_path: Path) -> None:
    """The unit's words, run from the repository as systemd runs them from the package directory: the shipper parses
    the config the renderer wrote (``check``)."""
    [config] = [f.text() for f in logs_files("c", "eu-west-1", "compute") if f.path == LOGS_CONFIG_PATH]
    (tmp_path / "logs.json").write_text(config)
    line = next(ln for ln in logs_unit(python=sys.executable).splitlines() if ln.startswith("ExecStart="))
    words = shlex.split(line.removeprefix("ExecStart="))
    assert words[words.index("--config") + 1] == LOGS_CONFIG_PATH
    cmd = [*words[: words.index("run")], "check", "--config", str(tmp_path / "logs.json")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert '"log_group": "/gpucluster/c"' in proc.stdout


def test_compute_nodes_start_the_shipper_after_the_package_and_before_slurmd() -> None:
    ctx = context(P5, CPU)
    files = part_files(ctx, "p5")
    assert files[UNIT_PATH] == logs_unit() and '"name":"slurmd"' in files[LOGS_CONFIG_PATH]
    setup = files[NODE_SETUP]
    enable = f"systemctl enable --now {LOGS_UNIT}"
    assert setup.index("install-agent") < setup.index(enable) < setup.index("systemctl enable --now slurmd")
    off = part_files(dataclasses.replace(ctx, monitoring=None), "p5")
    assert UNIT_PATH not in off and LOGS_CONFIG_PATH not in off and LOGS_UNIT not in off[NODE_SETUP]


def test_the_head_node_starts_the_shipper_before_slurmctld_and_slurmdbd() -> None:
    ctx = context(P5)
    targets = {g.name: LaunchTarget("lt-0123456789abcdef0", ("subnet-0",)) for g in ctx.node_groups}
    inputs = HeadInputs("vol-0", AgentBundle("b", "k", "0" * 64), agent_config(ctx, targets))
    files = {f.path: f.text() for f in head_files(ctx, inputs)}
    assert files[UNIT_PATH] == logs_unit() and '"name":"slurmctld"' in files[LOGS_CONFIG_PATH]
    setup = files[HEAD_SETUP]
    order = [setup.index(s) for s in ("install-agent", f"enable --now {LOGS_UNIT}", "enable --now slurmctld")]
    assert order == sorted(order)
    off = {f.path: f.text() for f in head_files(dataclasses.replace(ctx, monitoring=None), inputs)}
    assert UNIT_PATH not in off and LOGS_CONFIG_PATH not in off and LOGS_UNIT not in off[HEAD_SETUP]


def test_a_login_node_starts_the_shipper_after_the_package_and_before_sackd() -> None:
    """A login node ships its own logs (role ``login``: auth.log, syslog, SSSD, Session Manager's agent), started
    once the node package is installed and before sackd lets anyone submit; none with the cluster's monitoring off."""
    from gpucluster.render.slurm.login import LOGIN_SETUP, login_cloud_config
    from tests.render.identity_cases import DECLARED
    from tests.render.slurm.test_login_render import context as login_context
    from tests.render.slurm.test_login_render import inputs

    ctx = login_context(DECLARED)
    assert ctx.monitoring is not None
    files = {f.path: f.text() for f in login_cloud_config(ctx, inputs()).write_files}
    assert files[UNIT_PATH] == logs_unit() and '"name":"auth","path":"/var/log/auth.log"' in files[LOGS_CONFIG_PATH]
    assert '"log_group":"/gpucluster/c1"' in files[LOGS_CONFIG_PATH] and '"name":"slurmd"' not in files[LOGS_CONFIG_PATH]
    setup = files[LOGIN_SETUP]
    order = [setup.index(s) for s in ("install-agent", f"systemctl enable --now {LOGS_UNIT}", "enable --now gpucluster-sackd")]
    assert order == sorted(order)
    off = {f.path: f.text() for f in login_cloud_config(dataclasses.replace(ctx, monitoring=None), inputs()).write_files}
    assert UNIT_PATH not in off and LOGS_CONFIG_PATH not in off and LOGS_UNIT not in off[LOGIN_SETUP]
