"""Contracts every component keeps: type token, documented Args, parents, tags on taggable children."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import itertools
import pkgutil
import typing

import pulumi
import pulumi_aws
import pytest

import gpucluster.components
from gpucluster.components._shared.build import part
from gpucluster.components.gpu_cluster import TOKEN as CLUSTER_TOKEN
from gpucluster.components.gpu_cluster import GpuCluster, GpuClusterArgs, build_gpu_cluster
from gpucluster.config.naming import CLUSTER_TAG, MANAGED_BY_TAG
from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from tests.conftest import group, make_config


def component_classes() -> list[type[pulumi.ComponentResource]]:
    """The public components: classes of the modules of ``gpucluster.components`` and its families whose names do
    not start with ``_`` (a private helper's classes are not components a program uses)."""
    found = []
    for mod in pkgutil.walk_packages(gpucluster.components.__path__, "gpucluster.components."):
        if mod.ispkg or any(part.startswith("_") for part in mod.name.split(".")[2:]):
            continue
        module = importlib.import_module(mod.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, pulumi.ComponentResource) and cls.__module__ == module.__name__:
                found.append(cls)
    return found


COMPONENTS = component_classes()


def test_there_are_components():
    names = {c.__name__ for c in COMPONENTS}
    assert {"GpuCluster", "Network", "GpuNodeGroup"} <= names


@pytest.mark.parametrize("cls", COMPONENTS, ids=lambda c: c.__name__)
def test_token_and_constructor(cls):
    module = inspect.getmodule(cls)
    assert module is not None and module.TOKEN == f"gpucluster:index:{cls.__name__}"
    params = list(inspect.signature(cls.__init__).parameters)
    assert params[:4] == ["self", "name", "args", "opts"]
    assert inspect.signature(cls.__init__).parameters["opts"].default is None


def _documented(cls: type) -> set[str]:
    """Fields with a string literal under them in ``cls``'s body (and, for a TypedDict, its bases')."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    documented = set()
    for node, nxt in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            documented.add(node.target.id)  # type: ignore[union-attr]
    module = inspect.getmodule(cls)
    for base in tree.body[0].bases:  # type: ignore[attr-defined]
        parent = getattr(module, base.id, None) if isinstance(base, ast.Name) else None
        if parent is not None and typing.is_typeddict(parent):  # (3.11 TypedDicts keep no record of their bases)
            documented |= _documented(parent)
    return documented


@pytest.mark.parametrize("cls", COMPONENTS, ids=lambda c: c.__name__)
def test_args_class_fields_are_documented(cls):
    module = inspect.getmodule(cls)
    args_cls = getattr(module, f"{cls.__name__}Args")
    if typing.is_typeddict(args_cls):
        fields = set(args_cls.__annotations__)
    else:
        assert dataclasses.is_dataclass(args_cls)
        fields = {f.name for f in dataclasses.fields(args_cls)}
    assert fields - _documented(args_cls) == set(), f"undocumented {args_cls.__name__} fields"


def _taggable(token: str) -> bool:
    try:
        module = getattr(pulumi_aws, token.split(":")[1].split("/")[0])
        cls = getattr(module, token.split(":")[2])
    except (AttributeError, IndexError):
        return False
    return "tags" in inspect.signature(cls._internal_init).parameters


def _tags(inputs: dict) -> dict:
    tags = inputs.get("tags") or {}
    if isinstance(tags, list):  # Auto Scaling groups take a list of {key, value}
        return {t["key"]: t["value"] for t in tags}
    return tags


FULL_CLUSTERS = {
    "plain": make_config(
        group(), group(name="dev", instanceType="g6e.xlarge"), network={"interfaceEndpoints": ["ssm"]}, tags={"team": "ml"}
    ),
    "slurm": make_config(
        group(),
        group(name="dev", instanceType="g6e.xlarge", minSize=1, desiredSize=1),
        tags={"team": "ml"},
        storage={"lustre": {"storageCapacityGib": 2400, "throughputPerUnitStorage": 250}},
        slurm={"accounting": {}, "nodeGroups": [{"name": "dev", "mode": "static"}]},
    ),
}


@pytest.mark.parametrize("config", FULL_CLUSTERS.values(), ids=FULL_CLUSTERS.keys())
def test_full_cluster_children_have_parents_and_tags(run_components, config):
    # Built from Args, as a program in any language would (the stack's keys, camelCase at any depth)
    args = {key.split(":")[1]: value for key, value in config.items() if key.startswith("gpucluster:")}
    args.update(name="c", region=config["aws:region"])
    plan = run_components(lambda: GpuCluster("c", GpuClusterArgs(**args)))
    component_urns = {r.urn for r in plan.resources if not r.custom}
    untagged = []
    for r in plan.resources:
        if r.custom:
            assert r.parent in component_urns, f"{r.name} is not parented to a component"
        if r.custom and _taggable(r.type):
            tags = _tags(r.inputs)
            if tags.get(CLUSTER_TAG) != "c" or tags.get("team") != "ml" or tags.get(MANAGED_BY_TAG) != "gpucluster":
                untagged.append(r.name)
    assert untagged == []
    taggable = [r for r in plan.resources if r.custom and _taggable(r.type)]
    assert len(taggable) > 10


def test_opts_reach_the_component(run_components):
    spec = load_spec(make_config(), stack="c").cluster
    plan = run_components(
        lambda: build_gpu_cluster(part(CLUSTER_TOKEN, "c", None, pulumi.ResourceOptions(protect=True)), "c", spec, load_catalog())
    )
    cluster = plan.by_name("c")
    assert cluster.protect
    assert all(r.protect for r in plan.resources), "protect should flow to children through parent"


KEPT_WITH_DATA = (
    "aws:kms/key:Key",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
)


@pytest.mark.parametrize("protect", [True, False], ids=["protectData", "throwaway"])
def test_every_key_and_log_is_kept_like_the_data(run_components, protect):
    """Every KMS key, the flow-log group and the file system follow storage.protectData (EKS's
    Secrets key included): protected and retained on delete together, or neither."""
    config = make_config(
        group(),
        group(name="k8s", instanceType="g6e.xlarge", scheduler="kubernetes"),
        storage={
            "lustre": {"storageCapacityGib": 2400, "throughputPerUnitStorage": 250},
            "bucket": {},
            "protectData": protect,
        },
        kubernetes={},
        network={"availabilityZones": ["us-east-1a", "us-east-1b"]},
    )
    # Built from Args, as a program in any language would (the stack's keys, camelCase at any depth)
    args = {key.split(":")[1]: value for key, value in config.items() if key.startswith("gpucluster:")}
    args.update(name="c", region=config["aws:region"])
    plan = run_components(lambda: GpuCluster("c", GpuClusterArgs(**args)))
    kept = [r for r in plan.resources if r.type in KEPT_WITH_DATA]
    assert {r.type for r in kept} == set(KEPT_WITH_DATA)
    assert len([r for r in kept if r.type == "aws:kms/key:Key"]) == 3  # data bucket, Lustre, EKS Secrets
    assert [(r.name, r.protect, r.retain_on_delete) for r in kept] == [(r.name, protect, protect) for r in kept]
