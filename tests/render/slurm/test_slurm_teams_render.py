"""Teams on Slurm, rendered: slurm.conf's accounting, priority, enforcement and preemption lines by what the cluster has;
the settings escape hatch merged and read by the real slurmctld 22.05 (an accepted key runs, a misspelt one stops it,
an owned one never reaches the file); every key slurm.conf can hold is one the hatch refuses; the accounts contract
and its head-node units (checked by systemd-analyze)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.config.kubernetes.team_posix import default_slot
from gpucluster.facts.slurm_settings import ALLOWED, OWNED, allowed_key, owned_key
from gpucluster.load import load_spec
from gpucluster.render.core import CloudConfig, WriteFile
from gpucluster.render.slurm.accounts import ACCOUNTS_PATH, ACCOUNTS_PATH_UNIT, ACCOUNTS_TIMER, ACCOUNTS_UNIT, accounts_contract
from gpucluster.render.slurm.agent import AgentBundle, LaunchTarget, agent_config
from gpucluster.render.slurm.conf import slurm_conf
from gpucluster.render.slurm.head import HeadInputs, head_files, head_setup, head_user_data
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.tools.plan.run.stackfile import read_stack_file
from tests.conftest import IDENTITY_DECLARED, group, make_config, require_tool
from tests.render.slurm_check import SLURMCTLD, check_slurmctld, conf_files
from tests.render.slurm_versions import trixie_root, trixie_tmp  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # runs slurmctld, also in the trixie root (chroot)

P5 = group(name="p5", maxSize=16)
RESEARCH = {"name": "research", "gpuQuota": {"h100": 96}, "users": ["alice"]}
APPLIED = {"name": "applied", "gpuQuota": {"h100": 32}, "users": ["bob", "alice"], "borrow": True, "maxJobTime": "2-0"}


def ctx_of(*teams: dict[str, Any], accounting: bool = True, version: str | None = None, **slurm: Any) -> SlurmContext:
    section: dict[str, Any] = {"identity": IDENTITY_DECLARED, **slurm}
    if teams:
        section["teams"] = list(teams)
    if accounting:
        section["accounting"] = {}
    return SlurmContext.of(load_spec(make_config(P5, slurm=section), stack="teams").cluster, slurm_version=version)


def keys(conf: str) -> list[str]:
    return [line.split("=", 1)[0] for line in conf.splitlines() if line and not line.startswith("#")]


# --- slurm.conf by what the cluster has --------------------------------------------------------------------------


def test_without_accounting_no_priority_or_gpu_accounting():
    conf = slurm_conf(ctx_of(accounting=False))
    assert not {"AccountingStorageTRES", "PriorityType", "AccountingStorageEnforce", "PreemptType"} & set(keys(conf))
    assert "TRESBillingWeights" not in conf


def test_accounting_alone_counts_gpus_and_sets_multifactor_priority_without_enforcing():
    conf = slurm_conf(ctx_of())
    lines = conf.splitlines()
    assert "AccountingStorageTRES=gres/gpu" in lines  # one GPU model: no typed TRES
    assert "PriorityType=priority/multifactor" in lines and "PriorityWeightFairshare=10000" in lines
    assert "PriorityWeightQOS=20000" in lines and "PriorityDecayHalfLife=7-0" in lines
    assert 'TRESBillingWeights="CPU=0,Mem=0,GRES/gpu=1.0"' in next(ln for ln in lines if ln.startswith("PartitionName=p5"))
    assert "AccountingStorageEnforce" not in conf and "PreemptType" not in conf


def test_teams_enforce_limits_and_only_borrowing_turns_preemption_on():
    no_borrow = slurm_conf(ctx_of(RESEARCH)).splitlines()
    assert "AccountingStorageEnforce=associations,limits,qos,safe" in no_borrow
    assert not [ln for ln in no_borrow if ln.startswith("Preempt")]
    borrow = slurm_conf(ctx_of(RESEARCH, APPLIED)).splitlines()
    assert ["PreemptType=preempt/qos", "PreemptMode=REQUEUE"] == [ln for ln in borrow if ln.startswith("Preempt")]


# --- the escape hatch, and the real slurmctld ---------------------------------------------------------------------


def test_settings_reach_slurm_conf_and_slurmctld_reads_them(tmp_path: Path):
    require_tool(SLURMCTLD)
    ctx = ctx_of(RESEARCH, APPLIED, version="22.05", settings={"MaxJobCount": 20000, "KillWait": 45})
    files = conf_files(ctx)
    assert ["MaxJobCount=20000", "KillWait=45"] == [
        ln for ln in files["slurm.conf"].splitlines() if ln.startswith(("Max", "Kill"))
    ]
    rc, problems = check_slurmctld(files, tmp_path / "ok")
    assert (rc, problems) == (124, [])
    # the hatch passes keys gpucluster does not know to Slurm: slurmctld is what refuses a misspelt one
    files["slurm.conf"] = files["slurm.conf"].replace("MaxJobCount=", "MaxJobCont=")
    rc, problems = check_slurmctld(files, tmp_path / "typo")
    assert rc == 1 and any("MaxJobCont" in p for p in problems), problems


def test_an_owned_key_is_refused_before_anything_is_rendered():
    with pytest.raises(ConfigError) as exc:
        ctx_of(RESEARCH, settings={"SelectType": "select/linear"})
    finding = next(f for f in exc.value.findings if f.code == "slurm-setting-owned")
    assert finding.path == "gpucluster:slurm.settings.SelectType" and "set by gpucluster" in finding.message


def test_every_key_slurm_conf_can_hold_is_owned():
    """The owned table cannot fall behind the template: every key of a render with every option on (teams that
    borrow, accounting, health, login nodes, static groups; the oldest version's extra keys) is in it."""
    stack = load_spec(read_stack_file("slurm-p5")["config"], stack="slurm-p5").cluster
    rendered: set[str] = set()
    for version in ("22.05", "24.11"):
        conf = slurm_conf(SlurmContext.of(stack, slurm_version=version))
        rendered |= set(keys(conf))
    assert {"PreemptType", "AccountingStorageEnforce", "SrunPortRange", "TreeWidth", "HealthCheckProgram"} <= rendered
    missing = sorted(k for k in rendered if owned_key(k) is None)
    assert missing == [], f"slurm.conf keys the settings hatch would let a stack override: {missing}"
    assert all(re.fullmatch(r"[A-Z][A-Za-z]+", k) for k in OWNED)


# A value of each key on the allow list, as a stack would write it (every table key must have one here).
ALLOWED_EXAMPLES = {
    "MaxJobCount": 20000, "MaxArraySize": 4001, "MaxStepCount": 100000, "MaxTasksPerNode": 256, "FirstJobId": 1000,
    "MaxJobId": 67000000, "DefMemPerCPU": 4096, "DefMemPerGPU": 65536, "MaxMemPerNode": 2000000,
    "DefCpuPerGPU": 12, "EnforcePartLimits": "ALL", "KillWait": 45, "InactiveLimit": 300, "MinJobAge": 600,
    "OverTimeLimit": 5, "WaitTime": 30, "MessageTimeout": 20, "SlurmctldTimeout": 300, "SlurmdTimeout": 600,
    "UnkillableStepTimeout": 180, "BatchStartTimeout": 60, "CompleteWait": 10, "GetEnvTimeout": 5, "EioTimeout": 90,
    "TCPTimeout": 5, "ResvOverRun": 10, "KillOnBadExit": 1, "JobRequeue": 1, "RequeueExit": "100,101",
    "RequeueExitHold": "102", "DisableRootJobs": True, "VSizeFactor": 110, "SlurmctldDebug": "verbose",
    "SlurmdDebug": "info", "SlurmctldSyslogDebug": "error", "SlurmdSyslogDebug": "error", "LogTimeFormat": "iso8601_ms",
    "DebugFlags": "Gres,Power", "Licenses": "matlab:4",
}  # fmt: skip


def allowed_render(version: str) -> dict[str, str]:
    config = read_stack_file("slurm-p5")["config"]
    config = {**config, "gpucluster:slurm": {**config["gpucluster:slurm"], "settings": ALLOWED_EXAMPLES}}
    return conf_files(SlurmContext.of(load_spec(config, stack="slurm-p5").cluster, slurm_version=version))


def test_h2_every_key_slurm_conf_holds_is_owned_or_allowed():
    """With every allowed key set, each key of the render is one gpucluster owns or one the allow list holds, and the
    hatch's own lines are exactly the allow list: nothing else reaches the file."""
    assert set(ALLOWED_EXAMPLES) == set(ALLOWED)
    for version in ("22.05", "24.11"):
        conf = allowed_render(version)["slurm.conf"]
        assert sorted(k for k in keys(conf) if owned_key(k) is None and allowed_key(k) is None) == []
        hatch = conf.split("# Your own keys (gpucluster:slurm.settings)", 1)[1].split("\n", 1)[1]
        assert sorted(keys(hatch.split("\n\n", 1)[0])) == sorted(ALLOWED)


def test_h2_slurmctld_22_05_reads_every_allowed_key(tmp_path: Path):
    """Each key on the allow list is a real slurm.conf key of the oldest Slurm gpucluster renders for."""
    require_tool(SLURMCTLD)
    rc, problems = check_slurmctld(allowed_render("22.05"), tmp_path)
    assert (rc, problems) == (124, [])


def test_h2_slurmctld_24_11_reads_every_allowed_key(trixie_root: Path, trixie_tmp: Path):  # noqa: F811
    rc, problems = check_slurmctld(allowed_render("24.11"), trixie_tmp, root=trixie_root)
    assert (rc, problems) == (124, [])


# --- the accounts contract and its units ---------------------------------------------------------------------------


def head_of(ctx: SlurmContext) -> dict[str, str]:
    targets = {g.name: LaunchTarget("lt-0123456789abcdef0", ("subnet-0123456789abcdef0",)) for g in ctx.node_groups}
    inputs = HeadInputs("vol-0123456789abcdef0", AgentBundle("artifacts-bucket", "key", "0" * 64), agent_config(ctx, targets))
    files = {f.path: f.text() for f in head_files(ctx, inputs)}
    files["setup"] = head_setup(ctx, inputs)
    return files


def test_the_contract_states_the_teams_qos_prices_and_bucket():
    contract = accounts_contract(ctx_of(RESEARCH, APPLIED), "artifacts-bucket")
    assert contract is not None
    assert (contract["schema"], contract["cluster"]) == (1, "teams")
    research, applied = contract["accounts"]
    assert research == {
        "name": "research", "description": "gpucluster: team research", "fairshare": 96, "grp_tres": {"gres/gpu": 96},
        "max_wall_minutes": None, "qos": ["normal"], "default_qos": "normal", "users": ["alice"], "groups": [],
    }  # fmt: skip
    assert applied["qos"] == ["normal", "borrow"] and applied["max_wall_minutes"] == 2880 and applied["users"] == ["bob", "alice"]
    normal, borrow = contract["qos"]
    assert (normal["name"], normal["preempt"], normal["preempt_mode"], normal["grp_tres"]) == (
        "normal",
        ["borrow"],
        "cluster",
        {},
    )
    assert (borrow["preempt_mode"], borrow["grp_tres"], borrow["priority"]) == ("requeue", {"gres/gpu": 128}, 0)
    assert all(q["description"].startswith("gpucluster:") for q in contract["qos"] + contract["accounts"])
    (price,) = contract["gpu_prices"]
    assert price["partition"] == "p5" and price["gpus_per_node"] == 8 and price["usd_per_gpu_hour"] > 0
    assert contract["usage"] == {"bucket": "artifacts-bucket", "prefix": "usage/"}
    assert accounts_contract(ctx_of()) is None


def test_head_node_gets_the_contract_and_units_only_with_teams(tmp_path: Path):
    files = head_of(ctx_of(RESEARCH, APPLIED))
    assert json.loads(files[ACCOUNTS_PATH]) == accounts_contract(ctx_of(RESEARCH, APPLIED), "artifacts-bucket")
    service = files[f"/etc/systemd/system/{ACCOUNTS_UNIT}"]
    for line in ("Requires=slurmdbd.service", "Type=oneshot", "User=slurm", "Restart=on-failure", "RestartSec=30",
                 "StartLimitIntervalSec=0", "WorkingDirectory=/opt/gpucluster/lib",
                 f"ExecStart=/usr/bin/python3 -E -s -m gpucluster_agents accounts reconcile --file {ACCOUNTS_PATH}"):  # fmt: skip
        assert line in service.splitlines(), line
    assert "RemainAfterExit" not in service  # the path unit must be able to start it again
    path_unit = files[f"/etc/systemd/system/{ACCOUNTS_PATH_UNIT}"]
    assert f"PathChanged={ACCOUNTS_PATH}" in path_unit and f"Unit={ACCOUNTS_UNIT}" in path_unit
    timer = files[f"/etc/systemd/system/{ACCOUNTS_TIMER}"]  # a team kept for its jobs goes within the hour they end
    assert "OnUnitInactiveSec=1h" in timer.splitlines() and f"Unit={ACCOUNTS_UNIT}" in timer.splitlines()
    assert f"systemctl enable {ACCOUNTS_UNIT} {ACCOUNTS_PATH_UNIT} {ACCOUNTS_TIMER}" in files["setup"]
    assert f"systemctl start {ACCOUNTS_PATH_UNIT} {ACCOUNTS_TIMER}" in files["setup"]
    assert f"systemctl start --no-block {ACCOUNTS_UNIT}" in files["setup"]  # a slurmdbd not up yet never fails the setup
    without = head_of(ctx_of())
    assert ACCOUNTS_PATH not in without and ACCOUNTS_UNIT not in without["setup"]
    # systemd reads the three units without a complaint
    analyze = require_tool("systemd-analyze")
    for name, text in ((ACCOUNTS_UNIT, service), (ACCOUNTS_PATH_UNIT, path_unit), (ACCOUNTS_TIMER, timer)):
        (tmp_path / name).write_text(text.replace("/usr/bin/python3", "/bin/true"))
    verify = subprocess.run(
        [analyze, "verify", "--man=no", *(str(tmp_path / u) for u in (ACCOUNTS_PATH_UNIT, ACCOUNTS_TIMER, ACCOUNTS_UNIT))],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    complaints = [ln for ln in verify.stderr.splitlines() if "slurmdbd.service" not in ln and "sssd.service" not in ln]
    assert complaints == [], verify.stderr


def test_teams_no_longer_grow_the_head_node_user_data_and_its_size_is_still_checked(monkeypatch):
    """Teams grow the head node's files (the accounts contract), which ride in its bundle in S3 now
    (render/slurm/headfiles.py): 100 teams pass the size check that guards the user data before any resource, the
    contract in the bundle. (Each team's POSIX group does ride in every node's users script, about 10 bytes gzipped
    a team: the compute nodes' 16 KB, not the head node's, bounds the number of declared-user teams, near 120 with
    this identity.) The check still sizes the head node's user data: past 16 KB it is an error whose fix says
    nothing in the config can shrink it (the user data holds only gpucluster's own fetching files)."""
    from gpucluster.render.compute.user_data import user_data_findings
    from gpucluster.render.slurm import head as head_module

    # Names whose groups' gids (taken from the name, team_posix) do not collide: a collision is refused at load.
    names = list({default_slot(n): n for n in (f"team-{i:03d}" for i in range(110))}.values())[:100]
    teams = [{"name": n, "users": ["alice", "bob", "carol"], "maxJobTime": "7d"} for n in names]
    section = {"identity": IDENTITY_DECLARED, "accounting": {}, "teams": teams}
    cluster = load_spec(make_config(P5, slurm=section), stack="teams").cluster
    assert user_data_findings(cluster) == []
    ctx = ctx_of(*teams)
    targets = {g.name: LaunchTarget("lt-0123456789abcdef0", ("subnet-0123456789abcdef0",)) for g in ctx.node_groups}
    inputs = HeadInputs("vol-0123456789abcdef0", AgentBundle("artifacts-bucket", "key", "0" * 64), agent_config(ctx, targets))
    both = head_user_data(ctx, inputs)
    assert ACCOUNTS_PATH in [f["path"] for f in json.loads(str(both.live))["files"]]  # live: no head restart for a team
    assert ACCOUNTS_PATH not in [f.path for f in both.config.write_files]
    real = head_module.head_cloud_config

    def oversize(ctx: SlurmContext, inputs: HeadInputs) -> CloudConfig:
        config = real(ctx, inputs)
        noise = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(600))  # 38 KB gzip cannot shrink
        return dataclasses.replace(config, write_files=(*config.write_files, WriteFile("/etc/gpucluster/noise", noise)))

    monkeypatch.setattr(head_module, "head_cloud_config", oversize)
    (finding,) = user_data_findings(cluster)
    assert (finding.code, finding.path) == ("user-data-too-large", "gpucluster:slurm")
    assert "the head node's user data would be" in finding.message
    assert "/etc/gpucluster/noise" in finding.fix and "gpucluster bug" in finding.fix
