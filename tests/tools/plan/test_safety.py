"""The update-safety table covers every resource type we create, and names real inputs of each."""

from __future__ import annotations

import importlib
import inspect
import json
import re

import pytest
import yaml

from gpucluster.tools.plan.diff.safety import TABLE, replace_reasons, safety_of
from gpucluster.tools.plan.run.stackfile import stack_names
from tests.conftest import GOLDEN, ROOT


def _camel(token: str) -> str:
    return token[0].lower() + token[1:]


def example_types() -> set[str]:
    """Resource types the examples create: ``aws.<module>.<Class>(`` in Python, ``type: aws:<module>:<Class>`` in YAML."""
    found: set[str] = set()
    for path in (ROOT / "examples").rglob("*.py"):
        for module, cls in re.findall(r"\baws\.(\w+)\.([A-Z]\w*)\(", path.read_text()):
            found.add(f"aws:{module}/{_camel(cls)}:{cls}")
    for path in (ROOT / "examples").rglob("Pulumi.yaml"):
        for resource in (yaml.safe_load(path.read_text()).get("resources") or {}).values():
            module, _, cls = str(resource.get("type", "")).partition(":")[2].partition(":")
            if str(resource.get("type", "")).startswith("aws:"):
                found.add(f"aws:{module}/{_camel(cls)}:{cls}")
    return found


def shipped_types() -> set[str]:
    """Every custom resource type in the golden plan of every shipped stack (test_plan.py keeps those
    equal to the plans themselves)."""
    types: set[str] = set()
    for stack in stack_names():
        doc = json.loads((GOLDEN / "plans" / f"{stack}.json").read_text())
        types |= {r["type"] for r in doc["resources"] if r["custom"]}
    return types


def test_every_created_type_is_in_the_table():
    types = shipped_types() | example_types()
    assert "aws:ec2/capacityReservation:CapacityReservation" in types  # the examples were read
    assert "aws:fsx/lustreFileSystem:LustreFileSystem" in types
    missing = sorted(t for t in types if safety_of(t) is None)
    assert missing == [], f"add these to gpucluster/tools/plan/diff/safety/table.py: {missing}"


def test_every_entry_says_where_it_comes_from():
    for token, entry in TABLE.items():
        assert entry.source.startswith("https://"), token


@pytest.mark.parametrize("token", sorted(t for t in TABLE if t.startswith("aws:")))
def test_every_force_new_path_is_an_input_of_the_pinned_provider(token):
    """A misspelt property would never match a change: each path's first part is an argument of the
    pulumi_aws resource class."""
    module_path, cls_name = token.split(":")[1].split("/")[0], token.split(":")[2]
    cls = getattr(importlib.import_module(f"pulumi_aws.{module_path}"), cls_name)
    params = set(inspect.signature(cls._internal_init).parameters)
    entry = TABLE[token]
    for path in (*entry.replace_on, *entry.replace_on_decrease):
        top = path.split(".")[0]
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", top).lower()
        assert snake in params, f"{token}: {path} is not an input ({snake})"


@pytest.mark.parametrize("token", sorted(t for t in TABLE if t.startswith("grafana:")))
def test_every_grafana_force_new_path_is_an_input_of_the_pinned_grafana_provider(token):
    module_path, cls_name = token.split(":")[1].split("/")[0], token.split(":")[2]
    cls = getattr(importlib.import_module(f"pulumiverse_grafana.{module_path}"), cls_name)
    params = set(inspect.signature(cls._internal_init).parameters)
    for path in TABLE[token].replace_on:
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", path.split(".")[0]).lower()
        assert snake in params, f"{token}: {path} is not an input ({snake})"


def test_replace_reasons():
    lustre = "aws:fsx/lustreFileSystem:LustreFileSystem"
    assert replace_reasons(lustre, ["efaEnabled", "tags.team"], {}, {}) == ["efaEnabled"]
    assert replace_reasons(lustre, ["subnetIds[0]"], {}, {}) == ["subnetIds"]
    assert replace_reasons(lustre, ["storageCapacity"], {"storageCapacity": 4800}, {"storageCapacity": 9600}) == []
    assert replace_reasons(lustre, ["storageCapacity"], {"storageCapacity": 9600}, {"storageCapacity": 4800}) == [
        "storageCapacity"
    ]
    assert replace_reasons("aws:ec2/launchTemplate:LaunchTemplate", ["userData", "instanceType"], {}, {}) == []
    assert replace_reasons("aws:ec2/vpc:Vpc", ["cidrBlockAssociations"], {}, {}) == []  # a prefix, not a match
    assert replace_reasons("gpucluster:index:GpuCluster", ["x"], {}, {}) == []


def test_no_component_names_a_resource_by_list_position():
    """A name like ``dra-{i}`` re-targets every later resource when an item is inserted: names are stable
    keys (a path, a principal, a name). Looks for an enumerate index inside a resource name in components/."""
    pattern = re.compile(r"""f["'][^"']*[-_/]\{(i|j|k|n|idx|index|pos)\}""")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "components").rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and "_path" not in line and "[{" not in line
    ]
    assert offenders == []
    # the check can fail: the names this project used before
    assert pattern.search('f"{name}-dra-{i}"') and pattern.search('f"{name}-access-{j}-{policy}"')
