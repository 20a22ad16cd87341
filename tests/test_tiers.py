"""The fast tier stays fast: a test that starts a daemon, a chroot or a build is marked ``slow``.

``pytest -m "not slow"`` is the contributor's loop (CONTRIBUTING.md, "The fast loop"); CI runs both tiers. The rule,
read from the test sources (nothing is run):

1. A test module whose code starts one of ``PROGRAMS`` (``require_tool``/``shutil.which`` of it, or a
   ``subprocess`` command whose first word is it), builds (``python -m pip``, ``-m venv``, ``-m build``,
   ``gcc``), or uses a helper of ``tests/`` that does (``tests/e2e/slurm_harness.py``'s ``LocalSlurm``,
   ``tests/agents/moto_env.py``'s ``MotoServer``, ... found the same way, through any number of helpers) carries
   ``pytestmark = pytest.mark.slow``, or marks each test that starts one (directly, through a helper of its module, or
   through a fixture of its module that starts one).
2. A fixture of a ``conftest.py`` that starts one is named in ``tests/conftest.py``'s ``SLOW_FIXTURES``, which marks
   every test that uses it (directly or through another fixture), or uses one that is.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, SLOW_FIXTURES

# Daemons, chroots and builds: what the fast tier must not start.
PROGRAMS = frozenset({
    "slurmctld", "slurmd", "slurmdbd", "mariadbd", "mysqld", "mariadb-install-db", "mysql_install_db", "sssd",
    "slapd", "prometheus", "alertmanager", "moto_server", "debootstrap", "chroot", "gcc", "cc",
})  # fmt: skip
NAMES = frozenset({"SLURMCTLD", "SLURMD", "SLURMDBD"})  # tests/render/slurm_check.py's paths of three of them
BUILDS = (("-m", "pip"), ("-m", "venv"), ("-m", "build"))  # python -m pip|venv|build: a build or a download
RUNNERS = frozenset({"run", "Popen", "check_call", "check_output", "call"})
Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _word(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.rsplit("/", 1)[-1]
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return name.lower() if name in NAMES else None
    return None


def starts_directly(tree: ast.AST) -> bool:
    """Whether ``tree`` holds a call that starts one of PROGRAMS or a build."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        first = node.args[0]
        if name in ("require_tool", "which") and _word(first) in PROGRAMS:
            return True
        if any(isinstance(a, ast.Name | ast.Attribute) and _word(a) for a in node.args):  # spawn(SLURMD, ...)
            return True
        if name in RUNNERS and isinstance(first, ast.List | ast.Tuple) and first.elts:
            words = [_word(e) for e in first.elts]
            if words[0] in PROGRAMS or set(itertools.pairwise(words)) & set(BUILDS):
                return True
    return False


def _referenced(tree: ast.AST) -> set[str]:
    """The names ``tree`` uses, annotations left out (a type names a class, it starts nothing)."""
    out: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name | ast.Attribute):
            out.add(node.id if isinstance(node, ast.Name) else node.attr)
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns"):
                continue
            todo.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, ast.AST))
    return out


def _module_name(root: Path, path: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _sources(root: Path) -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted((root / "tests").rglob("*.py")):
        if "golden" not in path.relative_to(root).parts:
            yield _module_name(root, path), path, ast.parse(path.read_text(), str(path))


def _imported(tree: ast.Module) -> dict[str, str]:
    """Local name → ``module.name`` for what ``tree`` imports from ``tests``."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests"):
            out.update({(a.asname or a.name): f"{node.module}.{a.name}" for a in node.names})
    return out


def starters(modules: list[tuple[str, Path, ast.Module]]) -> set[str]:
    """``module.name`` of every top-level function or class under ``tests/`` that starts one (itself, through its
    module's others or through what it imports), to a fixed point."""
    uses: dict[str, set[str]] = {}  # module.name → the module.names it uses
    found: set[str] = set()
    for module, _, tree in modules:
        imported = _imported(tree)
        for node in (n for n in tree.body if isinstance(n, Def)):
            names = _referenced(node)
            uses[f"{module}.{node.name}"] = {f"{module}.{u}" for u in names} | {imported[u] for u in names if u in imported}
            if starts_directly(node):
                found.add(f"{module}.{node.name}")
    while True:
        more = {name for name, used in uses.items() if name not in found and used & found}
        if not more:
            return found
        found |= more


def _marked_slow(decorators: list[ast.expr]) -> bool:
    return any(ast.unparse(d) in ("pytest.mark.slow", "mark.slow") for d in decorators)


def _module_marked_slow(tree: ast.Module) -> bool:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            return "mark.slow" in ast.unparse(node.value)  # pyright: ignore[reportAttributeAccessIssue]
    return False


def _is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in node.decorator_list)


def violations(
    root: Path, slow_fixtures: frozenset[str] = SLOW_FIXTURES, modules: list[tuple[str, Path, ast.Module]] | None = None
) -> list[str]:
    """Every test that starts a daemon, a chroot or a build without the slow mark, one line each."""
    modules = list(_sources(root)) if modules is None else modules
    found = starters(modules)
    fixtures = {
        node.name: {a.arg for a in node.args.args}
        for _, path, tree in modules
        if path.name == "conftest.py"
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and _is_fixture(node)
    }
    slow = set(slow_fixtures)  # and the fixtures that use one, as pytest's fixture closure does
    while more := {name for name, params in fixtures.items() if name not in slow and params & slow}:
        slow |= more
    out = []
    for module, path, tree in modules:
        where = path.relative_to(root)
        if path.name == "conftest.py":
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and _is_fixture(node) and f"{module}.{node.name}" in found:
                    if node.name not in slow:
                        out.append(f"{where}: fixture {node.name} starts a daemon, a chroot or a build; name it in SLOW_FIXTURES")
            continue
        if not path.name.startswith("test_") or _module_marked_slow(tree):
            continue
        local = {n.name for n in tree.body if isinstance(n, Def) and f"{module}.{n.name}" in found}
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test_"):
                continue
            params = {a.arg for a in node.args.args}
            if (node.name in local or params & local) and not (_marked_slow(node.decorator_list) or params & slow):
                out.append(
                    f"{where}::{node.name} starts a daemon, a chroot or a build: mark it @pytest.mark.slow "
                    "(or the module: pytestmark = pytest.mark.slow)"
                )
    return out


@pytest.fixture(scope="module")
def this_tree() -> list[tuple[str, Path, ast.Module]]:
    return list(_sources(ROOT))


def test_every_test_that_starts_a_daemon_a_chroot_or_a_build_is_slow(this_tree) -> None:
    assert violations(ROOT, modules=this_tree) == []


def test_the_scan_sees_the_daemons_of_the_tree(this_tree) -> None:
    """The scan is not blind: in this tree it finds the shared starters the slow tests use."""
    found = starters(this_tree)
    assert {"tests.e2e.slurm_harness.LocalSlurm", "tests.agents.moto_env.MotoServer", "tests.conftest.moto_endpoint"} <= found


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


HELPER = (
    "import subprocess\n\n\nclass Daemon:\n    def __init__(self):\n"
    "        self.proc = subprocess.Popen(['/usr/sbin/slurmd', '-D'])\n\n\n"
    "def start():\n    return Daemon()\n\n\ndef harmless():\n    return 1\n"
)
PLANTED = {
    "starts a daemon itself": "from tests.conftest import require_tool\n\n\ndef test_x():\n    require_tool('slurmctld')\n",
    "through a helper's helper": "from tests.e2e.h import start\n\n\ndef test_x():\n    start()\n",
    "through a fixture of its module": (
        "import pytest\nfrom tests.e2e.h import Daemon\n\n\n@pytest.fixture\ndef d():\n    return Daemon()\n\n\n"
        "def test_x(d):\n    pass\n"
    ),
    "a build": "import subprocess, sys\n\n\ndef test_x():\n    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '.'])\n",
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_planted_unmarked_module_is_named(tmp_path: Path, case: str) -> None:
    root = _tree(tmp_path, {"tests/e2e/h.py": HELPER, "tests/test_x.py": PLANTED[case]})
    assert violations(root, frozenset()) == [
        "tests/test_x.py::test_x starts a daemon, a chroot or a build: mark it @pytest.mark.slow "
        "(or the module: pytestmark = pytest.mark.slow)"
    ]
    marked = PLANTED[case].replace("def test_x", "@pytest.mark.slow\ndef test_x")
    assert violations(_tree(tmp_path, {"tests/test_x.py": marked}), frozenset()) == []
    module = f"import pytest\npytestmark = pytest.mark.slow\n{PLANTED[case]}"
    assert violations(_tree(tmp_path, {"tests/test_x.py": module}), frozenset()) == []


def test_a_planted_module_that_starts_nothing_passes(tmp_path: Path) -> None:
    text = "import subprocess\nfrom tests.e2e.h import harmless\n\n\ndef test_x():\n    subprocess.run(['bash', '-c', 'true'])\n"
    assert violations(_tree(tmp_path, {"tests/e2e/h.py": HELPER, "tests/test_x.py": text}), frozenset()) == []


def test_a_conftest_fixture_that_starts_one_must_be_a_slow_fixture(tmp_path: Path) -> None:
    conftest = "import pytest\nfrom tests.e2e.h import Daemon\n\n\n@pytest.fixture\ndef daemon():\n    return Daemon()\n"
    root = _tree(tmp_path, {"tests/e2e/h.py": HELPER, "tests/e2e/conftest.py": conftest})
    assert violations(root, frozenset()) == [
        "tests/e2e/conftest.py: fixture daemon starts a daemon, a chroot or a build; name it in SLOW_FIXTURES"
    ]
    assert violations(root, frozenset({"daemon"})) == []


@pytest.mark.xdist_group("tiers-group-check")
def test_a_grouped_test_reaches_the_scheduler_with_its_group(request: pytest.FixtureRequest) -> None:
    """Under pytest-xdist's ``--dist loadgroup`` the scheduler keeps a group on one worker by the ``@<group>`` suffix
    of its tests' ids (``tests/conftest.py: _name_groups``); in one process there is no scheduler and no suffix."""
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("::test_a_grouped_test_reaches_the_scheduler_with_its_group@tiers-group-check")
    else:
        assert "@" not in request.node.nodeid
