"""The examples under ``examples/`` work as a user would run them.

- ``python-byo-vpc``: planned by the CLI of the wheel built from this checkout, installed (not editable)
  into a fresh environment, from a copy of the example outside the checkout — a Pulumi program that is not
  the stack program, using the components as a library with Outputs of its own resources.
- ``yaml-package-add``: checked against the schema the component provider serves (read in-process, as
  ``pulumi package add`` would get it): every gpucluster type exists, every property is an input of that
  component at its depth (camelCase), every required input is given. The Pulumi CLI does not run here.
- ``python-byo-vpc/__main__.py`` type-checks against the ``*Args`` typed dicts (pyright).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.provider.experimental.component import ComponentProvider

from gpucluster.tools.provider import NAME, PUBLIC_COMPONENTS, package_version
from tests.conftest import ROOT
from tests.pyright import pyright
from tests.tools.conftest import clean_env, run_cmd

EXAMPLES = ROOT / "examples"
BYO_VPC = EXAMPLES / "python-byo-vpc"
YAML_EXAMPLE = EXAMPLES / "yaml-package-add" / "Pulumi.yaml"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


# --- python-byo-vpc, planned from the installed wheel ---------------------------------------------------


@pytest.fixture(scope="module")
def byo_plan(installed: tuple[Path, Path]) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """(JSON plan, text plan) of a copy of the example outside the checkout, by the installed CLI."""
    bindir, scratch = installed
    project = scratch / "python-byo-vpc"
    if not project.exists():
        shutil.copytree(BYO_VPC, project, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    command = [str(bindir / "gpucluster"), "plan", "--stack", "example", "--project-dir", str(project)]
    as_json = run_cmd([*command, "--json"], scratch, env=clean_env())
    as_text = run_cmd([*command, "--no-files"], scratch, env=clean_env())
    return as_json, as_text


def test_byo_vpc_example_plans_from_the_installed_wheel(byo_plan):
    as_json, as_text = byo_plan
    for result in byo_plan:
        assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
        assert "Traceback" not in result.stderr
    plan = json.loads(as_json.stdout)
    assert plan["ok"] and plan["project"] == "gpu-byo-vpc" and plan["region"] == "us-east-1"
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in plan["resources"]:
        by_type.setdefault(r["type"], []).append(r)
    (reservation,) = by_type["aws:ec2/capacityReservation:CapacityReservation"]
    (lt,) = by_type[LT]
    target = lt["inputs"]["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == reservation["id"]  # the Output, not a stand-in
    assert len(by_type["aws:fsx/lustreFileSystem:LustreFileSystem"]) == 1
    assert len(by_type["gpucluster:index:SlurmCluster"]) == 1
    heads = [r for r in by_type["aws:ec2/instance:Instance"] if r["parent"].endswith("slurm")]
    assert heads, "no Slurm head node in the plan"
    (subnet,) = by_type["aws:ec2/subnet:Subnet"]
    (asg,) = by_type["aws:autoscaling/group:Group"]  # the static group's nodes, in your subnet
    assert asg["inputs"]["vpcZoneIdentifiers"] == [subnet["id"]]
    assert set(plan["outputs"]) == {"vpcId", "capacityReservationId", "lustreDnsName", "headNodeId", "slurmctld"}
    # The reservation is made by this program, so the text plan shows its mock id as the stand-in it is.
    assert f"capacity reservation (id of {reservation['name']}, assigned at create) targeted" in as_text.stdout
    assert as_text.stdout.splitlines()[1] == "  scheduler  Slurm"


@pytest.mark.slow  # a pyright process
def test_byo_vpc_example_type_checks_against_the_args(tmp_path_factory: pytest.TempPathFactory):
    result = pyright(tmp_path_factory, BYO_VPC / "__main__.py")
    assert result.returncode == 0, result.stdout


# --- yaml-package-add, against the provider's schema ------------------------------------------------------


def _yaml_resources() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(YAML_EXAMPLE.read_text())
    assert doc["runtime"] == "yaml" and NAME in doc["packages"]
    return {n: r for n, r in doc["resources"].items() if r["type"].startswith(f"{NAME}:")}


def _component_params() -> list[Any]:
    return sorted({r["type"].rsplit(":", 1)[-1] for r in _yaml_resources().values()})


def _schema_of(component: str) -> dict[str, Any]:
    (cls,) = [c for c in PUBLIC_COMPONENTS if c.__name__ == component]
    return json.loads(ComponentProvider([cls], NAME, version=package_version()).schema)


def _misfits(value: Any, spec: dict[str, Any], schema: dict[str, Any], where: str) -> list[str]:
    """What in ``value`` does not fit the schema's property ``spec`` (unknown or missing keys, at every depth)."""
    ref = spec.get("$ref", "")
    if ref.startswith("#/types/") and isinstance(value, dict):
        typ = schema["types"][ref.removeprefix("#/types/")]
        return _object_misfits(value, typ.get("properties", {}), typ.get("required", []), schema, where)
    if spec.get("type") == "array" and isinstance(value, list):
        return [m for i, v in enumerate(value) for m in _misfits(v, spec.get("items", {}), schema, f"{where}[{i}]")]
    return []


def _object_misfits(
    value: dict[str, Any], props: dict[str, Any], required: list[str], schema: dict[str, Any], where: str
) -> list[str]:
    out = [f"{where}.{k}: not an input" for k in value if k not in props]
    out += [f"{where}.{k}: required, not given" for k in required if k not in value]
    for k, v in value.items():
        if k in props:
            out += _misfits(v, props[k], schema, f"{where}.{k}")
    return out


@pytest.mark.parametrize("component", _component_params())
def test_yaml_example_fits_the_providers_schema(component):
    schema = _schema_of(component)
    token = f"{NAME}:index:{component}"
    assert token in schema["resources"], f"{token} is not in the schema"
    resource = schema["resources"][token]
    used = {n: r for n, r in _yaml_resources().items() if r["type"] == token}
    for name, r in used.items():
        props = r.get("properties") or {}
        misfits = _object_misfits(props, resource.get("inputProperties", {}), resource.get("requiredInputs", []), schema, name)
        assert not misfits, misfits
    outputs = resource.get("properties", {})
    for expr in yaml.safe_load(YAML_EXAMPLE.read_text()).get("outputs", {}).values():
        for name in used:
            if expr.startswith(f"${{{name}."):
                assert expr[len(name) + 3 : -1] in outputs, f"{expr}: not an output of {component}"


def _readme_gpu_cluster() -> dict[str, Any]:
    """The documented YAML program for GpuCluster (docs/components.md, ``From other languages``)."""
    readme = (ROOT / "docs" / "components.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, flags=re.S) if "gpucluster:index:GpuCluster" in b]
    return yaml.safe_load(block)["resources"]["cluster"]["properties"]


def test_the_schema_check_reads_nesting_and_catches_misfits():
    # GpuCluster analyzes on every branch: the documented YAML fits, and the check sees a wrong or missing key
    # at any depth (so the YAML example's check is not vacuous while its components are expected failures).
    schema = _schema_of("GpuCluster")
    resource = schema["resources"][f"{NAME}:index:GpuCluster"]

    def misfits(props: dict[str, Any]) -> list[str]:
        return _object_misfits(props, resource["inputProperties"], resource.get("requiredInputs", []), schema, "cluster")

    good = _readme_gpu_cluster()
    assert misfits(good) == []
    typo = {**good, "nodeGroups": [{**good["nodeGroups"][0], "max_size": 4}]}
    assert "cluster.nodeGroups[0].max_size: not an input" in misfits(typo)
    missing = {k: v for k, v in good.items() if k != "nodeGroups"}
    assert "cluster.nodeGroups: required, not given" in misfits(missing)
    nested = {**good, "storage": {"lustre": {"storageCapacity": 2400}}}
    assert "cluster.storage.lustre.storageCapacity: not an input" in misfits(nested)


def test_every_example_is_listed_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("\n## Examples\n") :]
    listed = {d.name for d in EXAMPLES.iterdir() if d.is_dir() and f"`examples/{d.name}/`" in section}
    assert listed == {d.name for d in EXAMPLES.iterdir() if d.is_dir()}
