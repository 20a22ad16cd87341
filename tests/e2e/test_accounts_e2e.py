"""The head node's accounts reconcile against a real slurmdbd 22.05 + MariaDB + slurmctld (Debian's), with
the files rendered for the shipped ``slurm-p5`` stack (slurm.conf with GPU accounting, enforcement and QOS
preemption; slurmdbd.conf; the accounts contract with its two teams) — ``tests/e2e/teams_files.py`` says what the
local patch changes. One cluster per module; the tests run in file order on one worker and build on each other.

Jobs need a real user: where a test needs a pending job it adds ``root`` to a team (the one user this machine is sure
to have) and submits it held (``sbatch --hold``: it pends, no slurmd needed).
"""

from __future__ import annotations

import copy
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from gpucluster_agents.accounts.reconcile import EX_TEMPFAIL, Outcome, reconcile
from gpucluster_agents.accounts.slurmdb import Result, Runner, SlurmDb, parse_tres, parse_wall
from gpucluster_agents.contract.accounts import parse, stored_description
from tests.conftest import IN_CI, ROOT
from tests.e2e.slurmdbd import AccountingSlurm, missing_tools, run_dir
from tests.e2e.teams_files import TeamsFiles, local_slurm_conf, render_teams, write_contract

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("accounts-slurmdbd")]


def _need() -> None:
    why = "needs root (MariaDB, slurmdbd and slurmctld as root)" if os.geteuid() != 0 else ""
    missing = missing_tools()
    why = why or (f"missing {', '.join(missing)} (.ci/run installs them)" if missing else "")
    if why:
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def files() -> TeamsFiles:
    return render_teams("slurm-p5")


@pytest.fixture(scope="module")
def cluster(files: TeamsFiles) -> Iterator[AccountingSlurm]:
    _need()
    slurm = AccountingSlurm(
        run_dir("acct-"),
        cluster=files.cluster,
        slurm_conf=local_slurm_conf(files.slurm_conf),
        slurmdbd_conf=files.slurmdbd_conf,
        files={"topology.conf": files.topology_conf},
    )
    try:
        slurm.start()  # slurmctld up first, as on the head node: it creates the gres/gpu TRES in slurmdbd
        yield slurm
    finally:
        slurm.cleanup()


def agent(c: AccountingSlurm, contract: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """``gpucluster-agent accounts reconcile --file …`` as the head node's unit runs it."""
    path = write_contract(c.dir / "accounts.json", contract)
    env = {**c.env, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "gpucluster_agents", "accounts", "reconcile", "--file", str(path), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def reconcile_in(c: AccountingSlurm, contract: dict[str, Any], dry_run: bool = False) -> tuple[Outcome, str]:
    """The same pass in this process (no interpreter start): its outcome and its log."""
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("gpucluster_agents.accounts")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        out = reconcile(parse(contract), SlurmDb(env_runner(c)), lambda g: None, dry_run=dry_run)
    finally:
        logger.removeHandler(handler)
    return out, "\n".join(lines)


def env_runner(c: AccountingSlurm, before: Callable[[Sequence[str]], None] | None = None) -> Runner:
    def run(argv: Sequence[str], stdin: str | None = None) -> Result:
        if before is not None:
            before(argv)
        p = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, env=c.env, check=False)
        return Result(p.returncode, p.stdout, p.stderr)

    return run


SNAPSHOT = {
    "assoc": ["account", "user", "parentname", "fairshare", "grptres", "maxwall", "qos", "defaultqos"],
    "qos": ["name", "description", "priority", "preempt", "preemptmode", "grptres", "maxwall"],
    "user": ["user", "defaultaccount"],
    "account": ["account", "descr"],
}


def snapshot(c: AccountingSlurm) -> dict[str, list[dict[str, str]]]:
    """slurmdbd's rows (the four shows side by side)."""
    with ThreadPoolExecutor(len(SNAPSHOT)) as pool:
        futures = {k: pool.submit(c.show, k, fields) for k, fields in SNAPSHOT.items()}
        return {k: f.result() for k, f in futures.items()}


def assert_matches(c: AccountingSlurm, contract: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """slurmdbd's rows say what the contract says (the teams' settings and members, the QOS, default accounts);
    returns them."""
    snap = snapshot(c)
    rows = {(r["account"], r["user"]): r for r in snap["assoc"]}
    descr = {r["account"]: r["descr"] for r in snap["account"]}
    defaults = {r["user"]: r["defaultaccount"] for r in snap["user"]}
    first_team: dict[str, str] = {}
    for team in contract["accounts"]:
        row = rows[(team["name"], "")]
        assert row["parentname"] == "root", row
        assert descr[team["name"]] == stored_description(team["description"])
        assert row["fairshare"] == str(team["fairshare"])
        assert parse_tres(row["grptres"]) == team["grp_tres"]
        assert parse_wall(row["maxwall"]) == team["max_wall_minutes"]
        assert sorted(row["qos"].split(",")) == sorted(team["qos"])
        assert row["defaultqos"] == team["default_qos"]
        members = {u for (a, u) in rows if a == team["name"] and u}
        assert members == set(team["users"]), (team["name"], members)
        for user in team["users"]:
            first_team.setdefault(user, team["name"])
    for user, team in first_team.items():
        if user != "root":
            assert defaults[user] == team, (user, defaults)
    qos = {r["name"]: r for r in snap["qos"]}
    for q in contract["qos"]:
        row = qos[q["name"]]
        assert int(row["priority"]) == q["priority"]
        assert sorted(filter(None, row["preempt"].split(","))) == sorted(q["preempt"])
        assert row["preemptmode"] == q["preempt_mode"]
        if q["name"] != "normal":
            assert row["description"] == stored_description(q["description"])
            assert parse_tres(row["grptres"]) == q["grp_tres"]
            assert parse_wall(row["maxwall"]) == q["max_wall_minutes"]
    return snap


@pytest.fixture(scope="module")
def memo() -> dict[str, Any]:
    return {}


def the_reconcile_creates_the_teams_accounts_users_qos_and_limits(
    cluster: AccountingSlurm, files: TeamsFiles, memo: dict[str, Any]
):
    proc = agent(cluster, files.contract)
    assert proc.returncode == 0, proc.stderr + cluster.debug()
    memo["created"] = assert_matches(cluster, files.contract)
    assert "accounts: 0 changes" not in proc.stderr


def a_second_reconcile_changes_nothing(cluster: AccountingSlurm, files: TeamsFiles, memo: dict[str, Any]):
    before = memo["created"]
    proc = agent(cluster, files.contract)
    assert proc.returncode == 0, proc.stderr
    assert "accounts: 0 changes" in proc.stderr, proc.stderr
    assert "changed:" not in proc.stderr, proc.stderr
    assert snapshot(cluster) == before


def with_root_in(contract: dict[str, Any], team: str) -> dict[str, Any]:
    out = copy.deepcopy(contract)
    next(a for a in out["accounts"] if a["name"] == team)["users"].append("root")
    return out


def without(contract: dict[str, Any], team: str) -> dict[str, Any]:
    out = copy.deepcopy(contract)
    out["accounts"] = [a for a in out["accounts"] if a["name"] != team]
    return out


def accounts_of(c: AccountingSlurm) -> set[str]:
    return {r["account"] for r in c.show("assoc", ["account", "user"]) if not r["user"]}


def a_team_removed_while_it_has_a_pending_job_is_kept_and_the_reason_said(cluster: AccountingSlurm, files: TeamsFiles):
    assert reconcile_in(cluster, with_root_in(files.contract, "applied"))[0].status == 0
    job = cluster.sbatch("--hold", "-A", "applied", "-p", "p5", "--qos", "borrow", "--wrap", "true")
    proc = agent(cluster, without(with_root_in(files.contract, "applied"), "applied"))
    assert proc.returncode == 0, proc.stderr
    assert f"applied not removed: 1 pending or running jobs ({job})" in proc.stderr, proc.stderr
    assert "applied" in accounts_of(cluster)
    cluster.run("/usr/bin/scancel", str(job), check=True)
    cluster.wait("the job to leave the queue", lambda: str(job) not in cluster.squeue("-h", "-o", "%i"), 30)
    out, log = reconcile_in(cluster, without(files.contract, "applied"))
    assert out.status == 0 and "changed: applied: team removed" in log, log
    assert_matches(cluster, without(files.contract, "applied"))
    assert "applied" not in accounts_of(cluster)


def slurmdbd_stopped_mid_reconcile_exits_75_removes_nothing_and_the_next_run_completes(
    cluster: AccountingSlurm, files: TeamsFiles
):
    # state now: research only (the test before removed applied); the new file adds applied back and removes research
    target = without(files.contract, "research")
    stopped: list[str] = []

    def stop_before_load(argv: Sequence[str]) -> None:
        if "load" in argv and not stopped:  # the first change after the QOS: slurmdbd goes away under the reconcile
            cluster.stop_dbd()
            stopped.append(" ".join(argv))

    out = reconcile(parse(target), SlurmDb(env_runner(cluster, stop_before_load)), lambda g: None)
    assert stopped and out.status == EX_TEMPFAIL and not out.changes, (out, stopped)
    down = agent(cluster, target)  # the unit's next try, slurmdbd still down
    assert down.returncode == EX_TEMPFAIL and "slurmdbd unreachable" in down.stderr, down.stderr
    cluster.start_dbd()
    assert "research" in accounts_of(cluster) and "applied" not in accounts_of(cluster)  # nothing removed
    out, log = reconcile_in(cluster, target)
    assert out.status == 0 and "changed: research: team removed" in log and "changed: applied: team added" in log, log
    assert_matches(cluster, target)
    again, log = reconcile_in(cluster, target)
    assert again.status == 0 and not again.changes, log


def a_changed_guarantee_is_applied_and_said_as_such(cluster: AccountingSlurm, files: TeamsFiles):
    contract = without(files.contract, "research")  # the state the test before left
    team = contract["accounts"][0]
    ((tres, old),) = team["grp_tres"].items()
    team["grp_tres"] = {tres: old + 8}
    dry, _ = reconcile_in(cluster, contract, dry_run=True)
    assert dry.status == 0 and any(f"applied: {old} → {old + 8} guaranteed" in line for line in dry.changes), dry
    assert parse_tres(cluster.show("assoc", ["grptres"], "account=applied", "user=")[0]["grptres"]) == {tres: old}
    out, log = reconcile_in(cluster, contract)
    assert out.status == 0 and f"changed: applied: {old} → {old + 8} guaranteed" in log, log
    assert_matches(cluster, contract)


def test_the_accounts_reconcile_in_order(cluster: AccountingSlurm, files: TeamsFiles, memo: dict[str, Any]) -> None:
    """The phases share one slurmdbd and each starts from the state the one before left (create → no change → a team
    kept for its job → slurmdbd stopped mid-pass → a changed guarantee), so they run as one test, in order."""
    the_reconcile_creates_the_teams_accounts_users_qos_and_limits(cluster, files, memo)
    a_second_reconcile_changes_nothing(cluster, files, memo)
    a_team_removed_while_it_has_a_pending_job_is_kept_and_the_reason_said(cluster, files)
    slurmdbd_stopped_mid_reconcile_exits_75_removes_nothing_and_the_next_run_completes(cluster, files)
    a_changed_guarantee_is_applied_and_said_as_such(cluster, files)
