"""pyright as the tests run it: over the checkout, with ``gpucluster.components`` read from the package as a wheel
installs it, in ``.pyright/`` (pyproject.toml's ``extraPaths``). The editable install maps that name to components/
with an import hook, which static analysis cannot run; without the view every import of a component is unresolved
and a typed program's Args are unknown, so nothing about them would be checked.

The view is made once per test run from this run's wheel (the tests that type-check share it, and none rebuilds it
while another's pyright reads it), so it is never older than the code it stands for.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, machine_lock, path_key, require_tool, run_shared_dir
from tests.tools.conftest import build_wheel, run_cmd

VIEW = ROOT / ".pyright"
MADE_BY = ".made-by"  # the test run that made the view


def pyright_view(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = str(run_shared_dir(tmp_path_factory))
    with machine_lock(f"pyright-view-{path_key(ROOT)}"):
        stamp = VIEW / MADE_BY
        if stamp.is_file() and stamp.read_text() == run:
            return VIEW
        wheel = build_wheel(tmp_path_factory)
        staging = Path(tempfile.mkdtemp(prefix=".pyright-", dir=ROOT))
        result = run_cmd([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(staging), str(wheel)], ROOT)
        assert result.returncode == 0, result.stderr
        (staging / MADE_BY).write_text(run)
        shutil.rmtree(VIEW, ignore_errors=True)
        staging.rename(VIEW)
    return VIEW


def pyright(tmp_path_factory: pytest.TempPathFactory, *paths: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """pyright over ``paths`` (the project's ``include`` when none), from the checkout, with the view in place."""
    require_tool("node")
    view = pyright_view(tmp_path_factory)
    assert (view / "gpucluster/components/gpu_cluster.py").read_bytes() == (ROOT / "components/gpu_cluster.py").read_bytes()
    argv = [sys.executable, "-m", "pyright", *(str(p) for p in paths)]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
