"""``gpucluster:slurm.teams`` and ``gpucluster:slurm.settings``: each bad config fails through the real load, naming
its field, value and fix; good ones resolve to the limits the accounts contract and slurm.conf read."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.config.errors import ConfigError, Finding, Level
from gpucluster.config.slurm.teams import parse_job_time
from gpucluster.load import load_spec
from gpucluster.render.slurm.conf import slurm_conf
from gpucluster.render.slurm.names import SlurmContext
from tests.conftest import IDENTITY_DECLARED, IDENTITY_DIRECTORY, group, make_config

S = "gpucluster:slurm"
T = f"{S}.teams"
E = Level.ERROR
P5 = group(name="p5", maxSize=16)  # 16 x 8 H100 = 128
DEV = group(name="dev", instanceType="g6e.2xlarge", maxSize=2)  # 2 x 1 L40S
CPU = group(name="cpu", instanceType="m7i.2xlarge", maxSize=4)


def teams_config(*teams: dict[str, Any], groups: tuple[dict[str, Any], ...] = (P5,), identity: Any = IDENTITY_DECLARED,
                 accounting: bool = True, **slurm: Any) -> dict[str, Any]:  # fmt: skip
    section: dict[str, Any] = {"teams": [copy.deepcopy(t) for t in teams], **slurm}
    if accounting:
        section["accounting"] = {}
    if identity is not None:
        section["identity"] = copy.deepcopy(identity)
    return make_config(*groups, slurm=section)


RESEARCH = {"name": "research", "gpuQuota": {"h100": 85}, "users": ["alice", "bob"]}
APPLIED = {"name": "applied", "gpuQuota": {"h100": 43}, "borrow": True, "users": ["carol", "bob"]}

# (code, config, path, message fragment, fix fragment)
ROWS = [
    ("teams-need-accounting", teams_config(RESEARCH, accounting=False), T, "this cluster has none", "add accounting: {}"),
    ("team-duplicate", teams_config(RESEARCH, {**APPLIED, "name": "research"}), f"{T}[1].name",
     "two teams are named 'research'", "its own name"),
    ("team-unknown-user", teams_config({**RESEARCH, "users": ["alice", "mallory"]}), f"{T}[0].users",
     "user 'mallory', who is not a declared user", "declare 'mallory' under slurm.identity.users"),
    ("team-unknown-user", teams_config(RESEARCH, identity=None), f"{T}[0].users", "(declared: none)", "declare"),
    ("team-groups-need-directory", teams_config({**RESEARCH, "directoryGroups": ["ml-research"]}),
     f"{T}[0].directoryGroups", "slurm.identity has no directory", "set slurm.identity.directory"),
    ("team-group-name", teams_config({"name": "research", "directoryGroups": ["ml:research"]}, identity=IDENTITY_DIRECTORY),
     f"{T}[0].directoryGroups", "'ml:research' of team 'research' is not a group name", "getent group"),
    ("team-quota-unknown-flavor", teams_config({**RESEARCH, "gpuQuota": {"a100": 8}}), f"{T}[0].gpuQuota",
     "no Slurm node group has 'a100' GPUs", "use a GPU flavor of the Slurm node groups: h100"),
    ("team-quota-above-capacity", teams_config(RESEARCH, {**APPLIED, "gpuQuota": {"h100": 48}}), T,
     "teams are guaranteed 133 h100 GPUs (research 85, applied 48), but the Slurm partitions hold at most 128",
     "lower the h100 quotas to 128 in total, or raise the h100 node groups' maxSize"),
    ("slurm-setting-owned", teams_config(RESEARCH, settings={"SelectType": "select/linear"}), f"{S}.settings.SelectType",
     "SelectType is set by gpucluster", "(not configurable)"),
    ("slurm-setting-owned", teams_config(RESEARCH, settings={"prioritytype": "priority/basic"}),
     f"{S}.settings.prioritytype", "PriorityType is set by gpucluster", "use slurm.teams"),
    ("slurm-setting-owned", teams_config(RESEARCH, settings={"PartitionName": "x Nodes=ALL"}), f"{S}.settings.PartitionName",
     "PartitionName is set by gpucluster", "nodeGroups and slurm.nodeGroups"),
    ("slurm-setting-owned", teams_config(RESEARCH, settings={"SuspendTime": 60}), f"{S}.settings.SuspendTime",
     "SuspendTime", "use slurm.powerSaving"),
    ("slurm-setting-key", teams_config(RESEARCH, settings={"Max Job Count": "10"}), f"{S}.settings.Max Job Count",
     "is not a slurm.conf key", "slurm.conf(5)"),
    ("slurm-setting-value", teams_config(RESEARCH, settings={"KillWait": "60\nSlurmUser=root"}), f"{S}.settings.KillWait",
     "line break", "one-word value"),
    ("slurm-setting-value", teams_config(RESEARCH, settings={"KillWait": "60 # one minute"}), f"{S}.settings.KillWait",
     "'#'", "without '#'"),
]  # fmt: skip


def hybrid(key: str, value: Any) -> dict[str, Any]:
    """The shipped hybrid-slurm stack (a site's own controller) with ``slurm.<key>`` set."""
    config = yaml.safe_load((Path(__file__).resolve().parents[3] / "stacks" / "Pulumi.hybrid-slurm.yaml").read_text())["config"]
    config[S] = {**config.get(S, {}), key: value}
    return config


ROWS += [
    ("teams-hybrid", hybrid("teams", [{"name": "research"}]), T, "its accounts are the site's", "sacctmgr there"),
    ("settings-hybrid", hybrid("settings", {"MaxJobCount": 5}), f"{S}.settings", "reads its own slurm.conf",
     "the site's slurm.conf"),
]  # fmt: skip


def findings_of(config: dict[str, Any]) -> list[Finding]:
    try:
        return list(load_spec(config, stack="teams").findings)
    except ConfigError as exc:
        assert "Traceback" not in str(exc)
        return list(exc.findings)


@pytest.mark.parametrize(("code", "config", "path", "message", "fix"), ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)])
def test_bad_teams_config(code: str, config: dict[str, Any], path: str, message: str, fix: str):
    found = findings_of(config)
    match = [f for f in found if f.code == code and f.path == path]
    assert match, f"no {code} at {path}; got {[(f.code, f.path, f.message) for f in found]}"
    assert match[0].level is E
    assert message in match[0].message, match[0].message
    assert fix in match[0].fix, match[0].fix
    with pytest.raises(ConfigError):
        load_spec(config, stack="teams")


@pytest.mark.parametrize(
    ("team", "path", "fragment"),
    [
        ({"name": "Research"}, "teams[0].name", "is not a valid name"),
        ({"name": "research", "fairShare": 0}, "teams[0].fairShare", "greater than or equal to 1"),
        ({"name": "research", "gpuQuota": {"h100": -1}}, "teams[0].gpuQuota", "0 or more"),
        ({"name": "research", "maxJobTime": "a week"}, "teams[0].maxJobTime", "Slurm time"),
        ({"name": "research", "borrow": "yes"}, "teams[0].borrow", ""),
    ],
)
def test_bad_team_fields_are_refused_at_parse(team: dict[str, Any], path: str, fragment: str):
    with pytest.raises(ConfigError) as exc:
        load_spec(teams_config(team), stack="teams")
    text = str(exc.value)
    assert f"{S}.{path}" in text and fragment in text, text


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("90", 90), ("90m", 90), ("12h", 720), ("7d", 10080), ("1w", 10080), ("7-0", 10080), ("2-12:30", 3630),
     ("1:30:00", 90), ("10:30", 11), ("48:00:00", 2880)],
)  # fmt: skip
def test_job_times_in_slurm_and_duration_forms(text: str, minutes: int):
    assert parse_job_time(text) == minutes


@pytest.mark.parametrize("text", ["0", "0m", "1:61:00", "400d", "7 days", "-5", ""])
def test_bad_job_times(text: str):
    with pytest.raises(ValueError, match="maxJobTime"):
        parse_job_time(text)


def test_one_gpu_model_limits_gres_gpu_and_fair_share_follows_the_guarantee():
    teams = load_spec(teams_config(RESEARCH, APPLIED, {"name": "ops", "users": ["alice"]}, groups=(P5, CPU)), stack="t")
    resolved = teams.cluster.slurm.teams  # type: ignore[union-attr]
    assert resolved is not None
    assert "\nAccountingStorageTRES=gres/gpu\n" in slurm_conf(SlurmContext.of(teams.cluster))
    by_name = {t.name: t for t in resolved.teams}
    assert by_name["research"].grp_tres == {"gres/gpu": 85} and by_name["research"].fairshare == 85
    assert by_name["applied"].qos == ("normal", "borrow") and by_name["research"].qos == ("normal",)
    # a team without a quota of a flavor others hold quotas of may only borrow it; its fair share is the minimum
    assert by_name["ops"].grp_tres == {"gres/gpu": 0} and by_name["ops"].fairshare == 1
    normal, borrow = resolved.qos
    assert normal.name == "normal" and normal.preempt == ("borrow",) and normal.preempt_mode == "cluster"
    assert borrow.grp_tres == {"gres/gpu": 128} and borrow.preempt_mode == "requeue" and borrow.priority == 0


def test_several_gpu_models_limit_each_model_and_leave_unnamed_ones_free():
    config = teams_config({**RESEARCH, "fairShare": 10, "maxJobTime": "2-0"}, groups=(P5, DEV))
    cluster = load_spec(config, stack="t").cluster
    resolved = cluster.slurm.teams  # type: ignore[union-attr]
    assert resolved is not None
    assert "\nAccountingStorageTRES=gres/gpu,gres/gpu:h100,gres/gpu:l40s\n" in slurm_conf(SlurmContext.of(cluster))
    (research,) = resolved.teams
    assert research.grp_tres == {"gres/gpu:h100": 85}  # nobody holds an l40s quota: l40s is not limited
    assert research.fairshare == 10 and research.max_wall_minutes == 2880
    assert [q.name for q in resolved.qos] == ["normal"]  # nobody borrows: no borrow QOS, no preemption
    assert resolved.qos[0].preempt == ()


def test_no_teams_resolve_to_none():
    assert load_spec(make_config(group(), slurm={"accounting": {}}), stack="t").cluster.slurm.teams is None  # type: ignore[union-attr]


def test_settings_values_from_yaml_numbers_and_switches_become_text():
    spec = load_spec(make_config(group(), slurm={"settings": {"MaxJobCount": 20000, "DisableRootJobs": True}}), stack="t")
    assert spec.cluster.slurm.spec.settings == {"MaxJobCount": "20000", "DisableRootJobs": "yes"}  # type: ignore[union-attr]
