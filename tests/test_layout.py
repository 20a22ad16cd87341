"""The tree is the architecture: the same family folders in every layer, and tests that mirror them.

The rules (docs/architecture.md, "Where the code is"):

1. In ``gpucluster/config/``, ``gpucluster/config/checks/``, ``gpucluster/resolve/`` and ``gpucluster/render/`` a
   module named after a family (``slurm.py``, ``kubernetes_health.py``) is a flat file where a folder belongs: the
   family is ``<family>/`` (``slurm/__init__.py``, ``kubernetes/health.py``).
2. Every source folder of a layer (``gpucluster/<layer>/<folder>/``; for config also
   ``gpucluster/config/checks/<folder>/``, whose tests sit with the family's config tests) has a test folder
   ``tests/<layer>/<folder>/`` holding at least one test module; so does every subpackage of ``gpucluster_agents``
   (``tests/agents/<subpackage>/``) and every family of ``components/`` (``tests/components/<family>/``).
3. Every test folder there names a source folder: a test folder with no source is a mirror of nothing.
4. A test module at a layer's top (``tests/render/test_slurm_x.py``) is not named after one of that layer's
   folders: it goes in the folder.
Modules every family shares stay at the top of their layer, and so do their tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("compute", "storage", "network", "slurm", "kubernetes", "hybrid", "monitoring", "images")
# (source folders, the test folder that mirrors them)
MIRRORS = (
    (("gpucluster/config", "gpucluster/config/checks"), "tests/config"),
    (("gpucluster/resolve",), "tests/resolve"),
    (("gpucluster/render",), "tests/render"),
    (("gpucluster_agents",), "tests/agents"),
    (("components",), "tests/components"),
)
FLAT_ROOMS = ("gpucluster/config", "gpucluster/config/checks", "gpucluster/resolve", "gpucluster/render")
# Source folders that are not a family of their layer: the checks are config's (their families mirror into
# tests/config/<family>/), components/_shared is what every component builds on (tests/components/ top).
NOT_MIRRORED = {"gpucluster/config/checks", "components/_shared"}
# Source folders known to have no test folder yet, each with what covers it today. An entry whose folder gets its
# tests (or goes) fails test_known_gaps_are_still_gaps, so the list only shrinks.
KNOWN_GAPS = {
    "components/images": "the Image Builder pipeline is planned in every Slurm stack's golden plan (tests/tools/plan/)",
}


def packages(root: Path, folder: str) -> list[str]:
    """The package folders directly under ``folder`` (relative paths), sorted."""
    base = root / folder
    if not base.is_dir():
        return []
    return sorted(
        f"{folder}/{p.name}" for p in base.iterdir() if p.is_dir() and (p / "__init__.py").is_file() and not p.is_symlink()
    )


def has_tests(folder: Path) -> bool:
    return any(folder.rglob("test_*.py"))


def violations(root: Path) -> list[str]:
    """Every way the tree under ``root`` breaks the layout rules, one line each."""
    out: list[str] = []
    for room in FLAT_ROOMS:
        for module in sorted((root / room).glob("*.py")):
            stem = module.stem
            family = next((f for f in FAMILIES if stem == f or stem.startswith(f + "_")), None)
            if family:
                out.append(f"{room}/{module.name}: flat, in the {family} family; it belongs in {room}/{family}/")
    for sources, tests in MIRRORS:
        folders = {p.rsplit("/", 1)[1]: p for src in sources for p in packages(root, src) if p not in NOT_MIRRORED}
        for name, src in sorted(folders.items()):
            mirror = root / tests / name
            if src in KNOWN_GAPS and root == ROOT:
                continue
            if not mirror.is_dir():
                out.append(f"{src}/: no test folder {tests}/{name}/")
            elif not has_tests(mirror):
                out.append(f"{tests}/{name}/: no test module for {src}/")
        for test_folder in packages(root, tests):
            name = test_folder.rsplit("/", 1)[1]
            if name not in folders:
                out.append(f"{test_folder}/: a test folder with no source folder of that name in {' or '.join(sources)}")
            for module in sorted((root / tests).glob("test_*.py")):
                if module.stem.split("_")[1] == name:
                    out.append(f"{tests}/{module.name}: named after {name}; it belongs in {tests}/{name}/")
    return out


def test_the_tree_keeps_the_layout() -> None:
    assert violations(ROOT) == []


def test_known_gaps_are_still_gaps() -> None:
    for src in KNOWN_GAPS:
        family = src.rsplit("/", 1)[1]
        tests = next(t for sources, t in MIRRORS if src.rsplit("/", 1)[0] in sources)
        assert (ROOT / src).is_dir() and not has_tests(ROOT / tests / family), f"{src} is no longer a gap: drop it"


def _tree(root: Path, files: list[str]) -> Path:
    for f in files:
        path = root / f
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return root


GOOD = [
    "gpucluster/render/__init__.py",
    "gpucluster/render/core.py",
    "gpucluster/render/slurm/__init__.py",
    "gpucluster/render/slurm/conf.py",
    "tests/render/__init__.py",
    "tests/render/test_core.py",
    "tests/render/slurm/__init__.py",
    "tests/render/slurm/test_conf.py",
    "gpucluster/config/__init__.py",
    "gpucluster/config/checks/__init__.py",
    "gpucluster/config/checks/slurm/__init__.py",
    "tests/config/slurm/__init__.py",
    "tests/config/slurm/test_slurm_checks.py",
]


def test_a_planted_tree_that_keeps_the_rules_passes(tmp_path: Path) -> None:
    assert violations(_tree(tmp_path, GOOD)) == []


@pytest.mark.parametrize(
    ("planted", "expected"),
    [
        (
            ["gpucluster/render/kubernetes_health.py"],
            "gpucluster/render/kubernetes_health.py: flat, in the kubernetes family",
        ),
        (["gpucluster/config/checks/storage.py"], "gpucluster/config/checks/storage.py: flat, in the storage family"),
        (
            ["gpucluster/render/hybrid/__init__.py", "gpucluster/render/hybrid/bundle.py"],
            "gpucluster/render/hybrid/: no test folder tests/render/hybrid/",
        ),
        (
            ["gpucluster/config/checks/network/__init__.py"],
            "gpucluster/config/checks/network/: no test folder tests/config/network/",
        ),
        (
            ["gpucluster/render/hybrid/__init__.py", "tests/render/hybrid/__init__.py"],
            "tests/render/hybrid/: no test module for gpucluster/render/hybrid/",
        ),
        (
            ["tests/render/ghost/__init__.py", "tests/render/ghost/test_x.py"],
            "tests/render/ghost/: a test folder with no source folder",
        ),
        (
            ["tests/render/test_slurm_conf.py"],
            "tests/render/test_slurm_conf.py: named after slurm; it belongs in tests/render/slurm/",
        ),
        (["gpucluster_agents/power/__init__.py"], "gpucluster_agents/power/: no test folder tests/agents/power/"),
        (["components/images/__init__.py"], "components/images/: no test folder tests/components/images/"),
    ],
)
def test_a_planted_violation_is_named(tmp_path: Path, planted: list[str], expected: str) -> None:
    found = violations(_tree(tmp_path, [*GOOD, *planted]))
    assert len(found) == 1 and found[0].startswith(expected), found
