"""Static checks that are part of the test command: pyright on the package, ruff on everything."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.pyright import pyright


@pytest.mark.slow  # pyright over the whole tree: a node process of a minute or more
def test_pyright_clean(tmp_path_factory: pytest.TempPathFactory):
    """Pyright checks every pulumi-aws/pulumi-kubernetes Args class we construct (a misspelt nested
    key in an Args class is a type error here, where the mocks would accept it)."""
    result = pyright(tmp_path_factory, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "0 errors" in result.stdout


def test_ruff_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-6000:]
    fmt = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert fmt.returncode == 0, fmt.stdout[-3000:]


def test_no_node_side_program_in_a_template():
    """Node-side Python is a module of the node package reading a JSON config (linted, typed, tested), never a
    Jinja template with values pasted into its code: no ``*.py.j2``, and no template that renders a Python
    program (a python shebang on its first line)."""
    templates = ROOT / "templates"
    assert sorted(p.relative_to(ROOT).as_posix() for p in templates.rglob("*.py.j2")) == []
    shebangs = [p for p in templates.rglob("*.j2") if p.read_text().startswith(("#!/usr/bin/python", "#!/usr/bin/env python"))]
    assert shebangs == []


def test_shared_shell_is_written_once():
    """The shell the node scripts share (their log, the package install behind policy-rc.d, slurmd's start) is
    written in one template, templates/node/shell-parts.sh.j2, and imported by the others; the goldens of the
    scripts that import it (user data, join scripts) prove it renders byte for byte what they wrote before."""
    parts = "node/shell-parts.sh.j2"
    shared = ("exit 101", "DPkg::Lock::Timeout", 'tee -a "$log_dir/', "SLURMD_OPTIONS=")
    templates = ROOT / "templates"
    found = {(p.relative_to(templates).as_posix(), s) for p in templates.rglob("*.j2") for s in shared if s in p.read_text()}
    assert found == {(parts, s) for s in shared}
    users = sorted(
        p.relative_to(templates).as_posix()
        for p in templates.rglob("*.j2")
        if f'{{% import "{parts}" as parts %}}' in p.read_text()
    )
    assert users == [
        "hybrid/compute/join-setup.sh.j2",
        "slurm/head-first-boot.sh.j2",
        "slurm/head-setup.sh.j2",
        "slurm/login-setup.sh.j2",
        "slurm/node-install.sh.j2",
        "slurm/node-setup.sh.j2",
        "slurm/team-directories.sh.j2",
        "storage/mount-home.sh.j2",
        "storage/mount-lustre.sh.j2",
        "storage/nvme-raid.sh.j2",
        "storage/storage-setup.sh.j2",
    ]
