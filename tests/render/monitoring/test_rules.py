"""The alert rules: checked by the real ``promtool`` (Debian's prometheus), fired and kept quiet by input series.

- every shipped stack's rules pass ``promtool check rules`` and match their golden file;
- ``promtool test rules`` runs a generated test file: for every alert, series that make it fire (with the exact
  labels and annotations it must carry) and near misses that must leave it quiet (alert_cases.py);
- every alert has a severity, a summary and a runbook, and bad arguments are refused before rendering.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.load import load_spec
from gpucluster.render.monitoring.rules import cluster_schedulers, groups, rule_groups
from gpucluster.tools.plan.run.stackfile import load_stack_config, stack_names
from gpucluster_agents.contract.xid import XID_CLASSES
from tests.conftest import GOLDEN, check_golden, require_tool
from tests.render.monitoring.alert_cases import CASES

CLUSTER = "test-cluster"


def _stack_rules() -> dict[str, str]:
    out = {}
    for stack in stack_names():
        _, config, _ = load_stack_config(stack)
        cluster = load_spec(config, stack=stack).cluster
        out[stack] = rule_groups(cluster.name, cluster_schedulers(cluster))
    return out


@pytest.fixture(scope="module")
def stack_rules() -> dict[str, str]:
    return _stack_rules()


def _rules_by_alert() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in groups(CLUSTER, ("slurm", "kubernetes")) for r in g["rules"]}  # type: ignore[index]


def test_every_stack_rules_pass_promtool_and_golden(stack_rules: dict[str, str], tmp_path: Path, update_golden: bool) -> None:
    promtool = require_tool("promtool")
    files = []
    for stack, text in stack_rules.items():
        check_golden(GOLDEN / "monitoring" / f"{stack}.rules.yaml", text, update_golden)
        path = tmp_path / f"{stack}.rules.yaml"
        path.write_text(text)
        files.append(str(path))
    proc = subprocess.run([promtool, "check", "rules", *files], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("SUCCESS") == len(files)


def test_stacks_get_their_schedulers_rules(stack_rules: dict[str, str]) -> None:
    eks = yaml.safe_load(stack_rules["eks-p5"])
    slurm = yaml.safe_load(stack_rules["slurm-p5"])
    alerts = {name: {r["alert"] for g in doc["groups"] for r in g["rules"]} for name, doc in (("eks", eks), ("slurm", slurm))}
    assert "GpuAllocatedIdleKubernetes" in alerts["eks"] and "SlurmctldDown" not in alerts["eks"]
    assert {"GpuAllocatedIdleSlurm", "SlurmctldDown", "SlurmdbdDown"} <= alerts["slurm"]
    assert "GpuAllocatedIdleKubernetes" not in alerts["slurm"]
    for needed in (
        "GpuTemperatureCritical",
        "GpuThermalThrottling",
        "GpuUncorrectableEccErrors",
        "GpuRowRemapPending",
        "GpuXidReplace",
    ):
        assert needed in alerts["eks"] and needed in alerts["slurm"]
    assert {r["labels"]["cluster"] for g in slurm["groups"] for r in g["rules"]} == {"slurm-p5"}


def test_every_alert_says_what_to_do() -> None:
    for alert, rule in _rules_by_alert().items():
        assert rule["labels"]["severity"] in ("critical", "warning"), alert
        assert len(rule["annotations"]["summary"]) > 20, alert
        assert len(rule["annotations"]["runbook"]) > 40, alert


def test_every_alert_has_cases_that_fire_and_stay_quiet() -> None:
    alerts = set(_rules_by_alert())
    fired = {c.alert for c in CASES if c.fires}
    quiet = {c.alert for c in CASES if not c.fires}
    assert alerts - fired == set(), "alerts no case makes fire"
    assert alerts - quiet == set(), "alerts no case keeps quiet"
    assert {c.alert for c in CASES} <= alerts


def _unit_tests(rules_file: str) -> dict[str, Any]:
    by_alert = _rules_by_alert()
    tests = []
    for case in CASES:
        runbook = by_alert[case.alert]["annotations"]["runbook"]
        severity = by_alert[case.alert]["labels"]["severity"]
        exp = [
            {
                "exp_labels": {**labels, "severity": severity, "cluster": CLUSTER},
                "exp_annotations": {"summary": summary, "runbook": runbook},
            }
            for labels, summary in case.fires
        ]
        tests.append(
            {
                "name": f"{case.alert} {'fires' if case.fires else 'stays quiet'}",
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
                "alert_rule_test": [{"eval_time": case.at, "alertname": case.alert, "exp_alerts": exp}],
            }
        )
    return {"rule_files": [rules_file], "evaluation_interval": "1m", "tests": tests}


def test_alerts_fire_and_stay_quiet_under_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    (tmp_path / "rules.yaml").write_text(rule_groups(CLUSTER, ("slurm", "kubernetes")))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(_unit_tests("rules.yaml"), sort_keys=False))
    proc = subprocess.run([promtool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "SUCCESS" in proc.stdout


def test_a_broken_expectation_fails_promtool(tmp_path: Path) -> None:
    """The harness can fail: a quiet case turned into an expected alert makes promtool exit 1."""
    promtool = require_tool("promtool")
    (tmp_path / "rules.yaml").write_text(rule_groups(CLUSTER, ("slurm", "kubernetes")))
    doc = _unit_tests("rules.yaml")
    quiet = next(t for t in doc["tests"] if not t["alert_rule_test"][0]["exp_alerts"])
    quiet["alert_rule_test"][0]["exp_alerts"] = [{"exp_labels": {"severity": "warning", "cluster": CLUSTER}}]
    doc["tests"] = [quiet]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = subprocess.run([promtool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout


def test_xid_classes_come_from_the_health_checks() -> None:
    exprs = _rules_by_alert()
    for code, (cls, _) in XID_CLASSES.items():
        replace_hit = f"DCGM_FI_DEV_XID_ERRORS == {code} " in exprs["GpuXidReplace"]["expr"] + " "
        reboot_hit = f"DCGM_FI_DEV_XID_ERRORS == {code} " in exprs["GpuXidReboot"]["expr"] + " "
        assert (replace_hit, reboot_hit) == (cls == "replace", cls == "reboot"), code


@pytest.mark.parametrize(
    ("name", "schedulers", "expected"),
    [
        ("bad name\n", ("slurm",), "cluster name 'bad name\\n' is not a plain name"),
        ("ok", ("pbs",), "each must be one of ('slurm', 'kubernetes')"),
        ("ok", ("slurm", "kubernets"), "schedulers ('slurm', 'kubernets')"),
    ],
)
def test_bad_arguments_are_refused(name: str, schedulers: tuple[str, ...], expected: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        rule_groups(name, schedulers)
    assert expected in str(info.value)
