"""The README and the generated config reference stay true."""

from __future__ import annotations

import re

from gpucluster.tools.docs import REFERENCE, config_reference
from gpucluster.tools.plan.run.stackfile import stack_names
from tests.conftest import ROOT


def test_config_reference_is_generated():
    assert REFERENCE.read_text() == config_reference(), "run `gpucluster docs` and commit docs/config-reference.md"


def test_readme_has_a_section_per_stack():
    readme = (ROOT / "README.md").read_text()
    sections = set(re.findall(r"^### Stack `([^`]+)`", readme, flags=re.M))
    assert sections == set(stack_names())


def test_readme_commands_exist():
    readme = (ROOT / "README.md").read_text()
    assert "gpucluster plan --stack dev" in readme
    assert "pytest" in readme
    assert ".ci/run" in readme


def test_readme_test_command_is_what_ci_runs():
    """The command the README gives is the one .ci/run runs after its set-up: the same run, parallel or not
    (pyproject.toml's addopts), in CI and at a desk."""
    readme = (ROOT / "README.md").read_text()
    (command,) = re.findall(r"the test command alone is `([^`]+)`", readme)
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "== tests (the README's test command)" in line)
    assert lines[at + 1].strip() == command
