"""The package as users install it, shared by the tests that run it from outside the checkout
(``test_package``: the CLI and the provider; ``test_examples``: the examples planned from the wheel).

``installed`` builds a wheel from the checkout, installs it (not editable) into a fresh virtual environment
outside the checkout and gives a scratch directory that is not the checkout. The fresh environment takes
its third-party dependencies (pulumi, pulumi-aws, …) from this test run's environment through a path file,
so it holds gpucluster only from the wheel. Session-scoped: one wheel per test run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, machine_lock, path_key, run_shared_dir


def run_cmd(cmd: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in ``cwd``, capturing text; never raises on a non-zero exit."""
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, check=False, **kw)  # type: ignore[call-overload]


def clean_env() -> dict[str, str]:
    """This process's environment without the checkout on PATH or PYTHONPATH, nor its virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT)))
    return env


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory)


def build_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built once per test run: the first pytest-xdist worker to need it builds it,
    the others wait on the lock and take the same file. The lock is the checkout's, so two runs in one checkout
    never build into its build/ at once."""
    out = run_shared_dir(tmp_path_factory) / "wheel"
    with machine_lock(f"wheel-{path_key(ROOT)}"):
        built = list(out.glob("gpucluster-*.whl"))
        if built:
            return built[0]
        staging = Path(tempfile.mkdtemp(prefix="wheel-", dir=out.parent))
        # setuptools reuses the checkout's build/ (ignored build output): a file deleted from the tree since
        # the last build would still ship. Start from none, as a fresh clone does.
        shutil.rmtree(ROOT / "build", ignore_errors=True)
        result = run_cmd(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(staging), str(ROOT)],
            ROOT,
        )
        assert result.returncode == 0, result.stderr
        (whl,) = staging.glob("gpucluster-*.whl")
        staging.rename(out)  # the wheel appears whole or not at all
        return out / whl.name


def fresh_venv(home: Path) -> Path:
    """A virtual environment in ``home`` whose third-party dependencies come from this run's environment through a
    plain path entry (its .pth files, such as an editable install's finder, are not processed, so gpucluster can only
    come from what is installed into the new one); its python."""
    env_dir = home / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = Path(run_cmd([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], home).stdout.strip())
    (purelib / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py


def pip_install(py: Path, home: Path, *args: str) -> None:
    result = run_cmd([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", *args], home)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A fresh venv outside the checkout with the wheel installed; its bin dir and a scratch cwd."""
    home = tmp_path_factory.mktemp("fresh")
    py = fresh_venv(home)
    pip_install(py, home, str(wheel))
    scratch = home / "elsewhere"
    scratch.mkdir()
    yield py.parent, scratch


@pytest.fixture(scope="session")
def editable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A fresh venv outside the checkout with the checkout installed editable (``pip install -e``, as
    requirements.txt does); its bin dir and a scratch cwd."""
    home = tmp_path_factory.mktemp("editable")
    py = fresh_venv(home)
    with machine_lock(f"wheel-{path_key(ROOT)}"):  # the editable build writes the checkout's egg-info
        pip_install(py, home, "--no-build-isolation", "-e", str(ROOT))
    scratch = home / "elsewhere"
    scratch.mkdir()
    yield py.parent, scratch
