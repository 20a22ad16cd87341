"""Commit subjects: at most 72 characters and a blank line before the body (CONTRIBUTING.md "Commit messages").

The rule holds from :data:`SINCE` on (the history before it keeps its long subjects). The repository's own history
is the fixture: a shallow clone that lacks ``SINCE`` checks what it has.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import ROOT

SINCE = "812ecee"
"""The last commit before the rule."""
LIMIT = 72


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def bad_messages(messages: list[str]) -> list[str]:
    """The messages that break the rule, each as ``"<length>: <subject>"`` or ``"no blank line: <subject>"``."""
    out = []
    for message in messages:
        lines = message.split("\n")
        if len(lines[0]) > LIMIT:
            out.append(f"{len(lines[0])}: {lines[0]}")
        if len(lines) > 1 and lines[1].strip():
            out.append(f"no blank line: {lines[0]}")
    return out


def _messages() -> list[str]:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.fail("the commit-message rule reads the repository's history: run the tests in a git checkout")
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{SINCE}^{{commit}}"], capture_output=True)
    span = f"{SINCE}..HEAD" if known.returncode == 0 else "HEAD"
    raw = _git("log", "--no-merges", "--format=%B%x00", span)
    return [m.strip("\n") for m in raw.split("\0") if m.strip()]


def test_every_commit_since_the_rule_has_a_short_subject():
    bad = bad_messages(_messages())
    assert not bad, f"commit subjects over {LIMIT} characters or without a blank line after them: {bad}"


def test_the_rule_finds_a_long_subject_and_a_missing_blank_line():
    assert bad_messages(["Short subject\n\nbody"]) == []
    assert bad_messages(["x" * 73]) == [f"73: {'x' * 73}"]
    assert bad_messages(["Subject\nbody without a blank line"]) == ["no blank line: Subject"]
