"""Jobs of two teams under the rendered accounting, priority and preemption lines, on the real Slurm 22.05 with
slurmdbd and MariaDB (``slurmdbd.py``): one slurmd node ``gpu-1`` with 8 fake H100s (gres.conf ``File=`` on fake
device files), the accounts contract of two teams applied by the head node's reconcile (``gpucluster-agent accounts reconcile``),
jobs submitted as the teams' users.

The teams: ``research`` (6 GPUs guaranteed, fair share 6) and ``applied`` (2 GPUs, fair share 2, may borrow). Their
declared users (alice, bob) are played by two accounts every Debian machine has (``daemon``, ``bin``): slurmctld needs a
user to exist, and these make no change to the host.

One module, one cluster, phases in order (each test relies on the one before, like the jobs of a day):
1. fair share: research used its GPUs and applied nothing; sshare and sprio put applied's queued job first (usage,
   not shares, decides: research has three times applied's shares);
2. a job above applied's guarantee pends with ``AssocGrpGRES`` while research's runs;
3. a borrowed job (QOS ``borrow``) runs beyond applied's guarantee (the QOS's limit holds it, not the account's) and
   is requeued when research's guaranteed job needs its GPUs;
4. ``gpucluster-agent usage`` (the real sacct) reports the GPU-seconds the jobs ran, as slurmctld timed them;
5. each team's own report (``gpucluster-agent team-usage publish``, root) is read by its member through
   ``gpucluster-usage`` as that member, never by the other team's: the teams' groups exist in a private mount
   namespace's ``/etc/group`` (``namespace.py``), the host's is never changed;
6. the admins' dashboard series (``gpucluster-metrics team-snapshot``): each account's GPU-seconds as sacct recorded
   them, sshare's effective usage, the guarantee, a running and a pending GPU job with their GPUs.

Only the test's copy of slurm.conf makes the scheduler quick (``sched_interval=1``); the accounting, priority and
preemption lines are the renderer's own (``render/slurm/priority.py``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucluster.render.slurm.accounts import accounts_contract
from gpucluster.render.slurm.priority import BILLING, accounting_lines
from tests.conftest import IN_CI, ROOT
from tests.e2e.namespace import MountNamespace
from tests.e2e.slurm_harness import SBATCH, conf_lines, fake_gpus, free_port, node_line
from tests.e2e.slurmdbd import AccountingSlurm, missing_tools, run_dir
from tests.render.slurm.test_slurm_teams_render import ctx_of

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("teams-jobs-slurmdbd")]  # the phases share one cluster, in order

RESEARCH = {"name": "research", "gpuQuota": {"h100": 6}, "users": ["alice"]}
APPLIED = {"name": "applied", "gpuQuota": {"h100": 2}, "users": ["bob"], "borrow": True}
ON_THIS_MACHINE = {"alice": "daemon", "bob": "bin"}
NODE = "gpu-1"
RUNUSER = "/usr/sbin/runuser"
SACCT = "/usr/bin/sacct"
SPRIO = "/usr/bin/sprio"
SSHARE = "/usr/bin/sshare"


slurmd: dict[str, subprocess.Popen[bytes]] = {}
started: dict[str, str] = {}
ran: dict[str, list[int]] = {}
"""The jobs each team ran, as the tests go (the usage report's expected figures)."""


def _contract() -> dict[str, Any]:
    contract = accounts_contract(ctx_of(RESEARCH, APPLIED), None)
    assert contract is not None
    contract["cluster"] = "teams"
    for account in contract["accounts"]:
        account["users"] = [ON_THIS_MACHINE[u] for u in account["users"]]
    return contract


def _slurm_conf(dev: Path) -> str:
    ctx = ctx_of(RESEARCH, APPLIED)
    keys = {
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core",
        "GresTypes": "gpu",
        "SchedulerParameters": "sched_interval=1,bf_interval=1",  # the test's copy only: a quick scheduler
        "SlurmdParameters": "config_overrides",  # 8 CPUs declared on a smaller machine
        "ReturnToService": "2",
        "JobRequeue": "1",
    }
    lines = [*conf_lines(keys), *accounting_lines(ctx, ["h100"])]
    lines.append(node_line(NODE, free_port(), cpus=8, memory_mb=8000, Gres="gpu:h100:8", State="UNKNOWN"))
    lines.append(f"PartitionName=p5 Nodes={NODE} Default=YES MaxTime=INFINITE State=UP {BILLING}")
    return "\n".join(lines) + "\n"


def _apply(slurm: AccountingSlurm, contract: dict[str, Any]) -> None:
    """The contract into slurmdbd, by the head node's own reconcile (``gpucluster-agent accounts reconcile``)."""
    file = slurm.dir / "accounts.json"
    file.write_text(json.dumps(contract))
    file.chmod(0o644)
    argv = [sys.executable, "-m", "gpucluster_agents", "accounts", "reconcile", "--file", str(file)]
    proc = subprocess.run(argv, env={**slurm.env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def cluster() -> Iterator[AccountingSlurm]:
    missing = missing_tools() + [t for t in (RUNUSER, SACCT, SPRIO, SSHARE) if not os.access(t, os.X_OK)]
    if missing or os.geteuid() != 0:
        reason = f"needs root and {', '.join(missing)}" if missing else "slurmd runs jobs as other users: needs root"
        (pytest.fail if IN_CI else pytest.skip)(reason)
    run = run_dir("gcteams-")
    run.chmod(0o755)  # the teams' users read slurm.conf (their sbatch, sacct)
    dev = run / "dev"
    fake_gpus(dev, 8)
    slurm = AccountingSlurm(run, cluster="teams", slurm_conf=_slurm_conf(dev))
    (run / "etc").chmod(0o755)
    (run / "etc" / "gres.conf").write_text(f"Name=gpu Type=h100 File={dev}/nvidia[0-7]\n")
    try:
        slurm.start(ctld=False)
        slurm.add_cluster()
        slurm.start_ctld()  # it registers the cluster's TRES (gres/gpu) the limits name
        _apply(slurm, _contract())
        slurmd[NODE] = slurm.start_slurmd(NODE)
        slurm.wait("gpu-1 idle", lambda: "IDLE" in slurm.node(NODE).get("State", ""), 30, 0.2)
        yield slurm
    finally:
        slurm.cleanup()


def submit(slurm: AccountingSlurm, user: str, gpus: int, *extra: str, seconds: int = 300) -> int:
    """``sbatch`` as ``user`` (one of the teams' machine users): a job holding ``gpus`` GPUs for ``seconds``."""
    argv = [RUNUSER, "-u", user, "--", SBATCH, "--parsable", "--chdir=/tmp", "-o", "/dev/null", "-e", "/dev/null"]
    argv += ["-p", "p5", "-N1", "-n1", "-c1", "--mem=10", f"--gres=gpu:{gpus}", *extra, "--wrap", f"sleep {seconds}"]
    proc = slurm.run(*argv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return int(proc.stdout.strip().split(";")[0])


def state(slurm: AccountingSlurm, job: int) -> tuple[str, str]:
    fields = slurm.job(job)
    return fields.get("JobState", ""), fields.get("Reason", "")


def wait_state(slurm: AccountingSlurm, job: int, wanted: str, timeout: float = 20) -> dict[str, str]:
    slurm.wait(f"job {job} {wanted}", lambda: state(slurm, job)[0] == wanted, timeout, 0.2)
    return slurm.job(job)


def recorded_start(slurm: AccountingSlurm, job: int) -> bool:
    out = slurm.run(SACCT, "-X", "-n", "-P", "-j", str(job), "-o", "Start").stdout.split()
    return bool(out) and out[0] not in ("Unknown", "None")


def cancel(slurm: AccountingSlurm, *jobs: int) -> None:
    slurm.run("/usr/bin/scancel", *map(str, jobs))
    for job in jobs:
        slurm.wait(f"job {job} gone", lambda j=job: state(slurm, j)[0] in ("CANCELLED", "COMPLETED", ""), 20, 0.2)


# --- 1. fair share --------------------------------------------------------------------------------------------------


def sshare(slurm: AccountingSlurm) -> dict[str, dict[str, str]]:
    """The teams' rows of ``sshare`` (accounts, not users)."""
    fields = ("Account", "User", "RawShares", "RawUsage", "LevelFS")
    out = slurm.run(SSHARE, "-n", "-P", "-a", "-o", ",".join(fields)).stdout
    rows = [dict(zip(fields, (v.strip() for v in line.split("|")), strict=True)) for line in out.splitlines() if line]
    return {r["Account"]: r for r in rows if not r["User"] and r["Account"] in ("research", "applied")}


def sprio(slurm: AccountingSlurm) -> dict[int, tuple[int, int]]:
    """``{job: (priority, fair-share factor, weighted)}`` of the pending jobs."""
    out = slurm.run(SPRIO, "-h", "-o", "%i|%Y|%F").stdout
    return {int(i): (int(p), int(f)) for i, p, f in (line.split("|") for line in out.splitlines() if line)}


def fair_share_puts_the_team_that_used_less_first(cluster: AccountingSlurm) -> None:
    used = submit(cluster, "daemon", 6, seconds=1)  # research uses its GPUs; applied uses nothing
    ran["research"] = [used]
    wait_state(cluster, used, "COMPLETED", 30)
    # usage is charged when a job ends; the fair-share tree is recomputed at slurmctld's start (then every
    # PriorityCalcPeriod): a restart instead of a minute's wait
    slurmd[NODE].terminate()  # a slurmd started after slurmctld registers at once (a running one waits to be asked)
    slurmd[NODE].wait(timeout=20)
    cluster.restart_ctld()
    slurmd[NODE] = cluster.start_slurmd(NODE)
    cluster.scontrol("update", "partitionname=p5", "state=down")  # jobs queue, none starts
    queued = {"research": submit(cluster, "daemon", 1), "applied": submit(cluster, "bin", 1)}
    shares = sshare(cluster)
    assert int(shares["research"]["RawShares"]) == 3 * int(shares["applied"]["RawShares"])  # research: 3x the shares
    assert int(shares["research"]["RawUsage"]) > 0 and int(shares["applied"]["RawUsage"]) == 0
    assert float(shares["applied"]["LevelFS"]) > float(shares["research"]["LevelFS"]), shares  # share / usage
    cluster.wait("both queued jobs in sprio", lambda: set(queued.values()) <= set(sprio(cluster)), 10, 0.2)
    prio = sprio(cluster)
    applied, research = prio[queued["applied"]], prio[queued["research"]]
    assert applied[1] > research[1] and applied[0] > research[0], prio  # usage, not shares, decides
    cancel(cluster, *queued.values())
    cluster.scontrol("update", "partitionname=p5", "state=up")


# --- 2. the guarantee ------------------------------------------------------------------------------------------------


def a_job_above_the_teams_guarantee_pends_with_assoc_grp_gres(cluster: AccountingSlurm) -> None:
    first = submit(cluster, "bin", 2)  # applied's whole guarantee
    wait_state(cluster, first, "RUNNING")
    over = submit(cluster, "bin", 1)
    cluster.wait(f"job {over} held by the limit", lambda: state(cluster, over) == ("PENDING", "AssocGrpGRES"), 15, 0.2)
    inside = submit(cluster, "daemon", 1)  # research is within its own: the GPUs are there
    wait_state(cluster, inside, "RUNNING")
    cancel(cluster, first, over, inside)
    ran["applied"] = [first]
    ran["research"].append(inside)


# --- 3. borrowing, and the guarantee taking the GPUs back ---------------------------------------------------------


def a_borrowed_job_runs_beyond_the_guarantee_and_is_requeued_for_a_guaranteed_one(cluster: AccountingSlurm) -> None:
    borrowed = submit(cluster, "bin", 4, "--qos=borrow")  # twice applied's guarantee: the QOS's limit holds it
    started["borrowed"] = wait_state(cluster, borrowed, "RUNNING")["StartTime"]
    # a run preempted before slurmdbd has its start is recorded without one (measured, 22.05): a real job runs for
    # longer than that; here, wait until the database has it
    cluster.wait(f"job {borrowed}'s start in slurmdbd", lambda: recorded_start(cluster, borrowed), 15, 0.2)
    guaranteed = submit(cluster, "daemon", 6, seconds=1)  # research's guarantee; 4 GPUs are free
    wait_state(cluster, guaranteed, "RUNNING")
    cluster.wait(f"job {borrowed} requeued", lambda: cluster.job(borrowed).get("Restarts") == "1", 15, 0.2)
    assert state(cluster, borrowed)[0] in ("PENDING", "REQUEUED", "REQUEUE_HOLD"), cluster.job(borrowed)
    cancel(cluster, borrowed)
    wait_state(cluster, guaranteed, "COMPLETED", 30)
    ran["applied"].append(borrowed)
    ran["research"].append(guaranteed)


# --- 4. who used the GPUs ------------------------------------------------------------------------------------------


def seconds(job: dict[str, str], start: str = "StartTime", end: str = "EndTime") -> int:
    parse = dt.datetime.fromisoformat
    return int((parse(job[end]) - parse(job[start])).total_seconds())


def usage_report(cluster: AccountingSlurm) -> subprocess.CompletedProcess[str]:
    """``gpucluster-agent usage --json`` of the last days, as the head node's root runs it."""
    argv = [sys.executable, "-m", "gpucluster_agents", "usage", "--json", "--since", "yesterday"]
    argv += ["--file", str(cluster.dir / "accounts.json")]
    return subprocess.run(argv, env={**cluster.env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False)


def recorded_ends(cluster: AccountingSlurm, jobs: list[int]) -> None:
    """Wait until slurmdbd holds every run of ``jobs`` as ended: slurmctld sends a job's end to slurmdbd on its own
    time, and a report read before that counts a run only up to then (what a loaded machine showed)."""

    def ended() -> bool:
        out = subprocess.run(
            ["sacct", "-a", "-X", "-n", "-P", "--duplicates", "-j", ",".join(map(str, jobs)), "--format=JobID,End"],
            env=cluster.env, capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        rows = [line.split("|") for line in out.splitlines() if line.strip()]
        return {int(r[0].split("_")[0]) for r in rows} >= set(jobs) and all(r[1] not in ("", "Unknown") for r in rows)

    cluster.wait("slurmdbd records every job's end", ended, 60)


def the_usage_report_counts_the_gpu_seconds_the_jobs_ran(cluster: AccountingSlurm) -> None:
    """The real sacct, through ``gpucluster-agent usage``, against what slurmdbd recorded (sacct read by the test) and
    slurmctld's own times for each job (``scontrol``). Not sreport: it reads slurmdbd's hourly rollup, which holds a job only once its hour is over."""
    recorded_ends(cluster, [job for jobs in ran.values() for job in jobs])
    proc = usage_report(cluster)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    teams = {t["account"]: t for t in report["teams"]}
    # What slurmdbd recorded, read with sacct independently of the report (every run of every job: a preempted and
    # requeued borrowed run is a record of its own): the report must count exactly that, per team.
    out = subprocess.run(
        ["sacct", "-a", "-X", "-n", "-P", "--duplicates", "--noconvert", "-S", "now-1days", "-E", "now",
         "--format=Account,ElapsedRaw,AllocTRES"],
        env=cluster.env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    recorded: dict[str, int] = {}
    for line in out.splitlines():
        account, elapsed, tres = line.split("|")
        found = re.search(r"gres/gpu=(\d+)", tres)
        if found and elapsed:
            recorded[account] = recorded.get(account, 0) + int(found.group(1)) * int(elapsed)
    assert teams["research"]["gpu_seconds"] == recorded["research"] > 0
    assert teams["applied"]["gpu_seconds"] == recorded["applied"] > 0
    # and those records are the jobs the test ran: research's, by slurmctld's own times, within a second per job (slurmdbd
    # and slurmctld stamp a job's start and end separately); applied's at least its capped job's
    gpus = {job: int(re.search(r"gres/gpu=(\d+)", cluster.job(job)["TRES"] or "").group(1)) for js in ran.values() for job in js}
    research = sum(gpus[j] * seconds(cluster.job(j)) for j in ran["research"])
    slack = sum(gpus[j] for j in ran["research"])
    assert abs(teams["research"]["gpu_seconds"] - research) <= slack, (teams["research"], research)
    assert teams["research"]["users"] == [
        {"user": "daemon", **{k: teams["research"][k] for k in ("gpu_hours", "gpu_seconds", "usd", "jobs")}}
    ]
    first, _borrowed = ran["applied"]
    capped = gpus[first] * seconds(cluster.job(first))
    assert teams["applied"]["gpu_seconds"] >= capped - gpus[first], (teams["applied"], capped)
    price = json.loads((cluster.dir / "accounts.json").read_text())["gpu_prices"][0]["usd_per_gpu_hour"]
    assert teams["research"]["usd"] == round(teams["research"]["gpu_seconds"] / 3600 * price, 2)
    assert report["total"]["gpu_seconds"] == teams["research"]["gpu_seconds"] + teams["applied"]["gpu_seconds"]
    assert report["skipped_records"] == [] and report["unpriced_partitions"] == []


# --- 5. each team reads its own report, and only its own ----------------------------------------------------------

TEAM_GROUPS = "root:x:0:\ndaemon:x:1:\nbin:x:2:\nresearch:x:61001:daemon\napplied:x:61002:bin\n"
"""The node's groups as the users script makes them: one per team, its members in it (root, daemon, bin: the
accounts that play the people)."""
SHOW = ROOT / "gpucluster_agents" / "usage" / "show.py"


def each_team_reads_its_own_report_and_not_the_others(cluster: AccountingSlurm) -> None:
    group = cluster.dir / "group"
    group.write_text(TEAM_GROUPS)
    program = cluster.dir / "gpucluster-usage"  # installed as the login nodes have it
    program.write_text(SHOW.read_text())
    program.chmod(0o755)
    reports = cluster.dir / "team-usage"
    with MountNamespace({Path("/etc/group"): group}) as ns:
        argv = [sys.executable, "-m", "gpucluster_agents", "team-usage", "publish", "--dir", str(reports)]
        published = ns.run([*argv, "--file", str(cluster.dir / "accounts.json")], env={**cluster.env, "PYTHONPATH": str(ROOT)})
        assert published.returncode == 0, published.stderr
        assert sorted(p.name for p in reports.iterdir()) == ["applied.json", "research.json"]
        assert {(p.stat().st_mode & 0o777, p.stat().st_gid) for p in reports.iterdir()} == {(0o640, 61001), (0o640, 61002)}

        def show(user: str, *args: str) -> subprocess.CompletedProcess[str]:
            return ns.run([RUNUSER, "-u", user, "--", "/usr/bin/python3", str(program), "--dir", str(reports), *args])

        seen = {}
        for user, team, other in (("daemon", "research", "applied"), ("bin", "applied", "research")):
            proc = show(user, "--json")
            assert proc.returncode == 0, proc.stderr
            seen[team] = json.loads(proc.stdout)
            assert [r["team"] for r in seen[team]] == [team]  # their own team, and only it
            stolen = ns.run([RUNUSER, "-u", user, "--", "/bin/cat", str(reports / f"{other}.json")])
            assert stolen.returncode != 0 and "Permission denied" in stolen.stderr  # not by naming the file either
            listed = ns.run([RUNUSER, "-u", user, "--", "/bin/ls", str(reports)])
            assert listed.returncode != 0 and "Permission denied" in listed.stderr  # nor which teams there are
        everyone = ns.run(["/usr/bin/python3", str(program), "--dir", str(reports), "--json"])  # an admin: root
        assert sorted(r["team"] for r in json.loads(everyone.stdout)) == ["applied", "research"]
        text = show("daemon")
        assert text.returncode == 0 and text.stdout.startswith("team research on teams") and "applied" not in text.stdout
    research, applied = seen["research"][0], seen["applied"][0]
    # what the member reads is Slurm's own: the guarantee of the contract, sshare's shares and usage, sacct's GPU-seconds
    assert research["guarantee"] == {"gres/gpu": 6} and applied["guarantee"] == {"gres/gpu": 2}  # one GPU model
    shares = sshare(cluster)
    assert research["share"]["raw_shares"] == int(shares["research"]["RawShares"]) == 3 * applied["share"]["raw_shares"]
    assert research["share"]["raw_usage"] == int(shares["research"]["RawUsage"]) > 0
    assert [m["user"] for m in research["member_shares"]] == ["daemon"]
    daily = json.loads(usage_report(cluster).stdout)
    for team in (research, applied):
        counted = next(t for t in daily["teams"] if t["account"] == team["team"])
        assert (team["usage"]["gpu_seconds"], team["usage"]["usd"]) == (counted["gpu_seconds"], counted["usd"]) != (0, 0)
        assert [u["user"] for u in team["usage"]["users"]] == [u["user"] for u in counted["users"]]


# --- 6. the admins' dashboard: each team's series, as the head node's loopback exporter serves them -----------------


def team_series(cluster: AccountingSlurm, tmp: Path) -> dict[str, dict[str, float]]:
    """``team-snapshot`` as its unit runs it (here as root, who sees every account as SlurmUser does) on this cluster's
    sshare, sacct and squeue, then what ``serve --team-snapshot`` serves: ``{metric: {"account[ state]": value}}``."""
    env = {**cluster.env, "PYTHONPATH": str(ROOT)}
    out = tmp / "teams.json"
    argv = [sys.executable, "-m", "gpucluster_agents.metrics", "team-snapshot", "--slurm-bin-dir", "/usr/bin"]
    argv += ["--accounts-file", str(cluster.dir / "accounts.json"), "--out", str(out), "--group", "-", "--once"]
    wrote = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert wrote.returncode == 0, wrote.stderr
    printed = subprocess.run(
        [sys.executable, "-m", "gpucluster_agents.metrics", "print", "--no-gpus", "--team-snapshot", str(out)],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    series: dict[str, dict[str, float]] = {}
    for line in printed.splitlines():
        m = re.fullmatch(r'gpucluster_slurm_account_(\w+)\{account="(\w+)"(?:,state="(\w+)")?(?:,user="(\w+)")?\} (\S+)', line)
        if m:
            key = " ".join(x for x in (m.group(2), m.group(3), m.group(4)) if x)
            series.setdefault(m.group(1), {})[key] = float(m.group(5))
    assert 'gpucluster_metrics_collector_success{collector="teams"} 1' in printed, printed + wrote.stderr
    return series


def the_admins_series_are_slurms_own(cluster: AccountingSlurm) -> None:
    """Per account: the GPU-seconds sacct recorded (read here independently), sshare's EffectvUsage, the contract's
    guarantee; then a running GPU job of research's and a pending one of applied's counted, with their GPUs."""
    tmp = cluster.dir / "team-metrics"
    tmp.mkdir()
    idle = team_series(cluster, tmp)
    out = subprocess.run(
        ["sacct", "-a", "-X", "-n", "-P", "--duplicates", "--noconvert", "-S", "now-1days", "-E", "now",
         "--format=Account,ElapsedRaw,AllocTRES"],
        env=cluster.env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    recorded: dict[str, float] = {}
    for line in out.splitlines():
        account, elapsed, tres = line.split("|")
        found = re.search(r"gres/gpu=(\d+)", tres)
        if found and elapsed:
            recorded[account] = recorded.get(account, 0) + int(found.group(1)) * int(elapsed)
    assert idle["gpu_seconds"] == recorded and recorded["research"] > 0
    price = json.loads((cluster.dir / "accounts.json").read_text())["gpu_prices"][0]["usd_per_gpu_hour"]
    assert idle["cost_usd"] == {a: round(v / 3600 * price, 2) for a, v in recorded.items()}
    assert idle["gpu_guarantee"] == {"research": 6, "applied": 2}
    effective = subprocess.run([SSHARE, "-n", "-P", "-a", "-o", "Account,User,EffectvUsage"], env=cluster.env,
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
    split = ([c.strip() for c in ln.split("|")] for ln in effective.splitlines())
    rows = {a: float(e) for a, u, e in split if a in idle["gpu_guarantee"] and not u}  # sshare indents child accounts
    assert idle["effective_usage"] == pytest.approx(rows) and rows["research"] > rows["applied"]
    assert set(idle["fairshare"]) == {"research daemon", "applied bin"}  # each member, in their own account
    running = submit(cluster, ON_THIS_MACHINE["alice"], 2)
    pending = submit(cluster, ON_THIS_MACHINE["bob"], 3)  # above applied's guarantee of 2: it waits
    try:
        wait_state(cluster, running, "RUNNING")
        busy = team_series(cluster, tmp)
        assert busy["gpus_allocated"] == {"research": 2, "applied": 0}
        jobs = {k: v for k, v in busy["gpu_jobs"].items() if v}
        assert jobs == {"research running": 1, "applied pending": 1}
    finally:
        cancel(cluster, running, pending)


def test_teams_jobs_in_order(cluster: AccountingSlurm) -> None:
    """The phases share one cluster and build on each other's jobs (fair share → guarantee → borrowing → usage), so
    they run as one test, in order, on one worker."""
    fair_share_puts_the_team_that_used_less_first(cluster)
    a_job_above_the_teams_guarantee_pends_with_assoc_grp_gres(cluster)
    a_borrowed_job_runs_beyond_the_guarantee_and_is_requeued_for_a_guaranteed_one(cluster)
    the_usage_report_counts_the_gpu_seconds_the_jobs_ran(cluster)
    each_team_reads_its_own_report_and_not_the_others(cluster)
    the_admins_series_are_slurms_own(cluster)
