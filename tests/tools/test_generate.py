"""``gpucluster generate``: one command regenerates every generated file, ``--check`` fails on any stale one (the
test here and the checks workflow run it), and the components reference says what the provider schema says."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from pulumi.provider.experimental.component import ComponentProvider

from gpucluster.tools.cli import main
from gpucluster.tools.cli_common import CliError
from gpucluster.tools.components_reference import components_reference, split_default
from gpucluster.tools.generate import CHECKOUT, generate, generated_files
from gpucluster.tools.provider import NAME, PUBLIC_COMPONENTS, package_version
from tests.conftest import ROOT

REFERENCE = ROOT / "docs" / "components-reference.md"


def test_every_generated_file_is_current(capsys):
    assert main(["generate", "--check"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out == "3 generated files up to date\n"


def test_the_generated_files_are_the_three_and_in_this_checkout():
    assert CHECKOUT.resolve() == ROOT.resolve()
    names = [f.name(ROOT) for f in generated_files()]
    assert names == ["components/_shared/config_types.py", "docs/config-reference.md", "docs/components-reference.md"]


def _copy(tmp_path: Path) -> Path:
    """A checkout of just the generated files, each as committed."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    for f in generated_files(tmp_path):
        f.path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / f.path.relative_to(tmp_path), f.path)
    return tmp_path


@pytest.mark.slow  # regenerates all three files into a copy of the tree, twice
def test_check_names_every_stale_file_and_writes_nothing(tmp_path, capsys):
    root = _copy(tmp_path)
    types, config_ref, components_ref = (f.path for f in generated_files(root))
    types.write_text(types.read_text().replace("class NodeGroupConfig(", "class NodeGroupConfigEditedByHand("))
    components_ref.unlink()
    before = {p: p.read_text() for p in (types, config_ref)}
    assert generate(check=True, root=root) == 1
    err = capsys.readouterr().err
    assert "stale: components/_shared/config_types.py" in err and "stale: docs/components-reference.md" in err
    assert "config-reference.md" not in err.replace("components-reference.md", "")
    assert "2 generated file(s) out of date; run `gpucluster generate`" in err
    assert {p: p.read_text() for p in (types, config_ref)} == before and not components_ref.exists()
    # without --check: the two rewritten, the current one left alone; then all current
    assert generate(check=False, root=root) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "wrote: components/_shared/config_types.py",
        "up to date: docs/config-reference.md",
        "wrote: docs/components-reference.md",
    ]
    assert types.read_text() == (ROOT / "components" / "_shared" / "config_types.py").read_text()
    assert components_ref.read_text() == REFERENCE.read_text()
    assert generate(check=True, root=root) == 0


def test_generate_never_writes_outside_a_checkout(tmp_path):
    """Run from an installed wheel the package's parent is site-packages: no pyproject of ours, nothing written."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "someone-else"\n')
    with pytest.raises(CliError, match="is not a checkout of gpucluster"):
        generate(check=False, root=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


def test_the_checks_workflow_runs_the_check():
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "checks.yml").read_text())
    runs = [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]
    assert any(re.search(r"gpucluster generate --check\s*$", run) for run in runs), runs


# --- the components reference ------------------------------------------------------------------------------------


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return {part.split("\n", 1)[0]: part for part in parts}


def test_the_reference_has_every_component_and_every_field_of_the_schema():
    """The same fields as the provider schema, component by component: one source, read once."""
    schema = json.loads(ComponentProvider(PUBLIC_COMPONENTS, NAME, version=package_version()).schema)
    sections = _sections(REFERENCE.read_text())
    assert list(sections) == [c.__name__ for c in PUBLIC_COMPONENTS] + ["Types"]
    for cls in PUBLIC_COMPONENTS:
        resource = schema["resources"][f"{NAME}:index:{cls.__name__}"]
        section = sections[cls.__name__]
        assert f"`{NAME}:index:{cls.__name__}`" in section
        named = re.findall(r"^\| `([^`]+)`(?: \(`([^`]+)`\))? \|", section, flags=re.M)
        schema_names = [schema_name or python for python, schema_name in named]
        assert schema_names == [*resource["inputProperties"], *resource["properties"]], cls.__name__
        for required in resource.get("requiredInputs", []):
            assert re.search(rf"\(`{required}`\) \| [^|]+ \| required \||^\| `{required}` \| [^|]+ \| required \|", section, re.M)
    types = {name.removeprefix(f"{NAME}:index:") for name in schema["types"]}
    assert set(re.findall(r"^### (\w+)$", sections["Types"], flags=re.M)) == types


def test_a_field_row_shows_type_default_and_description():
    section = _sections(REFERENCE.read_text())["GpuNodeGroup"]
    rows = {row.split(" | ")[0]: row for row in section.splitlines() if row.startswith("| `")}
    assert rows["| `min_size` (`minSize`)"] == "| `min_size` (`minSize`) | integer | 0 | Fewest instances. |"
    assert rows["| `instance_type` (`instanceType`)"].startswith("| `instance_type` (`instanceType`) | string | required |")
    assert "| list of string, Input | every private subnet in the group's zones |" in rows["| `subnet_ids` (`subnetIds`)"]


@pytest.mark.parametrize(
    ("description", "default", "rest"),
    [
        ("Fewest instances. Default 0.", "0", "Fewest instances."),
        ("Tags. Default: none.", "none", "Tags."),
        ("Kubernetes version. Default ``1.33``. Supported: 1.30–1.34.", "``1.33``", "Kubernetes version. Supported: 1.30–1.34."),
        ("Protect it. Default true (``storage.protectData``).", "true (``storage.protectData``)", "Protect it."),
        ("Per group.\n    Default: the group's\n    own ``subnetIds``.", "the group's own ``subnetIds``", "Per group."),
        ("``on-demand`` (default), ``spot``.", "``on-demand``", "``on-demand`` (default), ``spot``."),
        ("The site's VPN device's public IPv4 address.", None, "The site's VPN device's public IPv4 address."),
    ],
)
def test_the_default_is_read_from_the_description(description, default, rest):
    assert split_default(description) == (default, rest)


@pytest.mark.slow  # builds the whole reference twice
def test_the_reference_is_deterministic():
    assert components_reference() == components_reference()
