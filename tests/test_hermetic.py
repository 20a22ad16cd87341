"""Tests read fixtures, never this machine's kernel log. The host's log holds whatever its
users put there (a segfaulting program's name is enough to look like an XID) and differs from machine to
machine, so a test that reads it passes or fails by where it runs.

A static scan of every test module: no string that opens /dev/kmsg or runs dmesg or journalctl, and no
health config without a kernel log file (``kernel_log_file=None``) unless the same test points the
program's own sources (``xid.KMSG``, ``xid.JOURNAL``) at fixtures. Configs the tests hand to the program
as files name a fixture log (``tests/agents/health/fakes.p5_config``; the Kubernetes test sets it in the rendered
config).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

TESTS = ROOT / "tests"
SOURCES = ("dmesg", "journalctl")
# a command word at the start of a string or of a shell command inside it
COMMAND_RE = re.compile(r"(?:^|[\n;&|`(]\s*|\$\(\s*)(?:sudo\s+)?(?:\S*/)?(" + "|".join(SOURCES) + r")(?:\s|$)")
KMSG = "/dev/kmsg"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (prose, not code)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def host_log_reads(source: str) -> list[tuple[int, str]]:
    """(line, what) for every place ``source`` reads the host's kernel log directly."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            text = node.value
            if text.strip() == KMSG:
                found.append((node.lineno, f"opens {KMSG}"))
            elif m := COMMAND_RE.search(text):
                found.append((node.lineno, f"runs {m.group(1)}"))
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = ast.unparse(fn)
        redirected = all(re.search(rf"setattr\(\s*xid\s*,\s*['\"]{name}['\"]", body) for name in ("KMSG", "JOURNAL"))
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "kernel_log_file"
                and isinstance(node.value, ast.Constant)
                and node.value.value is None
                and not redirected
            ):
                found.append((node.value.lineno, "a health config without a kernel log file: the program reads the host's"))
    return found


def test_no_test_reads_the_hosts_kernel_log():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != Path(__file__).name
        for line, what in host_log_reads(path.read_text())
    ]
    assert offenders == [], "tests must read kernel-log fixtures (tests/agents/health/fakes.py):\n" + "\n".join(offenders)


def test_the_scan_finds_each_way_of_reading_the_hosts_log():
    """Three tests that read the host's log, as they once were, and the direct reads; prose and fixtures pass."""
    bad = {
        'open("/dev/kmsg").read()': "opens /dev/kmsg",
        'os.open("/dev/kmsg", os.O_RDONLY)': "opens /dev/kmsg",
        'subprocess.run(["dmesg"])': "runs dmesg",
        'subprocess.run(["journalctl", "-k"])': "runs journalctl",
        'subprocess.run("sudo dmesg | grep NVRM", shell=True)': "runs dmesg",
        'script.write_text("#!/bin/sh\\nset -e\\n/usr/bin/journalctl -k -o json\\n")': "runs journalctl",
        "def test_x(tmp_path):\n    xid.check_xid(p5_config(tmp_path, kernel_log_file=None), gpus)": "a health config without",
    }
    for code, what in bad.items():
        found = host_log_reads(code)
        assert len(found) == 1 and found[0][1].startswith(what), (code, found)
    good = [
        '"""Plain dmesg prints no facility; journalctl -k reads /dev/kmsg."""',
        'assert source == "/dev/kmsg records"',
        'fake.write_text("#!/bin/sh\\ncat journal.json\\n")',
        "x = 1  # dmesg",
        "def test_y(tmp_path, monkeypatch):\n"
        "    monkeypatch.setattr(xid, 'KMSG', str(tmp_path / 'kmsg'))\n"
        "    monkeypatch.setattr(xid, 'JOURNAL', ('/bin/false',))\n"
        "    xid.kernel_log(p5_config(tmp_path, kernel_log_file=None))",
    ]
    for code in good:
        assert host_log_reads(code) == [], code
