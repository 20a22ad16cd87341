"""The package as users install it: one import name (gpucluster), templates and data inside the wheel,
no top-level ``components`` module, the CLI usable from outside the checkout, and layers that import
only downward.

The wheel tests run the wheel built from the checkout, installed (not editable) into a fresh virtual
environment outside the checkout (the ``wheel`` and ``installed`` fixtures in ``tests/tools/conftest.py``).
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest
import tomllib

from tests.conftest import ROOT
from tests.tools.conftest import clean_env, run_cmd

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


# Where each installed package's files are in a checkout: components/ and templates/ stay at the top level.
FOLDERS = {"gpucluster": "gpucluster", "gpucluster_agents": "gpucluster_agents", "gpucluster/components": "components"}


def test_no_link_in_the_tree():
    """The package holds no symbolic link (a search inside it finds only what is there): components/ and templates/
    reach the package through pyproject.toml's package-dir mapping, not through links."""
    links = [
        str(path.relative_to(ROOT))
        for top in ("gpucluster", "gpucluster_agents", "components", "templates")
        for path in (ROOT / top).rglob("*")
        if path.is_symlink()
    ]
    assert links == []


def test_the_wheel_holds_every_module_and_template_of_the_tree(wheel: Path):
    """Nothing lists the packages by hand: setup.py finds them, and the wheel holds exactly the tree's modules
    (components/ as gpucluster/components/), every template, the facts and py.typed, and no top-level
    ``components``."""
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"gpucluster", "gpucluster_agents"}
    tree = {
        f"{installed}/{path.relative_to(ROOT / folder).as_posix()}"
        for installed, folder in FOLDERS.items()
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert {n for n in names if n.endswith(".py")} == tree
    templates = {n.removeprefix("gpucluster/templates/") for n in names if n.startswith("gpucluster/templates/")}
    assert templates == {str(p.relative_to(ROOT / "templates")) for p in (ROOT / "templates").rglob("*.j2")}
    assert {"gpucluster/facts/data/instance_types.json", "gpucluster/facts/data/instance_extras.json"} <= set(names)
    assert "gpucluster/py.typed" in names
    # The component provider, as `python -m gpucluster.tools.provider` runs it from an installed wheel
    assert {"gpucluster/tools/provider/__init__.py", "gpucluster/tools/provider/__main__.py"} <= set(names)


def test_installed_wheel_imports_gpucluster_and_no_components(installed: tuple[Path, Path]):
    bindir, scratch = installed
    probe = (
        "import importlib.util, json, gpucluster, gpucluster.render.core as core\n"
        "from gpucluster import GpuNodeGroup, LustreStorage, SlurmCluster, EksCluster, KubernetesPlatform, GpuCluster, Network\n"
        "print(json.dumps({'file': gpucluster.__file__, 'templates': str(core.TEMPLATES_DIR),"
        " 'components': importlib.util.find_spec('components') is not None, 'node_group': GpuNodeGroup.__module__}))\n"
    )
    result = run_cmd([str(bindir / "python"), "-c", probe], scratch, env=clean_env())
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    site = str(bindir.parent)
    assert seen["file"].startswith(site) and seen["templates"].startswith(site), seen
    assert seen["components"] is False
    assert seen["node_group"] == "gpucluster.components.compute.gpu_node_group"


def test_installed_cli_plans_a_project_from_outside_it(installed: tuple[Path, Path]):
    bindir, scratch = installed
    version = run_cmd([str(bindir / "gpucluster"), "--version"], scratch, env=clean_env())
    assert version.returncode == 0 and version.stdout.strip() == f"gpucluster {PYPROJECT['project']['version']}", version
    plan = run_cmd([str(bindir / "gpucluster"), "plan", "--stack", "dev", "--project-dir", str(ROOT)], scratch, env=clean_env())
    assert plan.returncode == 0, plan.stderr
    assert "Traceback" not in plan.stderr and "dev-dev-lt" in plan.stdout
    # Without --project-dir, outside any project, the CLI says where it looked.
    lost = run_cmd([str(bindir / "gpucluster"), "plan", "--stack", "dev"], scratch, env=clean_env())
    assert lost.returncode == 1 and "no Pulumi.yaml in" in lost.stderr and "Traceback" not in lost.stderr


# Imports each module named on stdin (one per line) and prints the file each came from, or its error.
IMPORT_ALL = """
import importlib, json, sys
seen, failed = {}, {}
for name in sys.stdin.read().split():
    try:
        seen[name] = importlib.import_module(name).__file__
    except Exception as error:
        failed[name] = repr(error)
import gpucluster.render.core as core
print(json.dumps({"seen": seen, "failed": failed, "templates": str(core.TEMPLATES_DIR)}))
"""


def _import_all(bindir: Path, scratch: Path) -> dict:
    """Every module of the tree (not the ``__main__`` modules, which run on import), imported by ``bindir``'s
    python from ``scratch``."""
    names = sorted(name for name in _modules() if not name.endswith(".__main__"))
    result = run_cmd([str(bindir / "python"), "-c", IMPORT_ALL], scratch, env=clean_env(), input="\n".join(names))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["failed"] == {}
    assert sorted(report["seen"]) == names
    return report


def test_installed_wheel_imports_every_module(installed: tuple[Path, Path]):
    """``pip install .`` (not editable), run from outside the checkout: every module of the tree imports, from the
    installed package."""
    bindir, scratch = installed
    report = _import_all(bindir, scratch)
    site = str(bindir.parent)
    assert all(path.startswith(site) for path in report["seen"].values())
    assert report["templates"].startswith(site)


def test_editable_install_imports_components_and_templates_from_the_top_level(editable: tuple[Path, Path]):
    """``pip install -e .`` (requirements.txt's line), run from outside the checkout: every module imports, the
    components from components/ and the templates from templates/ of the checkout, and it plans the dev stack."""
    bindir, scratch = editable
    report = _import_all(bindir, scratch)
    node_group = report["seen"]["gpucluster.components.compute.gpu_node_group"]
    assert node_group == str(ROOT / "components" / "compute" / "gpu_node_group.py")
    assert report["templates"] == str(ROOT / "templates")
    plan = run_cmd([str(bindir / "gpucluster"), "plan", "--stack", "dev", "--project-dir", str(ROOT)], scratch, env=clean_env())
    assert plan.returncode == 0, plan.stderr
    assert "dev-dev-lt" in plan.stdout


def test_installed_provider_reports_the_wheels_version(installed: tuple[Path, Path]):
    from tests.tools.test_provider import ask, start

    bindir, scratch = installed
    script = "from gpucluster.tools.provider import main; from gpucluster import GpuCluster; main([GpuCluster])"
    process, port = start([str(bindir / "python"), "-c", script], cwd=scratch, env=clean_env())
    try:
        schema, version = ask(port)
    finally:
        process.kill()
        process.communicate(timeout=30)
    assert version == schema["version"] == PYPROJECT["project"]["version"]
    assert "gpucluster:index:GpuCluster" in schema["resources"]


# --- layering: data flows one way --------------------------------------------------------------------------

NODE_PACKAGE_API = ("gpucluster_agents.contract", "gpucluster_agents.ship")
"""All of the node package the control plane may import: the schema of every file a node reads (``contract``) and
what ships the package's sources (``ship``). Nothing else of it: the rest runs on the nodes."""
CONTROL_PLANE = ("gpucluster", "components", "__main__.py", "policy-pack", "examples")
"""Where the control plane's code lies (folders and files, from the checkout's root)."""

LAYERS = {
    # room → rooms it may import (besides itself). The config model, its rules and its checks sit on the
    # facts; resolution on the config; loading (parse, check, resolve) on both; rendering on resolved
    # config; components on rendering; the program on components; tools on everything. The node package
    # (gpucluster_agents) is the bottom room and imports nothing of gpucluster; the rooms above reach it only
    # through NODE_PACKAGE_API (its contract and its shipping module).
    "gpucluster._paths": set(),
    "gpucluster.facts": set(),
    "gpucluster.config": {"gpucluster.facts", "gpucluster.facts.slurm_settings", *NODE_PACKAGE_API},
    # The settings hatch's key tables (standard library only): the config checks and the policy rule of the rendered
    # slurm.conf read the same lists.
    "gpucluster.facts.slurm_settings": set(),
    "gpucluster.resolve": {"gpucluster.config", "gpucluster.facts", *NODE_PACKAGE_API},
    "gpucluster.load": {"gpucluster.config", "gpucluster.facts", "gpucluster.resolve", *NODE_PACKAGE_API},
    # The policy rules stand alone (stdlib + PyYAML): the Pulumi policy pack in policy-pack/ imports them
    # without the rest of gpucluster, and the tools run them over the offline plan.
    "gpucluster.policy": {"gpucluster.facts.slurm_settings"},
    "gpucluster.render": {
        "gpucluster.config",
        "gpucluster.facts",
        "gpucluster.resolve",
        "gpucluster._paths",
        *NODE_PACKAGE_API,
    },
    "gpucluster.components": {
        "gpucluster.config",
        "gpucluster.facts",
        "gpucluster.resolve",
        "gpucluster.load",  # GpuCluster validates its Args on the stack's own load path
        "gpucluster.render",
        *NODE_PACKAGE_API,
    },
    "gpucluster.program": {
        "gpucluster.config",
        "gpucluster.facts",
        "gpucluster.resolve",
        "gpucluster.load",
        "gpucluster.components",
        *NODE_PACKAGE_API,
    },
    "gpucluster.tools": {
        "gpucluster.config",
        "gpucluster.facts",
        "gpucluster.resolve",
        "gpucluster.load",
        "gpucluster.render",
        "gpucluster.components",
        "gpucluster.program",
        "gpucluster.policy",
        "gpucluster._paths",
        *NODE_PACKAGE_API,
    },
    "gpucluster_agents": set(),
}
PULUMI_FREE = (
    "gpucluster.policy",
    "gpucluster.config",
    "gpucluster.facts",
    "gpucluster.resolve",
    "gpucluster.load",
    "gpucluster.render",
    "gpucluster_agents",
)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for base, dotted in (
        ("gpucluster", "gpucluster"),
        ("components", "gpucluster.components"),
        ("gpucluster_agents", "gpucluster_agents"),
    ):
        for path in (root / base).rglob("*.py"):
            rel = path.relative_to(root / base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([dotted, *parts])] = path
    return out


def _imports(path: Path, module: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.rsplit(".", node.level - (1 if path.name == "__init__.py" else 0))[0]
                found.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _node_package_reached(path: Path) -> set[str]:
    """The modules of the node package that ``path`` imports, lazy imports included: ``from gpucluster_agents import
    contract`` reaches ``gpucluster_agents.contract``, ``import gpucluster_agents`` the package itself."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "gpucluster_agents"}
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "gpucluster_agents":
            found |= {f"{node.module}.{a.name}" for a in node.names} if node.module == "gpucluster_agents" else {node.module}
    return found


def _within(module: str, allowed: Iterable[str]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


def _room(module: str) -> str:
    for room in sorted(LAYERS, key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    return module


def _layer_problems(root: Path = ROOT) -> list[str]:
    """Every import against LAYERS in the tree at ``root``; into the node package, only the part of it the room lists."""
    problems = []
    for module, path in _modules(root).items():
        if module == "gpucluster" or module.startswith("gpucluster._"):
            continue  # the lazy public API and the path helper
        room = _room(module)
        for imported in _imports(path, module):
            if (
                imported.split(".")[0] in ("pulumi", "pulumi_aws", "pulumi_kubernetes", "pulumiverse_grafana")
                and room in PULUMI_FREE
            ):
                problems.append(f"{module} imports {imported} (no Pulumi below the components)")
            if not imported.startswith(("gpucluster.", "gpucluster_agents")) and imported != "gpucluster":
                continue
            if room != "gpucluster_agents" and imported.split(".")[0] == "gpucluster_agents":
                continue  # below, module by module
            target = _room(imported)
            if target != room and target not in LAYERS[room] and imported not in LAYERS[room]:
                problems.append(f"{module} ({room}) imports {imported} ({target})")
        if room != "gpucluster_agents":
            allowed = [a for a in LAYERS[room] if a.split(".")[0] == "gpucluster_agents"]
            problems += [
                f"{module} ({room}) imports {m} (only {allowed or 'none'})"
                for m in sorted(_node_package_reached(path))
                if not _within(m, allowed)
            ]
    return problems


def _control_plane_problems(root: Path = ROOT) -> list[str]:
    """Imports of the node package past NODE_PACKAGE_API in every control-plane file at ``root`` (the stack program,
    the policy pack and the examples too, which LAYERS has no room for)."""
    files: set[Path] = set()
    for name in CONTROL_PLANE:
        place = root / name
        files |= {place} if place.is_file() else {p.resolve() for p in place.rglob("*.py")}
    return [
        f"{path.relative_to(root.resolve()) if path.is_relative_to(root.resolve()) else path} imports {m}"
        f" (the control plane imports only {', '.join(NODE_PACKAGE_API)} of the node package)"
        for path in sorted(files)
        for m in sorted(_node_package_reached(path))
        if not _within(m, NODE_PACKAGE_API)
    ]


def test_rooms_import_only_downward_and_the_model_imports_no_pulumi():
    assert _layer_problems() == []


def test_the_control_plane_imports_only_the_node_packages_contract_and_ship():
    assert _control_plane_problems() == []


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_layer_checks_fail_on_violations_planted_in_a_temporary_tree(tmp_path: Path):
    """The two checks above could not pass by reading nothing: in a tree of their own, each import that reaches past
    the node package's contract and ship module, and the node package importing gpucluster, is a problem; the
    allowed forms are not."""
    allowed = "from gpucluster_agents import contract, ship\nfrom gpucluster_agents.contract.health import to_json\n"
    _plant(
        tmp_path,
        {
            "gpucluster/__init__.py": "",
            "gpucluster/render/__init__.py": "",
            "gpucluster/render/ok.py": allowed,
            "gpucluster/render/health.py": "def f():\n    from gpucluster_agents.health.xid import XID_CLASSES\n",
            "gpucluster/config/names.py": "from gpucluster_agents import power\n",
            "gpucluster/tools/cli.py": "import gpucluster_agents\n",
            "gpucluster/facts/data.py": "from gpucluster_agents.contract import TAG_CLUSTER\n",
            "components/ok.py": allowed,
            "components/teardown.py": "from gpucluster_agents.teardown import teardown\n",
            "__main__.py": "import gpucluster_agents.boot.helper as boot\n",
            "policy-pack/__main__.py": allowed,
            "gpucluster_agents/__init__.py": "",
            "gpucluster_agents/contract/__init__.py": "",
            "gpucluster_agents/power/ec2.py": "from gpucluster.render import core\n",
        },
    )
    layers = _layer_problems(tmp_path)
    assert sorted(layers) == sorted(
        [
            "gpucluster.render.health (gpucluster.render) imports gpucluster_agents.health.xid (only "
            + str([a for a in LAYERS["gpucluster.render"] if a.startswith("gpucluster_agents")])
            + ")",
            "gpucluster.config.names (gpucluster.config) imports gpucluster_agents.power (only "
            + str([a for a in LAYERS["gpucluster.config"] if a.startswith("gpucluster_agents")])
            + ")",
            "gpucluster.tools.cli (gpucluster.tools) imports gpucluster_agents (only "
            + str([a for a in LAYERS["gpucluster.tools"] if a.startswith("gpucluster_agents")])
            + ")",
            "gpucluster.facts.data (gpucluster.facts) imports gpucluster_agents.contract (only none)",
            "gpucluster.components.teardown (gpucluster.components) imports gpucluster_agents.teardown (only "
            + str([a for a in LAYERS["gpucluster.components"] if a.startswith("gpucluster_agents")])
            + ")",
            "gpucluster_agents.power.ec2 (gpucluster_agents) imports gpucluster.render (gpucluster.render)",
            "gpucluster_agents.power.ec2 (gpucluster_agents) imports gpucluster.render.core (gpucluster.render)",
        ]
    ), layers
    reached = sorted(line.split(" (")[0] for line in _control_plane_problems(tmp_path))
    assert reached == [
        "__main__.py imports gpucluster_agents.boot.helper",
        "components/teardown.py imports gpucluster_agents.teardown",
        "gpucluster/config/names.py imports gpucluster_agents.power",
        "gpucluster/render/health.py imports gpucluster_agents.health.xid",
        "gpucluster/tools/cli.py imports gpucluster_agents",
    ], reached


def test_no_import_cycle_between_modules():
    modules = _modules()
    graph = {m: {i for i in _imports(p, m) if i in modules and i != m} for m, p in modules.items()}
    # a module importing its own package's __init__ is not a cycle we care about
    graph = {m: {i for i in deps if not m.startswith(i + ".")} for m, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []


# --- what `pulumi up` installs is what the stack program imports ----------------------------------------------


def _requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(line.split("==")[0].strip().lower().replace("_", "-"))
    return names


@pytest.mark.slow  # imports the stack program in a fresh interpreter, then walks the pins' dependencies
def test_the_stack_program_needs_only_what_requirements_txt_installs():
    """Pulumi builds the project's virtualenv from requirements.txt alone: it must install the project
    itself (``-e .``) and every distribution the stack program imports, and what it pins must be what
    pyproject.toml asks for."""
    lines = [ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "-e ." in lines
    probe = (
        "import json, sys, importlib.metadata as md\n"
        "before = set(sys.modules)\n"
        "import gpucluster.program, gpucluster.components.gpu_cluster\n"
        "top = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "dists = md.packages_distributions()\n"
        "print(json.dumps(sorted({d for t in top for d in dists.get(t, [])})))\n"
    )
    result = run_cmd([sys.executable, "-c", probe], ROOT)
    assert result.returncode == 0, result.stderr
    import json
    from importlib import metadata

    imported = {d.lower().replace("_", "-") for d in json.loads(result.stdout)} - {"gpucluster"}
    pinned = _requirement_names(ROOT / "requirements.txt")
    # the closure of the pinned distributions' own dependencies
    closure, todo = set(), list(pinned)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for req in requires:
            if "extra ==" in req:
                continue
            todo.append(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-"))
    assert imported <= closure, f"imported but not installed by requirements.txt: {sorted(imported - closure)}"
    declared = {re.split(r"[ ;<>=!~\[]", d, maxsplit=1)[0].lower() for d in PYPROJECT["project"]["dependencies"]}
    assert declared <= pinned, f"pyproject dependencies not pinned in requirements.txt: {sorted(declared - pinned)}"
