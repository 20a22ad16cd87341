"""The plan reads well at the width it is printed for: no line wider than the terminal (120 columns when the output
is not one, or ``--width N``), within the two-screen line budget at 120; long lists elided with their count, IAM
roles one line each with their statements summarised, everything in full in ``--detail``; the JSON plan the same
whatever the width."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from gpucluster.tools.plan.run.json import dumps
from gpucluster.tools.plan.run.stackfile import stack_names
from gpucluster.tools.plan.show.policy import statements, summary_parts
from gpucluster.tools.plan.show.report import SCREENS, render_text
from gpucluster.tools.plan.show.width import DEFAULT_WIDTH, elide, hanging, wrap
from tests.conftest import ROOT
from tests.plans import shipped_plan

ROLE = "aws:iam/role:Role"
INLINE = "aws:iam/rolePolicy:RolePolicy"


@pytest.fixture(scope="module")
def plans():
    return {stack: shipped_plan(stack) for stack in stack_names()}


@pytest.mark.parametrize("width", [DEFAULT_WIDTH, 80])
@pytest.mark.parametrize("stack", stack_names())
def test_no_line_of_a_shipped_stacks_plan_is_wider_than_its_width(stack, width, plans):
    text = render_text(plans[stack], width=width)
    wide = [line for line in text.splitlines() if len(line) > width]
    assert not wide, f"{stack} at {width}: {len(wide)} lines wider, the widest {max(map(len, wide))}"
    if width == DEFAULT_WIDTH:  # what a log, a pipe or a file gets: two screens, and the hard limit
        assert len(text.splitlines()) <= SCREENS and max(map(len, text.splitlines())) <= 200


def test_roles_read_one_line_each_with_their_statements_summarised(plans):
    plan = plans["slurm-p5"]
    lines = render_text(plan, width=DEFAULT_WIDTH).splitlines()
    roles = [r for r in plan.resources if r.type == ROLE and r.name.startswith("slurm-p5-slurm-")]
    assert len(roles) == 4
    for role in roles:
        inline = [  # its own component's policies (the monitoring component's are on that component's line)
            r
            for r in plan.resources
            if r.type == INLINE and r.inputs.get("role") == role.state.get("name") and r.parent == role.parent
        ]
        (line,) = [line for line in lines if f"aws:iam:Role  …-{role.name.removeprefix('slurm-p5-slurm-')}  — " in line]
        count = sum(len(statements(p.inputs["policy"]) or []) for p in inline)
        assert "assumed by ec2.amazonaws.com" in line and f"ec2.amazonaws.com · {count} statements" in line, line
    head = next(line for line in lines if "…-head-role  — " in line)
    assert "(1 Deny, 12 conditioned)" in head  # the agent's NoOtherImageThanTheTemplates denial is said


def test_a_policy_summary_counts_actions_per_service_and_resources_by_kind():
    doc = {
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": "arn:aws:s3:::b/k/*"},
            {"Effect": "Deny", "Action": "s3:GetObject", "Resource": ["arn:aws:s3:::b/x", "*"], "Condition": {"Bool": {}}},
            {"Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
        ]
    }
    assert summary_parts([json.dumps(doc)]) == [
        "3 statements (1 Deny, 1 conditioned)",
        "actions s3 2, ec2 1",
        "resources s3 2, any (*) 1",
    ]
    assert summary_parts(["not json"]) == ["policy (not yet known)"]


def test_detail_keeps_every_statement_and_name_and_wraps_under_the_item(plans):
    plan = plans["slurm-p5"]
    text = render_text(plan, width=DEFAULT_WIDTH, detail=True)
    lines = text.splitlines()
    assert max(map(len, lines)) <= DEFAULT_WIDTH and len(lines) > SCREENS  # no line budget in full
    words = set(text.split())
    sids = {st["Sid"] for r in plan.resources if r.type == INLINE for st in statements(r.inputs["policy"]) or []}
    assert sids and all(f"{sid}:" in words for sid in sids)
    assert all(r.name in words for r in plan.resources)
    assert "… and" not in text.split("Rendered files")[0]  # nothing elided
    default = render_text(plan, width=DEFAULT_WIDTH)
    assert "LaunchOnlyTheClustersInstances" in text and "LaunchOnlyTheClustersInstances" not in default


def test_a_wrapped_line_continues_under_its_item():
    line = "│  ├─ aws:iam:RolePolicy  name  — " + " · ".join(f"part{n} is long enough" for n in range(12))
    rows = wrap(line, 60)
    assert len(rows) > 1 and all(len(r) <= 60 for r in rows)
    assert all(r.startswith("│  │   ") for r in rows[1:])  # the rails go on, the text under the item
    assert [w for r in rows for w in r.split() if w.startswith("part")] == [f"part{n}" for n in range(12)]
    assert hanging("  users      alice, bob") == " " * 15  # a summary row: under its value, two columns in
    assert wrap("short", 60) == ["short"]


def test_elided_lists_say_how_many_and_keep_a_warning():
    parts = ["alpha", "bravo", "NOT encrypted (!)", "delta", "echo"]
    assert elide("x: ", parts, 80) == "x: " + " · ".join(parts)
    assert elide("x: ", parts, 50) == "x: alpha · NOT encrypted (!) · … and 3 more"  # the warning, whatever its place
    names = elide("n-{", [f"name{n}" for n in range(30)], 40, ",", first=True)
    assert names.startswith("n-{name0,") and names.endswith(" more") and len(names) <= 40


# --- the CLI -------------------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    drop = ("CI", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "TERM": "xterm-256color", "NO_COLOR": "1"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucluster.tools.cli", "plan", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=180,
    )


def _on_a_terminal(columns: int, *args: str) -> str:
    """The CLI's output on a pseudo-terminal of ``columns`` columns."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucluster.tools.cli", "plan", *args],
        cwd=ROOT,
        stdout=follower,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=180) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.slow  # four CLI processes, one on a pseudo-terminal, each planning a stack
def test_cli_takes_the_terminals_width_else_120_or_width_n():
    on_terminal = _on_a_terminal(90, "--stack", "slurm-p5", "--no-files")
    assert 80 < _widest(on_terminal) <= 90
    piped = _cli("--stack", "slurm-p5", "--no-files")
    assert piped.returncode == 0 and 100 < _widest(piped.stdout) <= DEFAULT_WIDTH
    narrow = _cli("--stack", "slurm-p5", "--no-files", "--width", "70")
    assert narrow.returncode == 0 and _widest(narrow.stdout) <= 70
    detail = _cli("--stack", "slurm-p5", "--no-files", "--detail")
    assert detail.returncode == 0 and _widest(detail.stdout) <= DEFAULT_WIDTH and "PassTheNodeRoleToEc2:" in detail.stdout
    helped = _cli("--help")
    assert "--width N" in helped.stdout and "else 120" in " ".join(helped.stdout.split())


@pytest.mark.parametrize("given", ["12", "wide", "-1"])
@pytest.mark.slow  # a CLI process each
def test_a_bad_width_is_a_usage_error_naming_it(given):
    result = _cli("--stack", "dev", "--width", given)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--width: '{given}' is not a width" in result.stderr and "at least 60" in result.stderr


@pytest.mark.slow  # two CLI processes, each planning the dev stack
def test_the_json_plan_is_the_same_at_any_width(plans):
    wide, narrow = _cli("--stack", "dev", "--json", "--width", "200"), _cli("--stack", "dev", "--json", "--width", "60")
    assert wide.returncode == narrow.returncode == 0
    assert wide.stdout == narrow.stdout == dumps(plans["dev"])
