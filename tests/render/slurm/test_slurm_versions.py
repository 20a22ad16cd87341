"""Slurm files rendered for a target version: the version-dependent keys come from one table
(``gpucluster/render/slurm/versions.py``), every Slurm stack's files are pinned per version, and the real
slurmctld of each version we can run reads them with a clean log — Debian bookworm's 22.05 and trixie's 24.11
(in a debootstrap root) — with no "defunct" or "unrecognized" line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.config.slurm import SLURM_VERSION
from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.render.slurm.versions import SETTINGS, SUPPORTED, SlurmVersion, check_version, version_lines
from gpucluster.tools.plan.run.stackfile import read_stack_file
from tests.conftest import GOLDEN, check_golden, require_tool
from tests.render.slurm.test_slurm_render import STACK_FILES
from tests.render.slurm_check import SLURMCTLD, check_slurmctld, conf_files
from tests.render.slurm_versions import TRIXIE_VERSION, trixie_root, trixie_tmp  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # runs slurmctld 22.05 and, in the trixie root (chroot), 24.11

CATALOG = load_catalog()
VERSIONS = ("22.05", SLURM_VERSION, TRIXIE_VERSION)
"""Golden files per version: the oldest we render for (Debian bookworm, and many sites), the head node's, and
the newest we can run here."""
DEFUNCT = ("defunct", "unrecognized", "Parsing error")


def files_for(stack: str, version: str) -> dict[str, str]:
    cluster = load_spec(read_stack_file(stack)["config"], stack=stack).cluster
    return conf_files(SlurmContext.of(cluster, slurm_version=version))


STACKS = [s for s, _ in STACK_FILES]


# --- the table ---------------------------------------------------------------------------------------------------


def test_pre_23_11_keys_only_where_they_are_needed():
    old = version_lines("22.05")
    assert old == [
        "TreeWidth=65533",
        "SlurmctldParameters=cloud_reg_addrs,idle_on_node_suspend,enable_configless",
        "CommunicationParameters=NoAddrCache",
        "PrivateData=cloud",
    ]
    assert "PrivateData=cloud" not in version_lines("23.02") and "CommunicationParameters=NoAddrCache" in version_lines("23.02")
    for v in ("23.11", "24.05", "24.11", "25.05"):
        assert version_lines(v) == ["SlurmctldParameters=idle_on_node_suspend,enable_configless"], v


def test_every_setting_names_its_reason_and_source():
    for s in SETTINGS:
        assert s.why and s.source, s
        for bound in (s.since, s.until):
            assert bound is None or bound in SUPPORTED, s


@pytest.mark.parametrize("text", ["21.08", "26.05", "23.1", "latest", ""])
def test_unknown_versions_are_refused_with_the_supported_list(text: str):
    with pytest.raises(ValueError, match=r"22\.05|not a Slurm version"):
        check_version(text)


def test_versions_order_and_maintenance_releases():
    assert SlurmVersion.parse("23.11.4") == SlurmVersion(23, 11) < SlurmVersion.parse("24.05")
    assert str(SlurmVersion.parse("22.05.8")) == "22.05"


def test_the_shipped_head_node_conf_is_the_head_versions_render():
    """What the plan puts on the head node is the render for the head node's Slurm: no defunct key in it."""
    for stack, shipped in STACK_FILES:
        assert shipped["slurm.conf"] == files_for(stack, SLURM_VERSION)["slurm.conf"]
        for gone in ("cloud_reg_addrs", "NoAddrCache", "PrivateData=cloud", "TreeWidth"):
            assert gone not in shipped["slurm.conf"], (stack, gone)


# --- per version: golden, and the real daemons -------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("stack", STACKS)
def test_stack_files_golden_per_version(stack: str, version: str, update_golden: bool):
    for name, text in files_for(stack, version).items():
        check_golden(GOLDEN / "slurm" / stack / "by-version" / version / name, text, update_golden)


def test_no_stale_golden_per_version():
    expected = {GOLDEN / "slurm" / s / "by-version" / v / n for s in STACKS for v in VERSIONS for n in files_for(s, v)}
    found = {p for p in (GOLDEN / "slurm").rglob("*") if p.is_file() and "by-version" in p.parts}
    assert found == expected


@pytest.mark.parametrize("stack", STACKS)
def test_slurm_22_05_reads_its_render_cleanly(stack: str, tmp_path: Path):
    require_tool(SLURMCTLD)
    rc, problems = check_slurmctld(files_for(stack, "22.05"), tmp_path)
    assert rc == 124 and problems == [], problems


@pytest.mark.parametrize("version", [SLURM_VERSION, TRIXIE_VERSION])
@pytest.mark.parametrize("stack", STACKS)
def test_slurm_24_11_reads_the_23_11_and_24_11_renders_cleanly(stack: str, version: str, trixie_root: Path, trixie_tmp: Path):  # noqa: F811
    run_dir = trixie_tmp
    rc, problems = check_slurmctld(files_for(stack, version), run_dir, root=trixie_root)
    assert rc == 124 and problems == [], problems
    log = (run_dir / "slurmctld.log").read_text()
    assert not [line for line in log.splitlines() if any(d in line for d in DEFUNCT)]


@pytest.mark.parametrize("stack", STACKS)
def test_slurm_24_11_flags_the_22_05_render_so_the_check_can_fail(stack: str, trixie_root: Path, trixie_tmp: Path):  # noqa: F811
    """The check above is live: 24.11 reading the 22.05 render logs the defunct keys."""
    run_dir = trixie_tmp
    rc, problems = check_slurmctld(files_for(stack, "22.05"), run_dir, root=trixie_root)
    assert rc == 124  # defunct keys are errors in the log, not fatal: the check must read the log
    assert any("cloud_reg_addrs" in p and "defunct" in p for p in problems), problems
    assert any("NoAddrCache" in p and "defunct" in p for p in problems), problems


def test_slurm_22_05_refuses_a_newer_key(tmp_path: Path):
    """Why the table exists: 22.05 stops at a key from 23.02 (measured in the research)."""
    require_tool(SLURMCTLD)
    files = files_for(STACKS[0], "22.05")
    files["slurm.conf"] += "SuspendExcStates=DOWN,DRAIN\n"
    rc, problems = check_slurmctld(files, tmp_path)
    assert rc == 1 and any("SuspendExcStates" in p for p in problems), problems
