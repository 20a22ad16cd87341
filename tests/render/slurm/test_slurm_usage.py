"""The head node's daily usage report: its units (read by the real systemd-analyze), the command they run (parsed by
the agent's own command line) and the head node's right to write the daily file (that prefix, PutObject only)."""

from __future__ import annotations

import configparser
import dataclasses
import json
import shlex
import subprocess
from pathlib import Path

from gpucluster.render.iam import slurm_head_policy
from gpucluster.render.slurm.usage import (
    TEAM_USAGE_DIR,
    TEAM_USAGE_SERVICE,
    TEAM_USAGE_TIMER,
    USAGE_PREFIX,
    USAGE_SERVICE,
    USAGE_TIMER,
    team_usage_files,
    usage_files,
)
from gpucluster_agents.usage import cli, show
from tests.conftest import require_tool
from tests.render.identity_cases import DECLARED


def _unit(text: str) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=True, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    unit.read_string(text)
    return unit


def test_the_units_pass_systemd_analyze_and_run_yesterdays_report_as_slurm(tmp_path: Path) -> None:
    files = {Path(f.path).name: f.text() for f in usage_files("eu-west-1")}
    assert set(files) == {USAGE_SERVICE, USAGE_TIMER}
    service, timer = _unit(files[USAGE_SERVICE]), _unit(files[USAGE_TIMER])
    assert (service["Service"]["User"], service["Service"]["Type"]) == ("slurm", "oneshot")
    assert "AWS_DEFAULT_REGION=eu-west-1" in files[USAGE_SERVICE]
    assert {"slurmdbd.service", "network-online.target"} <= set(service["Unit"]["After"].split())
    assert service["Service"]["ProtectSystem"] == "strict" and service["Service"]["Restart"] == "on-failure"
    assert service["Service"]["RestartPreventExitStatus"] == str(cli.EXIT_USAGE)  # a bad file is not retried
    assert timer["Timer"]["Persistent"] == "true" and timer["Install"]["WantedBy"] == "timers.target"
    # the command line is one the agent accepts, for the whole of yesterday, uploaded
    argv = shlex.split(service["Service"]["ExecStart"])
    assert argv[:5] == ["/usr/bin/python3", "-E", "-s", "-m", "gpucluster_agents"] and argv[5] == "usage"
    assert service["Service"]["WorkingDirectory"] == "/opt/gpucluster/lib"  # the package's directory: sys.path[0]
    args = cli._parser().parse_args(argv[6:])
    assert (args.since, args.until, args.upload, args.file) == ("yesterday", "yesterday", True, "/etc/gpucluster/accounts.json")
    # systemd reads both without a complaint (the command moved to one that exists here)
    analyze = require_tool("systemd-analyze")
    for name, text in files.items():
        (tmp_path / name).write_text(text.replace("/usr/bin/python3 -E -s -m gpucluster_agents", "/bin/true"))
    verify = subprocess.run(
        [analyze, "verify", "--man=no", str(tmp_path / USAGE_TIMER), str(tmp_path / USAGE_SERVICE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (verify.returncode, verify.stderr) == (0, ""), verify.stderr
    (tmp_path / USAGE_TIMER).write_text(files[USAGE_TIMER].replace("OnCalendar=", "OnCalender="))  # the check can fail
    bad = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / USAGE_TIMER)], capture_output=True, text=True)
    assert "Unknown key" in bad.stderr


def test_the_head_node_may_only_put_objects_under_the_usage_prefix() -> None:
    arns = {
        "secret_arn": "arn:aws:secretsmanager:::s",
        "bundle_arn": "arn:aws:s3:::b/agent",
        "node_maps_arn": "arn:aws:s3:::b/node-maps/*",
    }
    without = slurm_head_policy(**arns)
    assert not [s for s in without["Statement"] if "Usage" in s["Sid"]]
    usage = [
        s for s in slurm_head_policy(**arns, usage_arn=f"arn:aws:s3:::b/{USAGE_PREFIX}*")["Statement"] if "Usage" in s["Sid"]
    ]
    assert usage == [
        {"Sid": "WriteDailyUsageReports", "Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/usage/*"}
    ]


def test_a_head_node_with_teams_gets_the_daily_report_and_its_contract_reads_back() -> None:
    from gpucluster.render.slurm.accounts import ACCOUNTS_PATH
    from gpucluster_agents.usage.policy import parse_policy
    from tests.render.slurm.test_slurm_teams_render import APPLIED, RESEARCH, ctx_of, head_of

    files = head_of(ctx_of(RESEARCH, APPLIED))
    assert f"/etc/systemd/system/{USAGE_SERVICE}" in files and f"/etc/systemd/system/{USAGE_TIMER}" in files
    assert f"systemctl enable --now {USAGE_TIMER}" in files["setup"].splitlines()
    # the report reads the rendered contract: the p5 partition's price per GPU-hour and the bucket
    policy = parse_policy(json.loads(files[ACCOUNTS_PATH]))
    assert policy.cluster == "teams" and list(policy.prices) == ["p5"] and policy.prices["p5"] > 0
    assert policy.target is not None and policy.target.key("2026-11-25") == "usage/2026-11-25.json"
    assert policy.target.bucket == "artifacts-bucket"
    without = head_of(ctx_of())
    assert f"/etc/systemd/system/{USAGE_TIMER}" not in without and USAGE_TIMER not in without["setup"]


def test_the_team_usage_units_pass_systemd_analyze_and_publish_as_root_into_home_only(tmp_path: Path) -> None:
    """Root (only root gives a file to a group it is not in, on NFS), after the accounts and the users, with ``/home``
    mounted (never into the head node's own disk under it); the sandbox leaves it nothing to write but the reports."""
    files = {Path(f.path).name: f.text() for f in team_usage_files()}
    assert set(files) == {TEAM_USAGE_SERVICE, TEAM_USAGE_TIMER}
    service, timer = _unit(files[TEAM_USAGE_SERVICE]), _unit(files[TEAM_USAGE_TIMER])
    assert "User" not in service["Service"] and service["Unit"]["RequiresMountsFor"] == "/home"
    assert {"slurmdbd.service", "gpucluster-accounts.service", "gpucluster-users.service"} <= set(
        service["Unit"]["After"].split()
    )
    sandbox = {k: service["Service"][k] for k in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "ReadWritePaths")}
    assert sandbox == {
        "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "read-only", "ReadWritePaths": TEAM_USAGE_DIR,
    }  # fmt: skip
    assert service["Service"]["ExecStartPre"] == f"+/usr/bin/install -d -o root -g root -m 0711 {TEAM_USAGE_DIR}"
    argv = shlex.split(service["Service"]["ExecStart"])
    assert argv[5:] == ["team-usage", "publish", "--dir", TEAM_USAGE_DIR, "--file", "/etc/gpucluster/accounts.json"]
    assert TEAM_USAGE_DIR == "/home/.gpucluster-usage" == show.DEFAULT_DIR  # where the login nodes' program looks
    assert (timer["Timer"]["OnUnitActiveSec"], timer["Install"]["WantedBy"]) == ("15min", "timers.target")
    analyze = require_tool("systemd-analyze")
    for name, text in files.items():
        (tmp_path / name).write_text(text.replace("/usr/bin/python3 -E -s -m gpucluster_agents", "/bin/true"))
    verify = subprocess.run(
        [analyze, "verify", "--man=no", str(tmp_path / TEAM_USAGE_TIMER), str(tmp_path / TEAM_USAGE_SERVICE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (verify.returncode, verify.stderr) == (0, ""), verify.stderr


def test_team_reports_need_teams_accounting_and_a_shared_home() -> None:
    """The head node's timer and the login nodes' ``gpucluster-usage`` come together, only where both nodes mount
    ``/home`` (the reports' one place) and there are teams."""
    from gpucluster.render.slurm.head import head_files, head_setup
    from gpucluster.render.slurm.home import HomeMount
    from gpucluster.render.slurm.login import PROFILE, LoginInputs, login_files
    from tests.render.slurm.test_slurm_teams_render import APPLIED, RESEARCH, ctx_of, head_of

    ctx = ctx_of(RESEARCH, APPLIED)
    assert f"/etc/systemd/system/{TEAM_USAGE_TIMER}" not in head_of(ctx)  # no /home
    home = HomeMount("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com")
    files = {Path(f.path).name: f for f in head_files(*_with_home(ctx, home))}
    assert TEAM_USAGE_TIMER in files and TEAM_USAGE_SERVICE in files
    assert f"systemctl enable --now {TEAM_USAGE_TIMER}" in head_setup(*_with_home(ctx, home)).splitlines()
    without_teams = {Path(f.path).name for f in head_files(*_with_home(ctx_of(), home))}
    assert TEAM_USAGE_TIMER not in without_teams
    login = dataclasses.replace(ctx, identity=DECLARED)
    programs = {f.path: f for f in login_files(login, LoginInputs("us-east-1", "a", "h", 60, home=home))}
    program = programs["/usr/local/bin/gpucluster-usage"]
    assert program.permissions == "0755" and program.text().startswith("#!/usr/bin/python3 -I\n")
    compile(program.text(), "gpucluster-usage", "exec")  # the docs left out, still a program
    assert "gpucluster-usage" in programs[PROFILE].text()  # the login banner names it
    bare = {f.path: f for f in login_files(login, LoginInputs("us-east-1", "a", "h", 60))}
    assert "/usr/local/bin/gpucluster-usage" not in bare and "gpucluster-usage" not in bare[PROFILE].text()


def _with_home(ctx, home):
    from gpucluster.render.slurm.agent import AgentBundle
    from gpucluster.render.slurm.head import HeadInputs
    from tests.render.slurm.test_slurm_teams_render import LaunchTarget, agent_config

    targets = {g.name: LaunchTarget("lt-0123456789abcdef0", ("subnet-0123456789abcdef0",)) for g in ctx.node_groups}
    inputs = HeadInputs("vol-0", AgentBundle("artifacts-bucket", "key", "0" * 64), agent_config(ctx, targets), home=home)
    return ctx, inputs
