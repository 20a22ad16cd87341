"""``slurm-conf-allowed-keys``: the rendered slurm.conf holds only gpucluster's keys and the settings hatch's allow list.
The loader refuses a hostile ``slurm.settings``, so these plans carry the keys the way only a bypass could: injected
into slurm-p5's real plan (its head files bundle) after rendering."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster.policy.evaluate import evaluate, from_plan
from gpucluster.policy.slurm_rules import SLURM_CONF_KEYS, conf_items
from gpucluster.tools import cli
from tests.conftest import GOLDEN, HOSTILE_SLURM_SETTINGS

CONF = "/etc/slurm/slurm.conf"


def with_settings(doc: dict[str, Any], lines: str) -> dict[str, Any]:
    """``doc`` (a plan) with ``lines`` appended to the slurm.conf of its head files bundle."""
    doc = copy.deepcopy(doc)
    [files] = [r for r in doc["resources"] if r["name"].endswith("-slurm-head-files")]
    bundle = json.loads(files["inputs"]["content"])
    [entry] = [f for f in bundle["files"] if f["path"] == CONF]
    entry["content"] += lines
    files["inputs"]["content"] = json.dumps(bundle)
    return doc


def slurm_p5() -> dict[str, Any]:
    return json.loads((GOLDEN / "plans" / "slurm-p5.json").read_text())


def test_h2_policy_reports_each_hostile_key_in_the_slurm_p5_plan(tmp_path: Path, capsys):
    hostile = "".join(f"{k}={v}\n" for k, v in HOSTILE_SLURM_SETTINGS.items())
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(with_settings(slurm_p5(), hostile)))
    assert cli.main(["policy", "--plan", str(path)]) == 3
    out = " ".join(capsys.readouterr().out.split())
    assert f"FAIL ({len(HOSTILE_SLURM_SETTINGS)}) {SLURM_CONF_KEYS}" in out
    for key in HOSTILE_SLURM_SETTINGS:
        assert f"sets {key} (files bundle, file {CONF}, line" in out, key
    assert out.count("not settable: it names code that runs as root") == len(HOSTILE_SLURM_SETTINGS)


def test_h2_the_rule_passes_gpucluster_keys_and_the_allow_list_and_names_the_rest():
    assert [v for v in evaluate(from_plan(slurm_p5())) if v.rule == SLURM_CONF_KEYS] == []
    allowed = with_settings(slurm_p5(), "# Your own keys\nMaxJobCount=20000\nkillwait=45\n")
    assert [v for v in evaluate(from_plan(allowed)) if v.rule == SLURM_CONF_KEYS] == []
    off_list = with_settings(slurm_p5(), "TmpFS=/fsx/tmp\n  PriorityFavorSmall = YES\n")
    found = [v.message for v in evaluate(from_plan(off_list)) if v.rule == SLURM_CONF_KEYS]
    assert [m.split(" (", 1)[0] for m in found] == ["sets TmpFS", "sets PriorityFavorSmall"]


def test_conf_keys_reads_keys_not_comments_or_continued_values():
    text = "# Epilog=/x\nKillWait=30\n\n  SlurmdUser =bob\nNodeName=a CPUs=4 Epilog=/y\n"
    assert conf_items(text) == [(2, "KillWait", "30"), (4, "SlurmdUser", "bob"), (5, "NodeName", "a")]


@pytest.mark.parametrize("key", ["Prolog", "Epilog", "TaskProlog", "ResumeProgram", "HealthCheckProgram"])
def test_a_program_gpucluster_owns_must_be_one_of_its_own(key):
    """Owning a key is not enough: ``Epilog=/fsx/...`` in a rendered slurm.conf runs a researcher's file as root on every
    node, so gpucluster's program keys must name a program in root's own gpucluster directories."""
    from gpucluster.facts.slurm_settings import rendered_value_ok

    assert rendered_value_ok(key, "/etc/gpucluster/slurm/prolog.d/*") and rendered_value_ok(key, "/opt/gpucluster/bin/x")
    assert not rendered_value_ok(key, "/fsx/shared/epilog.sh")
    assert not rendered_value_ok(key, "/etc/gpucluster/../../fsx/e.sh")
    assert rendered_value_ok("MailProg", "/bin/true") and rendered_value_ok("SchedulerType", "sched/backfill")


def test_a_rendered_epilog_on_shared_storage_is_reported():
    """A slurm.conf built another way that points gpucluster's Epilog at a file researchers can write is refused."""
    plan = with_settings(slurm_p5(), "Epilog=/fsx/shared/epilog.sh\n")
    found = [v for v in evaluate(from_plan(plan)) if v.rule == SLURM_CONF_KEYS]
    assert len(found) == 1 and "sets Epilog=/fsx/shared/epilog.sh" in found[0].message, found
