"""What the control plane ships of the node package, through its one reader (gpucluster_agents/ship.py)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from gpucluster_agents import ship

PACKAGE = Path(ship.__file__).resolve().parent


@pytest.mark.parametrize("name", [ship.HELPER, ship.USAGE_PROGRAM, ship.USERS_SCRIPT])
def test_a_shipped_file_is_the_packages_own_text(name: str):
    assert ship.source(name) == (PACKAGE / name).read_text()


@pytest.mark.parametrize(
    "name",
    [
        "../gpucluster/__init__.py",  # outside the package
        "boot/../../pyproject.toml",
        "/etc/passwd",
        "boot",  # a folder
        "boot/no-such-file.py",
        "health/__pycache__/cli.cpython-311.pyc",  # not a file a node needs
    ],
)
def test_source_refuses_anything_but_a_shippable_file_of_the_package(name: str):
    with pytest.raises(ValueError, match="is not a file of the node package"):
        ship.source(name)


def test_the_bundle_carries_the_contract_and_the_programs_and_is_reproducible():
    """The nodes import the contract's modules (the schemas moved there): every one of them is in the zip, with the
    files a user data names; the same sources give the same bytes."""
    data = ship.bundle()
    names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    contract = {f"gpucluster_agents/contract/{p.name}" for p in (PACKAGE / "contract").glob("*.py")}
    assert {"gpucluster_agents/contract/health.py", "gpucluster_agents/contract/sweep.py"} <= contract <= names
    assert {f"gpucluster_agents/{ship.HELPER}", f"gpucluster_agents/{ship.USERS_SCRIPT}", "pynvml.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert ship.bundle() == data and ship.sha256(data) == ship.sha256(ship.bundle())
