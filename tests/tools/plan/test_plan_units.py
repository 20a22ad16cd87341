"""Every systemd unit gpucluster writes, in every shipped stack's plan, that runs Python runs it shielded from its
environment: ``-I``, or ``-E -s`` from a fixed ``WorkingDirectory`` (under ``-m`` the working directory is the first
entry of ``sys.path``), so no ``PYTHON*`` variable, user site or stray directory of the unit's user reaches its imports.

The units are read where the nodes read them: the head node's files bundle and every user data (decoded as the policy
rules decode them), drop-ins merged into their unit."""

from __future__ import annotations

import json
import shlex
from pathlib import Path, PurePosixPath

import pytest

from gpucluster.policy.evaluate import from_plan
from gpucluster.policy.rules import _USER_DATA_PROPS, _WHERE
from gpucluster.policy.userdata import decode
from tests.conftest import GOLDEN

PLANS = sorted((GOLDEN / "plans").glob("*.json"))
SYSTEMD = "/etc/systemd/system/"


def unit_texts(doc: dict) -> dict[str, str]:
    """``{unit name: its text and its drop-ins' text}`` of every unit file a plan writes (any node)."""
    units: dict[str, str] = {}
    for r in from_plan(doc):
        for prop, encoded in _USER_DATA_PROPS.get(r.type, ()):
            value = r.get(prop)
            if not isinstance(value, str):
                continue
            for where, text in decode(value, base64_encoded=encoded, where=_WHERE.get(r.type, "user data")):
                path = where.rsplit(", file ", 1)[-1] if ", file " in where else ""
                if not path.startswith(SYSTEMD):
                    continue
                rel = PurePosixPath(path).relative_to(SYSTEMD)
                name = rel.parts[0].removesuffix(".d")
                units[f"{r.name}:{name}"] = units.get(f"{r.name}:{name}", "") + "\n" + text
    return units


def python_problems(unit: str) -> list[str]:
    """Why the unit's Python commands are not shielded (none: they are, or it runs no Python)."""
    out = []
    lines = [ln.strip() for ln in unit.splitlines()]
    fixed_cwd = any(ln.startswith("WorkingDirectory=/") for ln in lines)
    for line in lines:
        if not line.startswith(("ExecStart=", "ExecStartPre=", "ExecStartPost=", "ExecStop=")) or line.endswith("="):
            continue
        argv = shlex.split(line.split("=", 1)[1].lstrip("-@:+!"))
        if not argv or not PurePosixPath(argv[0]).name.startswith("python"):
            continue
        flags = set(argv[1 : argv.index("-m")] if "-m" in argv else argv[1:3])
        if "-I" not in flags and not {"-E", "-s"} <= flags:
            out.append(f"{line}: neither -I nor -E -s")
        if "-m" in argv and "-I" not in flags and not fixed_cwd:
            out.append(f"{line}: -m without a fixed WorkingDirectory (the cwd is the first entry of sys.path)")
    return out


@pytest.mark.parametrize("path", PLANS, ids=[p.stem for p in PLANS])
def test_l6_every_unit_that_runs_python_shields_it(path: Path):
    units = unit_texts(json.loads(path.read_text()))
    problems = {name: p for name, text in units.items() if (p := python_problems(text))}
    assert problems == {}


def test_l6_the_head_nodes_agent_units_are_among_those_checked():
    units = unit_texts(json.loads((GOLDEN / "plans" / "slurm-p5.json").read_text()))
    running = {name.split(":", 1)[1] for name, text in units.items() if "gpucluster_agents" in text and "python3" in text}
    assert {
        "gpucluster-accounts.service",
        "gpucluster-usage.service",
        "gpucluster-agent-maintain.service",
        "gpucluster-metrics.service",
    } <= running


def test_l6_the_check_finds_a_bare_python_and_a_module_without_a_directory():
    bare = "[Service]\nExecStart=/usr/bin/python3 -m gpucluster_agents usage\n"
    assert len(python_problems(bare)) == 2
    assert python_problems("[Service]\nWorkingDirectory=/opt/x\nExecStart=/usr/bin/python3 -E -s -m a\n") == []
    assert python_problems("[Service]\nExecStart=/usr/bin/python3 -I /opt/x/tool.py\n") == []
    assert python_problems("[Service]\nExecStart=/usr/bin/python3 -E -m a\n") != []
