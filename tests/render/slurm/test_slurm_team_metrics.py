"""The head node's units for each team's figures (gpucluster/render/slurm/team_metrics.py): read by systemd-analyze,
the readers' group made by the real systemd-sysusers, both commands run as the units write them (paths swapped for
fixtures), and the stack's head node: the files there only where the cluster has teams, accounting and a collector,
the collector scraping the loopback exporter, the guard naming its port."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from gpucluster.render.monitoring.collection import PROMETHEUS_CONFIG_PATH, TEAMS_JOB
from gpucluster.render.slurm.guard import IMDS_GUARD, TEAM_METRICS_PORT
from gpucluster.render.slurm.names import HEAD_SETUP
from gpucluster.render.slurm.team_metrics import (
    TEAM_GROUP,
    TEAM_METRICS_LISTEN,
    TEAM_METRICS_SOCKET,
    TEAM_METRICS_UNIT,
    TEAM_SNAPSHOT,
    TEAM_SNAPSHOT_UNIT,
    TEAM_SYSUSERS,
    team_metrics_files,
)
from tests.agents.metrics import nodes
from tests.agents.metrics.test_teams import write_team_snapshot
from tests.conftest import require_tool
from tests.plans import shipped_plan

HEAD = "slurm-p5-slurm-head-files"


def _files() -> dict[str, str]:
    return {Path(f.path).name: f.content for f in team_metrics_files()}


def _exec(unit: str) -> list[str]:
    (line,) = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_units_pass_systemd_analyze_and_the_group_is_made_by_sysusers(tmp_path: Path) -> None:
    analyze, sysusers = require_tool("systemd-analyze"), require_tool("systemd-sysusers")
    files = _files()
    for name in (TEAM_SNAPSHOT_UNIT, TEAM_METRICS_SOCKET, TEAM_METRICS_UNIT):
        (tmp_path / name).write_text(files[name].replace("WorkingDirectory=/opt/gpucluster/lib", f"WorkingDirectory={tmp_path}"))
    for name in (TEAM_SNAPSHOT_UNIT, TEAM_METRICS_SOCKET, TEAM_METRICS_UNIT):
        verify = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / name)], capture_output=True, text=True)
        # units of the head node this machine does not have (slurmctld, the guard) are named, nothing else
        errors = [
            e
            for e in verify.stderr.splitlines()
            if e and not re.search(r"Unit (slurm\w*|gpucluster-imds-guard)\.service not found", e)
        ]
        assert errors == [], verify.stderr
    root, conf = tmp_path / "root", tmp_path / Path(TEAM_SYSUSERS).name
    (root / "etc").mkdir(parents=True)
    conf.write_text(files[Path(TEAM_SYSUSERS).name])
    made = subprocess.run([sysusers, f"--root={root}", str(conf)], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    groups = [ln.split(":") for ln in (root / "etc" / "group").read_text().splitlines()]
    assert [g for g in groups if g[0] == TEAM_GROUP and 0 < int(g[2]) < 1000]  # a system group
    passwd = root / "etc" / "passwd"
    assert not passwd.exists() or TEAM_GROUP not in passwd.read_text()  # and no user of that name


def test_who_runs_what() -> None:
    """The reader is slurm in the readers' group and listens on nothing; the exporter is a dynamic user in that group,
    on its own loopback socket, and does not start where the guard failed."""
    files = _files()
    reader, exporter, socket = files[TEAM_SNAPSHOT_UNIT], files[TEAM_METRICS_UNIT], files[TEAM_METRICS_SOCKET]
    assert {"User=slurm", f"SupplementaryGroups={TEAM_GROUP}", "NoNewPrivileges=yes"} <= set(reader.splitlines())
    assert "--port" not in reader and "--listen" not in reader
    assert {"DynamicUser=yes", f"SupplementaryGroups={TEAM_GROUP}", "NoNewPrivileges=yes"} <= set(exporter.splitlines())
    assert (
        not [ln for ln in exporter.splitlines() if ln.startswith("User=")]
        and "gpucluster-imds-guard.service" in exporter.split("Requires=", 1)[1].split("\n", 1)[0]
    )
    assert [ln for ln in socket.splitlines() if ln.startswith("ListenStream=")] == [f"ListenStream={TEAM_METRICS_LISTEN}"]


def test_both_commands_run_as_written(tmp_path: Path) -> None:
    """The reader's command line (its Slurm and output paths swapped for fixtures) writes the snapshot the exporter's
    command line (``serve`` → ``print``, no systemd socket) serves."""
    bin_dir, _ = write_team_snapshot(tmp_path / "fixture")
    out = tmp_path / "teams.json"
    argv = _exec(_files()[TEAM_SNAPSHOT_UNIT])
    assert argv[:5] == ["/usr/bin/python3", "-E", "-s", "-m", "gpucluster_agents.metrics"]
    swap = {
        "/usr/bin": str(bin_dir),
        TEAM_SNAPSHOT: str(out),
        "/etc/gpucluster/accounts.json": str(tmp_path / "fixture" / "accounts.json"),
    }
    args = [swap.get(a, a) for a in argv[5:]]
    wrote = subprocess.run([sys.executable, "-m", "gpucluster_agents.metrics", *args, "--group", "-", "--once"],
                           capture_output=True, text=True, env=nodes.env(), timeout=60)  # fmt: skip
    assert wrote.returncode == 0, wrote.stderr
    serve = [a for a in _exec(_files()[TEAM_METRICS_UNIT])[5:] if a != "--systemd-socket"]
    assert serve[0] == "serve"
    printed = subprocess.run([sys.executable, "-m", "gpucluster_agents.metrics", "print", *[swap.get(a, a) for a in serve[1:]]],
                             capture_output=True, text=True, env=nodes.env(), timeout=60)  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    assert 'gpucluster_slurm_account_gpus_allocated{account="research"} 6' in printed.stdout


def test_the_head_node_collects_them_on_loopback_behind_the_guard() -> None:
    files = {p.removeprefix(HEAD): t for p, t in shipped_plan("slurm-p5").files.items() if p.startswith(HEAD + "/")}
    assert {f"/etc/systemd/system/{u}" for u in (TEAM_SNAPSHOT_UNIT, TEAM_METRICS_SOCKET, TEAM_METRICS_UNIT)} <= set(files)
    jobs = {j["job_name"]: j for j in yaml.safe_load(files[PROMETHEUS_CONFIG_PATH])["scrape_configs"]}
    assert jobs[TEAMS_JOB]["static_configs"] == [{"targets": [TEAM_METRICS_LISTEN], "labels": {"role": "head"}}]
    assert f",{TEAM_METRICS_PORT} -j" in files[IMDS_GUARD]  # the loopback chain's ports name it
    setup = files[HEAD_SETUP]
    assert f"systemctl enable --now {TEAM_SNAPSHOT_UNIT} {TEAM_METRICS_SOCKET} {TEAM_METRICS_UNIT}" in setup
    assert setup.index(f"systemd-sysusers {TEAM_SYSUSERS}") < setup.index(TEAM_SNAPSHOT_UNIT)
