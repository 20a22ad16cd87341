"""``gpucluster policy``: the rules over a stack's offline plan or a JSON plan, findings printed, exit 3
on a violation."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.policy.evaluate import RULES, evaluate, from_plan
from gpucluster.tools import cli
from tests.conftest import ROOT
from tests.tools.policy.fixtures import FIXTURES


def gpucluster(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucluster.tools.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=180
    )


@pytest.mark.slow  # a CLI process that plans slurm-p5
def test_a_shipped_stack_passes_as_a_user_runs_it():
    result = gpucluster("policy", "--stack", "slurm-p5")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"gpucluster policy — stack slurm-p5: {len(RULES)} rules over ")
    assert sum(1 for line in lines if line.lstrip().startswith("pass ")) == len(RULES) == 20
    assert lines[-1] == "no violations" and result.stderr == ""


@pytest.mark.parametrize("rule", sorted(FIXTURES))
def test_each_failing_fixture_exits_3_with_its_violations(rule: str, tmp_path: Path, capsys):
    doc, expected = FIXTURES[rule]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["policy", "--plan", str(path)]) == 3
    out = capsys.readouterr().out
    count = len(evaluate(from_plan(doc)))  # the user-data fixture's login instance breaks the rule twice
    assert f"FAIL ({count}) {rule} " in " ".join(out.split())
    for _, name, prop in expected:
        assert f'"{name}" {prop}: ' in out
    assert out.rstrip().endswith("violation(s)")


def test_json_output_lists_rules_and_violations(tmp_path: Path, capsys):
    doc, expected = FIXTURES["vpc-flow-logs"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["policy", "--plan", str(path), "--json"]) == 3
    body = json.loads(capsys.readouterr().out)
    counts = {r["name"]: r["violations"] for r in body["rules"]}
    assert counts["vpc-flow-logs"] == 1 and sum(counts.values()) == 1
    (v,) = body["violations"]
    assert (v["rule"], v["name"], v["property"]) == next(iter(expected))
    assert v["urn"].endswith("::dark") and "FlowLog" in v["fix"]


@pytest.mark.slow  # a CLI process that plans a stack
def test_a_real_stack_that_turns_off_flow_logs_and_protection_fails(tmp_path: Path):
    """The rules read what the program really registers, not only hand-written fixtures."""
    project = tmp_path / "proj"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", project)
    shutil.copy(ROOT / "__main__.py", project)
    (project / "stacks" / "Pulumi.lax.yaml").write_text(
        "config:\n  aws:region: us-east-1\n  gpucluster:network:\n    flowLogs: {enabled: false}\n"
        "  gpucluster:storage:\n    protectData: false\n    lustre: {storageCapacityGib: 1200, throughputPerUnitStorage: 250}\n"
        "  gpucluster:nodeGroups:\n    - {name: gpu, instanceType: g6e.xlarge, availabilityZones: [us-east-1a], maxSize: 1}\n"
    )
    result = gpucluster("--project-dir", str(project), "policy", "--stack", "lax", "--json")
    assert result.returncode == 3, result.stdout + result.stderr
    found = {(v["rule"], v["type"].split(":")[-1]) for v in json.loads(result.stdout)["violations"]}
    assert ("vpc-flow-logs", "Vpc") in found
    assert ("data-protected", "LustreFileSystem") in found and ("data-protected", "Key") in found


def test_a_failed_plan_or_an_unreadable_file_is_not_a_pass(tmp_path: Path, capsys):
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps({"stack": "x", "ok": False, "error": "gpucluster:nodeGroups: required", "resources": []}))
    assert cli.main(["policy", "--plan", str(failed)]) == 2
    assert "the plan failed, nothing to check" in capsys.readouterr().err
    assert cli.main(["policy", "--plan", str(tmp_path / "missing.json")]) == 1
    assert "no such file" in capsys.readouterr().err
