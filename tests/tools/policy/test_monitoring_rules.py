"""The monitoring rules bite on a copy of a shipped stack's plan that breaks them (and pass the plan itself)."""

from __future__ import annotations

import copy
import json

from gpucluster.policy.evaluate import RULES, evaluate, from_plan
from tests.conftest import ROOT

PLAN = ROOT / "tests" / "golden" / "plans" / "slurm-p5.json"


RULE = [r for r in RULES if r.name == "log-groups-encrypted-retained"]


def _violations(doc):
    return {(v.rule, v.name, v.property) for v in evaluate(from_plan(doc), RULE)}


def test_a_monitoring_log_group_without_its_key_or_retention_is_refused():
    doc = json.loads(PLAN.read_text())
    assert _violations(doc) == set()
    broken = copy.deepcopy(doc)
    group = next(r for r in broken["resources"] if r["name"] == "slurm-p5-monitoring-logs")
    del group["inputs"]["kmsKeyId"]
    group["inputs"]["retentionInDays"] = 0
    assert _violations(broken) == {
        ("log-groups-encrypted-retained", "slurm-p5-monitoring-logs", "kmsKeyId"),
        ("log-groups-encrypted-retained", "slurm-p5-monitoring-logs", "retentionInDays"),
    }
