"""Each team's report (``gpucluster-agent team-usage publish``) and the login nodes' ``gpucluster-usage``: sshare's rows
read back, the report's figures per team, the files' owner, group and mode, and what a reader prints. Real Slurm
(22.05, slurmdbd), real users and groups: tests/e2e/test_teams_jobs_e2e.py."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from gpucluster_agents.contract import accounts as contract
from gpucluster_agents.usage import sacct, show, teams
from tests.conftest import IN_CI

NOW = dt.datetime(2026, 12, 7, 12, 0, 0)
D = sacct.DELIMITER
ACCOUNTS = {
    "schema": 1,
    "cluster": "slurm-p5",
    "qos": [
        {"name": "normal", "description": "gpucluster: normal", "priority": 100, "preempt": [], "preempt_mode": "cluster",
         "grp_tres": {}, "max_wall_minutes": None},
    ],
    "accounts": [
        {"name": name, "description": f"gpucluster: team {name}", "fairshare": gpus, "grp_tres": {"gres/gpu": gpus},
         "max_wall_minutes": None, "qos": ["normal"], "default_qos": "normal", "users": users, "groups": []}
        for name, gpus, users in (("research", 6, ["alice"]), ("applied", 2, ["bob"]))
    ],
    "gpu_prices": [{"partition": "p5", "gpus_per_node": 8, "usd_per_gpu_hour": 12.0}],
}  # fmt: skip
SSHARE = (
    "research||6|0.750000|7200|0.900000|\n"
    "research|alice|1|1.000000|7200|0.900000|0.250000\n"
    "applied||2|0.250000|0|0.000000|\n"
    "applied|bob|1|1.000000|0|0.000000|1.000000\n"
    "garbage line\n"
)


def _run(job: str, user: str, account: str, gpus: int, start: str, end: str) -> str:
    elapsed = int((dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds())
    return D.join([job, user, account, "p5", f"cpu=1,gres/gpu={gpus}", str(elapsed), start, end, "COMPLETED"])


SACCT = "\n".join(
    [
        _run("1", "alice", "research", 4, "2026-12-07T09:00:00", "2026-12-07T10:00:00"),  # 4 GPU-hours
        _run("2", "bob", "applied", 2, "2026-12-07T10:00:00", "2026-12-07T10:30:00"),  # 1 GPU-hour
    ]
)


def reports() -> dict[str, dict]:
    return teams.team_reports(contract.parse(ACCOUNTS), teams.parse_shares(SSHARE), SACCT, NOW)


def test_sshare_asks_every_team_and_member_in_columns_both_versions_have():
    argv = teams.sshare_command(["research", "applied"])
    assert argv[1:5] == ["--noheader", "--parsable2", "--all", "--accounts=research,applied"]
    assert argv[5] == "--format=Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"
    rows = teams.parse_shares(SSHARE)
    assert [(r.account, r.user) for r in rows] == [("research", ""), ("research", "alice"), ("applied", ""), ("applied", "bob")]


def test_each_report_holds_its_own_team_only():
    research, applied = reports()["research"], reports()["applied"]
    assert research["guarantee"] == {"gres/gpu": 6} and research["members"] == ["alice"]
    assert research["share"] == {
        "raw_shares": 6,
        "norm_shares": 0.75,
        "raw_usage": 7200,
        "effective_usage": 0.9,
        "fairshare": None,
    }
    assert research["member_shares"] == [
        {"user": "alice", "raw_shares": 1, "norm_shares": 1.0, "raw_usage": 7200, "effective_usage": 0.9, "fairshare": 0.25}
    ]
    assert (research["usage"]["gpu_seconds"], research["usage"]["usd"]) == (4 * 3600, 48.0)
    assert [u["user"] for u in research["usage"]["users"]] == ["alice"]
    assert (applied["usage"]["gpu_seconds"], applied["usage"]["usd"]) == (3600, 12.0)
    assert "alice" not in str(applied) and "bob" not in str(research)  # nothing of the other team's members


def test_publish_gives_each_file_to_its_team_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("publish gives files to root and a group: needs root")
    gids = {"research": 61001}  # applied has no group on this node (a directory without a group of its name)
    monkeypatch.setattr(teams.grp, "getgrnam", lambda name: type("G", (), {"gr_gid": gids[name]})())
    out = tmp_path / "usage"
    out.mkdir(mode=0o755)
    (out / "applied.json").write_text("{}")  # a report from before its group went: not left readable
    (out / "gone.json").write_text("{}")  # a team that left the config
    skipped = teams.publish(str(out), reports())
    assert skipped == ["team applied: no group named 'applied' on this node, so no report (only its members may read it)"]
    assert sorted(p.name for p in out.iterdir()) == ["research.json"]
    st = (out / "research.json").stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o640, 0, 61001)
    assert stat.S_IMODE(out.stat().st_mode) == 0o711  # nobody but root lists which teams there are


def test_what_a_member_reads(tmp_path: Path):
    text = show.as_text(reports()["research"])
    assert text.splitlines()[0].startswith("team research on slurm-p5 (as of 2026-12-07T12:00:00Z)")
    assert "  guarantee      gres/gpu=6; QOS normal; longest job unlimited" in text
    assert "2026-11-07 .. 2026-12-07: 4.0 GPU-hours, $48.0, 1 jobs" in text
    assert "alice" in text and "fair-share factor 0.25" in text
    hostile = {**reports()["research"], "team": "x\x1b[2Jy"}
    assert "\x1b" not in show.as_text(hostile) and "x\\x1b[2Jy" in show.as_text(hostile)


def test_nothing_readable_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert show.main(["--dir", str(tmp_path / "none")]) == 1
    assert "no team report you may read" in capsys.readouterr().err


def test_the_login_nodes_program_runs_alone(tmp_path: Path):
    """What the login node gets (the file without its docs, no package beside it) runs from an empty directory, in
    isolated mode, under the system's Python (which has no gpucluster package: the login node's), and prints a report
    root may read."""
    from gpucluster.render.slurm.usage import usage_program_file

    program = tmp_path / "gpucluster-usage"
    program.write_text(usage_program_file().text())
    program.chmod(0o755)
    out = tmp_path / "reports"
    out.mkdir()
    (out / "research.json").write_text(json.dumps(reports()["research"]))
    proc = subprocess.run(
        ["/usr/bin/python3", "-I", str(program), "--dir", str(out)], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    if os.geteuid() == 0:
        assert proc.returncode == 0 and proc.stdout.startswith("team research on slurm-p5"), proc.stderr
    else:  # not root: it tries the caller's own groups, none of which is "research"
        assert proc.returncode == 1 and "no team report" in proc.stderr
