"""No function nobody calls: every module-level function and every property in the package, the components and the
node package is named somewhere in the source besides its own ``def`` (the package, the components, the templates,
the node package, the stack program and the policy pack; tests are not callers). A function only tests call is a
decision nobody uses (``cloud_nccl_environment``, ``lustre_admins``, ``ResolvedSlurm.default_partition`` were).

A name counts as used when it appears anywhere else as a word, so the test misses a function whose name is also
another's; it never flags one that is used. :data:`CALLED_BY_TESTS_ONLY` lists the exceptions with the reason; an
entry that is used now fails too, so the list stays true. The config models' fields and the resolved and contract
dataclasses' fields have their own tests (``tests/config/test_field_reads.py``, ``tests/resolve/test_field_reads.py``).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.conftest import ROOT

SCANNED = ("gpucluster", "components", "gpucluster_agents")
SOURCES = (*SCANNED, "templates", "__main__.py", "policy-pack")
SKIP = ("gpucluster/components", "gpucluster/templates")  # the links to the top-level folders, where they exist

CALLED_BY_TESTS_ONLY: dict[tuple[str, str], str] = {
    ("gpucluster/facts/catalog.py", "ena_only_cards"): "an instance fact the catalog tests pin beside efa_cards "
    "(DESIGN.md's instance facts: the cards that carry ENA only); the interface layout reads efa_cards",
    ("gpucluster_agents/metrics/server.py", "make_server"): "the exporter on a port of its own, for the tests that "
    "serve it on 127.0.0.1:0; the node runs exporter_server on the socket systemd hands it",
    ("gpucluster/render/slurm/containers.py", "container_files"): "a GPU node's container files as the control plane "
    "sees them, for the goldens and the tests that compare them with what the node's own writer "
    "(gpucluster_agents.boot.containers) makes; the user data has no room for them, so the node writes them",
    ("gpucluster_agents/usage/policy.py", "parse_policy"): "the usage policy from a parsed accounts file, for the "
    "tests that check the rendered file with the node's own parser; the node reads the file (load_policy)",
}


def _files(top: str) -> Iterator[Path]:
    path = ROOT / top
    if path.is_file():
        yield path
        return
    for f in sorted(path.rglob("*")):
        rel = f.relative_to(ROOT).as_posix()
        if f.is_file() and not f.is_symlink() and "__pycache__" not in rel and not rel.startswith(SKIP):
            yield f


@cache
def source() -> dict[str, str]:
    return {f.relative_to(ROOT).as_posix(): f.read_text(errors="replace") for top in SOURCES for f in _files(top)}


def defined(text: str) -> list[str]:
    """The module-level functions of ``text`` and the properties of its classes (dunder names left out)."""
    names = []
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names += [
                n.name
                for n in node.body
                if isinstance(n, ast.FunctionDef)
                and any(isinstance(d, ast.Name) and d.id in ("property", "cached_property") for d in n.decorator_list)
            ]
    return [n for n in names if not n.startswith("__")]


def unused(texts: dict[str, str], scanned: tuple[str, ...]) -> set[tuple[str, str]]:
    words = Counter(w for text in texts.values() for w in re.findall(r"\w+", text))  # a name is a whole word
    return {
        (path, name)
        for path, text in texts.items()
        if path.endswith(".py") and path.startswith(scanned)
        for name in defined(text)
        if words[name] <= 1
    }


def test_every_function_is_called_by_the_source():
    found = unused(source(), SCANNED)
    unexplained = sorted(found - CALLED_BY_TESTS_ONLY.keys())
    assert not unexplained, (
        f"functions no source calls: {unexplained}. Call each where it is needed, or delete it and let its tests "
        "test the caller (only with a reason, list it in CALLED_BY_TESTS_ONLY)"
    )
    still_used = sorted(CALLED_BY_TESTS_ONLY.keys() - found)
    assert not still_used, f"called by the source now, remove from CALLED_BY_TESTS_ONLY: {still_used}"


def test_the_walk_reads_every_tree_and_finds_a_planted_unused_function():
    paths = source().keys()
    assert all(any(p.startswith(top) for p in paths) for top in SOURCES)
    planted = {
        "gpucluster/x.py": "def used():\n    pass\n\n\ndef forgotten():\n    pass\n\n\nclass C:\n    @property\n"
        "    def shown(self):\n        return 1\n\n    @property\n    def hidden(self):\n        return 2\n",
        "components/y.py": "from gpucluster.x import used\n\nused()\nprint(C().shown)\n",
        "templates/z.j2": "{{ forgotten_not_this }}",
    }
    assert unused(planted, SCANNED) == {("gpucluster/x.py", "forgotten"), ("gpucluster/x.py", "hidden")}
