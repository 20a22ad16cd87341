"""``gpucluster:slurm.settings`` is an allow list: a key gpucluster owns names the section that sets it, a key that
names a program, a plugin, a user or an authentication method is not settable, any other key is not on the list;
each refusal names the field, the value and the fix, through the real load, before any resource exists."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpucluster.config.errors import ConfigError, Finding
from gpucluster.facts.slurm_settings import ALLOWED, CODE, NOT_SETTABLE, OWNED, allowed_key, key_refusal
from gpucluster.load import load_spec
from gpucluster.tools.plan.run.stackfile import read_stack_file
from tests.conftest import HOSTILE_SLURM_SETTINGS

SETTINGS = "gpucluster:slurm.settings"
HOSTILE = HOSTILE_SLURM_SETTINGS


def slurm_p5(settings: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(read_stack_file("slurm-p5")["config"])
    config["gpucluster:slurm"] = {**config["gpucluster:slurm"], "settings": settings}
    return config


def refused(config: dict[str, Any]) -> list[Finding]:
    with pytest.raises(ConfigError) as exc:
        load_spec(config, stack="slurm-p5")
    assert "Traceback" not in str(exc.value)
    return list(exc.value.findings)


def test_h2_the_hostile_stack_is_refused_key_by_key_with_field_value_and_fix():
    findings = {f.path: f for f in refused(slurm_p5(HOSTILE))}
    for key, value in HOSTILE.items():
        finding = findings[f"{SETTINGS}.{key}"]
        assert finding.code == "slurm-setting-code", finding
        assert finding.value == value and repr(value) in finding.render()
        assert f"slurm.conf key {key} names" in finding.message and "a stack cannot set it" in finding.message
        assert finding.fix.startswith(NOT_SETTABLE), finding.fix
    assert len([f for f in findings if f.startswith(SETTINGS)]) == len(HOSTILE)


@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("EpilogSlurmctld", "a program Slurm runs as root"),
        ("SrunProlog", "a program"),
        ("RebootProgram", "a program"),
        ("ResvEpilog", "a program"),
        ("SlurmctldPrimaryOnProg", "a program"),
        ("JobCompLoc", "a program"),
        ("PluginDir", "a plugin"),
        ("JobSubmitPlugins", "a plugin"),
        ("LaunchParameters", "a plugin"),
        ("AuthInfo", "how Slurm authenticates"),
        ("UsePAM", "how Slurm authenticates"),
        ("AcctGatherEnergyType", "a program, plugin, user or authentication method"),  # by its shape
        ("BurstBufferType", "a program, plugin, user or authentication method"),
        ("TASKEPILOG", "a program"),  # Slurm reads keys in any case
    ],
)
def test_h2_keys_that_name_code_are_not_settable(key: str, what: str):
    [finding] = [f for f in refused(slurm_p5({key: "/fsx/x"})) if f.path == f"{SETTINGS}.{key}"]
    assert finding.code == "slurm-setting-code" and what in finding.message and finding.fix.startswith(NOT_SETTABLE)


def test_h2_a_key_off_the_list_is_refused_and_a_typo_gets_the_close_key():
    findings = {f.path: f for f in refused(slurm_p5({"MaxJobCont": 100, "TmpFS": "/fsx/tmp", "PriorityFavorSmall": "YES"}))}
    typo = findings[f"{SETTINGS}.MaxJobCont"]
    assert typo.code == "slurm-setting-not-allowed" and typo.value == "100"
    assert "not on the list of keys a stack may set" in typo.message and typo.fix.startswith("did you mean MaxJobCount?")
    assert findings[f"{SETTINGS}.TmpFS"].code == "slurm-setting-not-allowed"
    assert "docs/teams.md" in findings[f"{SETTINGS}.PriorityFavorSmall"].fix


def test_an_owned_key_names_its_section_and_the_value():
    [finding] = [f for f in refused(slurm_p5({"TaskProlog": "/home/bob/p.sh"})) if f.path == f"{SETTINGS}.TaskProlog"]
    assert finding.code == "slurm-setting-owned" and finding.value == "/home/bob/p.sh"
    assert "set by gpucluster" in finding.message and finding.fix.startswith("use gpucluster sets it")


def test_allowed_keys_load_in_any_case():
    spec = load_spec(slurm_p5({"MaxJobCount": 20000, "KillWAIT": 45, "SlurmctldDebug": "verbose"}), stack="slurm-p5")
    assert spec.cluster.slurm is not None and spec.cluster.slurm.spec.settings["KillWAIT"] == "45"


def test_the_tables_do_not_overlap_and_every_allowed_key_has_a_reason():
    lower = [k.lower() for k in (*OWNED, *ALLOWED, *CODE)]
    assert len(lower) == len(set(lower)), "a key in two tables"
    assert all(reason.strip() for reason in ALLOWED.values())
    assert all(key_refusal(k) is None for k in ALLOWED)
    assert all(key_refusal(k) is not None and allowed_key(k) is None for k in (*OWNED, *CODE))


@pytest.mark.parametrize("value", ["30 Epilog=/fsx/e.sh", "a=b", '"30"'])
def test_h2_an_allowed_key_cannot_carry_a_second_key_in_its_value(value: str):
    [finding] = [f for f in refused(slurm_p5({"KillWait": value})) if f.path == f"{SETTINGS}.KillWait"]
    assert finding.code == "slurm-setting-value" and finding.value == value and "another key" in finding.message


def test_docs_teams_lists_every_allowed_key():
    text = (Path(__file__).resolve().parents[3] / "docs" / "teams.md").read_text()
    section = text.split("## The escape hatch: `slurm.settings`", 1)[1].split("\n## ", 1)[0]
    assert [k for k in ALLOWED if f"`{k}`" not in section] == []
