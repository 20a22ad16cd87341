"""Every field of a resolved type and of the node contract is read by the code (the config models have their own
test, tests/config/test_field_reads.py): a field that only tests read is a decision nobody uses.

Every dataclass defined in ``gpucluster.resolve`` and ``gpucluster_agents.contract`` is walked; a field counts as
read when ``.<name>`` appears in the source (the package, the components, the templates, the node package; tests
and the generated typed dicts are not readers). :data:`READ_BY_TESTS_ONLY` lists the exceptions with the reason; an
entry that is read now fails too, so the list stays true.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
from functools import cache

from tests.conftest import ROOT

PACKAGES = ("gpucluster.resolve", "gpucluster_agents.contract")

READ_BY_TESTS_ONLY: dict[tuple[str, str], str] = {
    ("ResolvedNodeGroup", "shared_fs"): "the per-group storage decision the resolution tests pin; the nodes get it "
    "through the group's health config (shared_fs_mount), which is decided from the same value",
    ("SlurmGroup", "shared_fs"): "a SlurmGroup is a ResolvedNodeGroup with its Slurm settings (same field)",
}


def dataclasses_of(package: str) -> dict[type, str]:
    """``{class: module}`` of every dataclass defined in ``package`` and its modules."""
    pkg = importlib.import_module(package)
    modules = [pkg] + [importlib.import_module(m.name) for m in pkgutil.walk_packages(pkg.__path__, package + ".")]
    return {
        v: mod.__name__
        for mod in modules
        for v in vars(mod).values()
        if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__ == mod.__name__
    }


@cache
def source_text() -> str:
    skip = ("components/_shared/config_types.py",)
    texts = []
    for top, pattern in (("gpucluster", "*.py"), ("components", "*.py"), ("templates", "*"), ("gpucluster_agents", "*.py")):
        for path in sorted((ROOT / top).rglob(pattern)):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and "__pycache__" not in rel and not rel.startswith(skip) and rel not in skip:
                texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


def unread(classes: list[type], text: str) -> set[tuple[str, str]]:
    return {
        (c.__name__, f.name) for c in classes for f in dataclasses.fields(c) if not re.search(rf"\.{re.escape(f.name)}\b", text)
    }


def _all_classes() -> list[type]:
    return [c for package in PACKAGES for c in dataclasses_of(package)]


def test_every_resolved_and_contract_field_is_read():
    found = unread(_all_classes(), source_text())
    unexplained = sorted(found - READ_BY_TESTS_ONLY.keys())
    assert not unexplained, (
        f"fields no source reads: {unexplained}. Read each where it is decided for, or remove it "
        "(only if a test needs it as a record of a decision, list it in READ_BY_TESTS_ONLY with the reason)"
    )
    still_read = sorted(READ_BY_TESTS_ONLY.keys() - found)
    assert not still_read, f"read by the source now, remove from READ_BY_TESTS_ONLY: {still_read}"


def test_the_walk_sees_both_packages_and_finds_a_planted_unread_field():
    names = {c.__name__ for c in _all_classes()}
    assert {"ResolvedCluster", "SlurmGroup", "ResolvedTeams", "AgentConfig", "NodeGroup", "LogsConfig"} <= names

    @dataclasses.dataclass
    class Planted:
        zz_read: int
        zz_forgotten: int

    assert unread([Planted], "x = planted.zz_read  # zz_forgotten only named") == {("Planted", "zz_forgotten")}
