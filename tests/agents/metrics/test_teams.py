"""The head node's per-team figures (gpucluster_agents/metrics/teams.py): ``team-snapshot`` run as its unit runs it,
against stand-in ``sshare``/``sacct``/``squeue`` printing what Slurm prints for its arguments, and the loopback
exporter (``serve --team-snapshot``) that serves them: the series per account, read back by the real
``promtool check metrics``; the file 0640 in the readers' group; that exporter serving nothing else, and the head
exporter on 9400 serving none of them."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from gpucluster_agents.metrics import teams
from tests.agents.metrics import nodes
from tests.agents.metrics.test_exporter import parse, promtool_check
from tests.agents.usage.test_team_usage import ACCOUNTS, SACCT, SSHARE

ACCOUNT = "gpucluster_slurm_account_"
# squeue -O Account:200|,State:20|,tres-alloc:500| (fields padded to their width): research runs a 4-GPU and a 2-GPU
# job and waits on an 8-GPU one; applied runs a CPU-only job (no GPU job); a job of an account outside the file.
SQUEUE = "\n".join(
    f"{a:<200}|{s:<20}|{t:<500}|"
    for a, s, t in (
        ("research", "RUNNING", "cpu=8,mem=64G,node=1,billing=8,gres/gpu=4"),
        ("research", "RUNNING", "cpu=2,node=1,gres/gpu:h100=2"),
        ("research", "PENDING", "cpu=16,node=1,gres/gpu=8"),
        ("applied", "RUNNING", "cpu=4,mem=8G,node=1,billing=4"),
        ("intruder", "RUNNING", "cpu=1,node=1,gres/gpu=8"),
    )
)


def _slurm(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True)
    for name, text in (("sshare", SSHARE), ("sacct", SACCT), ("squeue", SQUEUE)):
        (bin_dir / f"{name}.out").write_text(text + "\n")
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "$@" > "{bin_dir}/{name}.args"\nexec cat "{bin_dir}/{name}.out"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def _metrics(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gpucluster_agents.metrics", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=nodes.env(), check=False)


def write_team_snapshot(tmp_path: Path, accounts: dict | None = None) -> tuple[Path, Path]:
    bin_dir, out = _slurm(tmp_path / "bin"), tmp_path / "run" / "teams.json"
    out.parent.mkdir()
    accounts_file = tmp_path / "accounts.json"
    accounts_file.write_text(json.dumps(accounts or ACCOUNTS))
    args = ("--accounts-file", str(accounts_file), "--slurm-bin-dir", str(bin_dir), "--out", str(out), "--group", "-")
    wrote = _metrics("team-snapshot", *args, "--once")
    assert wrote.returncode == 0, wrote.stderr
    return bin_dir, out


def _by_account(samples: list[tuple[dict[str, str], float]]) -> dict[str, float]:
    return {labels["account"] + (f" {labels['state']}" if "state" in labels else ""): v for labels, v in samples}


def test_each_accounts_figures_are_served_on_the_loopback_exporter_only(tmp_path: Path) -> None:
    bin_dir, out = write_team_snapshot(tmp_path)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and out.stat().st_gid == os.getgid()  # not world-readable
    assert "--all" in (bin_dir / "sshare.args").read_text().split()  # every account, as SlurmUser sees them
    assert "--allusers" in (bin_dir / "sacct.args").read_text().split()
    assert (bin_dir / "squeue.args").read_text().split()[:3] == ["-h", "-a", "-O"]

    served = _metrics("print", "--no-gpus", "--team-snapshot", str(out))
    assert served.returncode == 0, served.stderr
    for line in promtool_check(served.stdout):
        raise AssertionError(f"promtool: {line}")
    got = parse(served.stdout)
    assert {n for n in got if not n.startswith(ACCOUNT)} == {
        "gpucluster_metrics_collector_success",
        "gpucluster_metrics_scrape_duration_seconds",
    }  # nothing of the node, Slurm's nodes or the agent: this exporter serves the teams' figures alone
    assert got["gpucluster_metrics_collector_success"] == [({"collector": "teams"}, 1.0)]
    assert _by_account(got[ACCOUNT + "gpu_seconds"]) == {"research": 4 * 3600, "applied": 3600}  # sacct, the report's window
    assert _by_account(got[ACCOUNT + "cost_usd"]) == {"research": 48.0, "applied": 12.0}  # at the file's $12
    fairshare = {(lb["account"], lb["user"]): v for lb, v in got[ACCOUNT + "fairshare"]}
    assert fairshare == {("research", "alice"): 0.25, ("applied", "bob"): 1.0}  # each member's, in their account
    assert _by_account(got[ACCOUNT + "effective_usage"]) == {"research": 0.9, "applied": 0.0}
    assert _by_account(got[ACCOUNT + "gpu_jobs"]) == {
        "research running": 2,
        "research pending": 1,
        "applied running": 0,  # its job holds no GPU
        "applied pending": 0,
    }  # the account outside the file is no label
    assert _by_account(got[ACCOUNT + "gpus_allocated"]) == {"research": 6, "applied": 0}
    assert _by_account(got[ACCOUNT + "gpu_guarantee"]) == {"research": 6, "applied": 2}


def test_the_head_exporter_on_9400_serves_no_team_figure(tmp_path: Path) -> None:
    """The exporter every job reaches, given the head snapshot as its unit does, names no account (a guard: the
    teams' figures have their own file, which the head snapshot's reader never reads)."""
    write_team_snapshot(tmp_path)
    bin_dir, state = nodes.write_slurm(tmp_path / "head-bin"), nodes.write_agent_state(tmp_path / "state")
    head = tmp_path / "run" / "snapshot.json"
    wrote = _metrics("head-snapshot", "--slurm-bin-dir", str(bin_dir), "--agent-state", str(state), "--out", str(head), "--once")
    assert wrote.returncode == 0, wrote.stderr
    served = _metrics(
        "print", "--no-gpus", "--sysfs-root", str(tmp_path), "--lustre-root", str(tmp_path), "--head-snapshot", str(head)
    )
    assert served.returncode == 0 and "gpucluster_slurm_nodes" in served.stdout, served.stderr
    assert ACCOUNT not in served.stdout and "research" not in served.stdout


def test_a_failed_source_or_stale_file_serves_no_team_series(tmp_path: Path) -> None:
    bin_dir, out = write_team_snapshot(tmp_path)
    (bin_dir / "sacct").write_text("#!/bin/sh\necho 'slurmdbd: unreachable' >&2\nexit 1\n")
    wrote = _metrics("team-snapshot", "--accounts-file", str(tmp_path / "accounts.json"), "--slurm-bin-dir", str(bin_dir),
                     "--out", str(out), "--group", "-", "--once")  # fmt: skip
    assert wrote.returncode == 0 and "sacct failed" in wrote.stderr, wrote.stderr
    text = _metrics("print", "--no-gpus", "--team-snapshot", str(out)).stdout
    assert ACCOUNT not in text and 'gpucluster_metrics_collector_success{collector="teams"} 0' in text
    doc = json.loads(out.read_text())
    doc["written"] -= teams.MAX_AGE + 60
    out.write_text(json.dumps(doc))
    stale = _metrics("print", "--no-gpus", "--team-snapshot", str(out)).stdout
    assert ACCOUNT not in stale and 'gpucluster_metrics_collector_success{collector="teams"} 0' in stale


def test_squeue_counts_gpu_jobs_of_the_files_accounts_only() -> None:
    jobs, gpus = teams.parse_squeue(SQUEUE, {"research", "applied"})
    assert jobs == {("research", "running"): 2, ("research", "pending"): 1}
    assert gpus == {"research": 6}
