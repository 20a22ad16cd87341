"""The accounts reconcile's decisions (gpucluster_agents/accounts/) with a fake sacctmgr/squeue: what it reads, in
which order it changes things, what it never touches and when it removes nothing. The real slurmdbd runs in
tests/e2e/test_accounts_e2e.py."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from gpucluster_agents.accounts.reconcile import EX_TEMPFAIL, reconcile
from gpucluster_agents.accounts.slurmdb import Result, SlurmDb, parse_tres, parse_wall
from gpucluster_agents.contract.accounts import parse
from tests.agents.accounts.test_accounts_contract import CONTRACT

REFUSED = Result(1, "", "sacctmgr: error: slurm_persist_conn_open: failed to open persistent connection: Connection refused")
EMPTY = {
    "cluster": "",
    "account": "root|default root account\n",
    "qos": "normal|Normal QOS default|0||cluster||\n",
    "user": "root|root\n",
    "assoc": "",
}
IN_STEP = {
    "cluster": "slurm-p5\n",
    "account": "research|gpucluster: team research\nroot|default root account\n",
    "qos": "normal|Normal QOS default|100|borrow|cluster||\n"
    "borrow|gpucluster: opportunistic jobs beyond a team`s guarantee, requeued when needed|0||requeue|gres/gpu=64|\n",
    "user": "alice|research\nbob|research\ncarol|research\nroot|root\n",
    "assoc": "root||||1|||normal|\nroot|root|||1|||normal|\n"
    "research|||root|40|gres/gpu=40|7-00:00:00|borrow,normal|normal\n"
    "research|alice|||1||7-00:00:00|borrow,normal|normal\nresearch|bob|||1||7-00:00:00|borrow,normal|normal\n"
    "research|carol|||1||7-00:00:00|borrow,normal|normal\n",
}


class FakeSlurm:
    """Answers ``sacctmgr -nP show …`` from ``tables`` and ``squeue`` from ``jobs``; records every change; ``fail``
    (a word of the command line) makes the calls from the first one that has it unreachable."""

    def __init__(self, tables: dict[str, str], jobs: str = "", fail: str | None = None) -> None:
        self.tables = dict(tables)
        self.jobs = jobs
        self.fail = fail
        self.failing = False
        self.changes: list[list[str]] = []
        self.loads: list[str] = []

    def __call__(self, argv: Sequence[str], stdin: str | None = None) -> Result:
        args = list(argv[1:])
        if self.fail is not None and any(self.fail in a for a in args):
            self.failing = True
        if self.failing:
            return REFUSED
        if argv[0].endswith("squeue"):
            return Result(0, self.jobs, "")
        if args[:2] == ["-nP", "show"]:
            return Result(0, self.tables[args[2]], "")
        assert args[0] == "-i", args
        self.changes.append(args[1:])
        if args[1] == "load":
            with open(args[2].split("=", 1)[1]) as fh:
                self.loads.append(fh.read())
        return Result(0, "", "")


def run(fake: FakeSlurm, contract: dict[str, Any] = CONTRACT, groups: dict[str, list[str]] | None = None, dry: bool = False):
    members = {"ml-research": ["carol"]} if groups is None else groups
    return reconcile(parse(contract), SlurmDb(fake), lambda g: members.get(g), dry_run=dry)


def test_parsable_values_read_back():
    assert parse_tres("cpu=8,gres/gpu:h100=85") == {"cpu": 8, "gres/gpu:h100": 85}
    assert [parse_wall(w) for w in ("7-00:00:00", "01:30:00", "30:00", "", "UNLIMITED")] == [10080, 90, 30, None, None]


def test_an_empty_database_gets_cluster_qos_then_one_load_of_teams_and_users():
    fake = FakeSlurm(EMPTY)
    out = run(fake)
    assert out.status == 0
    verbs = [" ".join(c[:3]) for c in fake.changes]
    assert verbs == ["add cluster slurm-p5", "add qos borrow", "modify qos where", "load file=" + fake.changes[3][1][5:]]
    assert "preempt=borrow" in fake.changes[2] and "priority=100" in fake.changes[2]
    (text,) = fake.loads
    assert "Account - 'research':Description=\"gpucluster: team research\":Fairshare=40:GrpTRES='gres/gpu=40'" in text
    assert "User - 'carol':DefaultAccount='research'" in text  # a directory group's member
    assert not any(c[0] == "delete" for c in fake.changes)


def test_a_database_in_step_gets_no_change():
    fake = FakeSlurm(IN_STEP)
    out = run(fake)
    assert (out.status, out.changes, fake.changes) == (0, [], [])


def test_a_changed_guarantee_is_one_modify_said_as_such():
    contract = copy.deepcopy(CONTRACT)
    contract["accounts"][0]["grp_tres"] = {"gres/gpu": 48}
    fake = FakeSlurm(IN_STEP)
    out = run(fake, contract)
    assert out.changes == ["research: 40 → 48 guaranteed GPUs"]
    assert fake.changes == [["modify", "account", "where", "name=research", "cluster=slurm-p5", "set", "grptres=gres/gpu=48"]]


def test_a_site_s_own_account_of_a_team_s_name_is_left_alone():
    tables = dict(IN_STEP, account="research|the lab's own\nroot|default root account\n")
    fake = FakeSlurm(tables)
    out = run(fake)
    assert fake.changes == [] and any("research" in k and "site's own" in k for k in out.kept)


def test_a_removed_team_with_a_pending_job_is_kept_and_said_why():
    contract = dict(CONTRACT, accounts=[])
    fake = FakeSlurm(IN_STEP, jobs="research|42|alice|PENDING\n")
    out = run(fake, contract)
    assert fake.changes == [] and out.status == 0
    assert "research not removed: 1 pending or running jobs (42)" in out.kept
    assert out.summary().startswith("accounts: 0 changes, 1 kept")


def test_a_removed_team_without_jobs_goes_after_its_users_default_accounts():
    contract = dict(CONTRACT, accounts=[])
    fake = FakeSlurm(IN_STEP)
    out = run(fake, contract)
    assert [c[0] for c in fake.changes] == ["delete", "delete"]  # its users (no other association), then the team
    assert fake.changes[0][:4] == ["delete", "user", "where", "name=alice,bob,carol"]
    assert fake.changes[1] == ["delete", "account", "where", "name=research", "cluster=slurm-p5"]
    assert out.changes[-1] == "research: team removed"


def test_an_unresolved_group_adds_but_removes_nothing():
    contract = copy.deepcopy(CONTRACT)
    contract["accounts"][0]["users"] = ["alice", "dave"]  # bob leaves, dave joins; carol comes from the group
    fake = FakeSlurm(IN_STEP)
    out = run(fake, contract, groups={})
    assert [c[0] for c in fake.changes] == ["load"] and "User - 'dave'" in fake.loads[0]
    assert any("ml-research not resolved: no user or team removed" in k for k in out.kept)
    fake = FakeSlurm(IN_STEP)
    run(fake, contract)
    assert fake.changes[-1][:4] == ["delete", "user", "where", "name=bob"]  # resolved: bob's association goes


def test_slurmdbd_unreachable_at_the_first_read_exits_75_and_changes_nothing():
    fake = FakeSlurm(IN_STEP, fail="show")
    out = run(fake)
    assert (out.status, fake.changes) == (EX_TEMPFAIL, [])


def test_slurmdbd_lost_mid_pass_stops_before_any_removal():
    contract = copy.deepcopy(CONTRACT)
    contract["accounts"][0]["grp_tres"] = {"gres/gpu": 48}
    contract["accounts"][0]["users"] = ["alice"]  # bob leaves: a removal, planned after the modify
    fake = FakeSlurm(IN_STEP, fail="modify")
    out = run(fake, contract)
    assert out.status == EX_TEMPFAIL and out.changes == [] and fake.changes == []


def test_a_dry_run_says_the_changes_and_makes_none():
    fake = FakeSlurm(EMPTY)
    out = run(fake, dry=True)
    assert fake.changes == [] and "research: team added" in " ".join(out.changes) and out.status == 0


def test_a_user_leaving_the_team_of_its_default_account_keeps_its_other_association_as_default():
    tables = dict(IN_STEP)
    tables["account"] += "lab|the lab's own\n"
    tables["assoc"] += "lab|||root|1||||\nlab|alice|||1||||\n"
    contract = copy.deepcopy(CONTRACT)
    contract["accounts"][0]["users"] = ["bob"]  # alice leaves research, her default; she stays in the site's lab
    fake = FakeSlurm(tables)
    out = run(fake, contract)
    assert fake.changes == [
        ["modify", "user", "where", "name=alice", "set", "defaultaccount=lab"],
        ["delete", "user", "where", "name=alice", "account=research", "cluster=slurm-p5"],
    ], out
