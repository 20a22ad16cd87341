"""Contracts every component keeps, public or internal (discovered under ``components/``, private helpers included):
its type token, its constructor, documented Args (or parameters), every resource under the root component, the
root's options reaching every child, the cluster's tags on every taggable AWS resource. The checks on what a
component builds run over the programs of ``contract_programs.py`` (every shipped stack and the components no
stack builds), and a test fails when a component is built by none of them."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import itertools
import pkgutil
import re
import typing
from collections.abc import Callable
from pathlib import Path

import pulumi
import pulumi_aws
import pytest

import gpucluster.components
from gpucluster.components._shared.edge import Adapted
from gpucluster.components.gpu_cluster import GpuCluster, GpuClusterArgs
from gpucluster.config.naming import CLUSTER_TAG, MANAGED_BY_TAG
from tests.components.contract_programs import PROGRAMS, Built, built
from tests.conftest import group, make_config


def component_classes() -> list[type[pulumi.ComponentResource]]:
    """Every ``ComponentResource`` subclass defined under ``components/``: the public components of its modules and
    families, and the internal ones of its private helpers (``SlurmNodeGroup``, ``EksNodeTemplate``,
    ``AgentTeardown`` ...), which a stack builds as children and which keep the same contracts."""
    found = []
    for mod in pkgutil.walk_packages(gpucluster.components.__path__, "gpucluster.components."):
        module = importlib.import_module(mod.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, pulumi.ComponentResource) and cls.__module__ == module.__name__:
                found.append(cls)
    return found


COMPONENTS = component_classes()


def _public(cls: type) -> bool:
    """A component a program uses: neither its module nor a folder above it is private (``_``)."""
    return not any(part.startswith("_") for part in cls.__module__.split(".")[2:])


def _bases(cls: type) -> list[type]:
    """The discovered components ``cls`` builds on (``NodeGroupResource`` for the node group variants)."""
    return [b for b in cls.__mro__[1:] if b in COMPONENTS]


BASES = {b for cls in COMPONENTS for b in _bases(cls)}
"""Components only built through a subclass (checked through them)."""
PUBLIC = [c for c in COMPONENTS if _public(c) and c not in BASES]
INTERNAL = [c for c in COMPONENTS if not _public(c) and c not in BASES]


def test_there_are_components():
    names = {c.__name__ for c in COMPONENTS}
    assert {"GpuCluster", "Network", "GpuNodeGroup"} <= {c.__name__ for c in PUBLIC}
    assert {"SlurmNodeGroup", "EksNodeTemplate", "AgentTeardown"} <= {c.__name__ for c in INTERNAL} <= names
    assert {b.__name__ for b in BASES} == {"NodeGroupResource"}


def _expected_token(cls: type) -> str:
    """``gpucluster:index:<ClassName>`` for a public component. A variant of a public component (a class sharing its
    base) registers as that component, so a node group's URNs do not depend on which variant built it. Any other
    internal component: ``gpucluster:<family>:<ClassName>`` (the family folder it lives in)."""
    if _public(cls):
        return f"gpucluster:index:{cls.__name__}"
    for public in PUBLIC:
        if set(_bases(public)) & set(_bases(cls)):
            return f"gpucluster:index:{public.__name__}"
    return f"gpucluster:{cls.__module__.split('.')[2]}:{cls.__name__}"


@pytest.fixture(scope="module")
def runs() -> Callable[[str], Built]:
    """The contract programs' runs, each built once (module scope: the module's tests share one pytest-xdist
    worker, tests/conftest.py)."""
    return built


def _constructed(runs: Callable[[str], Built]) -> dict[type, set[str]]:
    """Each component class any contract program built → the type tokens it registered with."""
    tokens: dict[type, set[str]] = {}
    for program in PROGRAMS:
        for cls, _, token in runs(program).components:
            if cls is not pulumi.ComponentResource:  # a builder's part: its token is its component's (test_token)
                tokens.setdefault(cls, set()).add(token)
    return tokens


@pytest.mark.slow  # plans every shipped stack and two more programs (about 27 s of CPU)
def test_every_component_is_built_by_a_contract_program(runs):
    """Otherwise the checks on what a component builds (tokens, parents, tags, options) never see it."""
    assert set(_constructed(runs)) == set(PUBLIC) | set(INTERNAL)


@pytest.mark.slow  # plans every shipped stack and two more programs (about 27 s of CPU)
@pytest.mark.parametrize("cls", PUBLIC + INTERNAL, ids=lambda c: c.__name__)
def test_token(runs, cls):
    """The token a component registers with, as built in the contract programs (and, for a public component, the
    ``TOKEN`` of its module that the provider schema publishes)."""
    assert _constructed(runs).get(cls) == {_expected_token(cls)}
    if _public(cls):
        assert inspect.getmodule(cls).TOKEN == _expected_token(cls)  # type: ignore[union-attr]


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_constructor(cls):
    params = list(inspect.signature(cls.__init__).parameters)
    assert params[:4] == ["self", "name", "args", "opts"]
    assert inspect.signature(cls.__init__).parameters["opts"].default is None


@pytest.mark.parametrize("cls", INTERNAL, ids=lambda c: c.__name__)
def test_internal_constructor_takes_a_name_and_a_place_and_documents_its_parameters(cls):
    """An internal component has no Args class (it takes resolved values): its parameters are documented in its
    class or ``__init__`` docstring instead (as ``name``), and it takes ``opts`` or ``parent`` (its place in the
    tree: what reaches its parent reaches its children)."""
    params = list(inspect.signature(cls.__init__).parameters)
    assert params[:2] == ["self", "name"]
    assert "opts" in params or "parent" in params
    docs = (cls.__doc__ or "") + (cls.__init__.__doc__ or "")
    undocumented = [p for p in params[2:] if p not in ("opts", "parent") and f"``{p}``" not in docs]
    assert undocumented == [], f"{cls.__name__}: document {undocumented} in its docstring"


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


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_args_class_fields_are_documented(cls):
    module = inspect.getmodule(cls)
    args_cls = getattr(module, f"{cls.__name__}Args")
    if typing.is_typeddict(args_cls):
        fields = set(args_cls.__annotations__)
    else:
        assert dataclasses.is_dataclass(args_cls)
        fields = {f.name for f in dataclasses.fields(args_cls)}
    assert fields - _documented(args_cls) == set(), f"undocumented {args_cls.__name__} fields"


def _config_shaped(cls: type) -> bool:
    """Args that are a typed dict: a program's plain values, checked and resolved at the component's edge. (Args
    that are a dataclass hold values already resolved: ``GpuOperatorArgs``, ``KueueArgs``, ...)"""
    return typing.is_typeddict(getattr(inspect.getmodule(cls), f"{cls.__name__}Args"))


ADAPTED = [c for c in PUBLIC if _config_shaped(c)]


def test_config_shaped_components_are_found():
    assert {"GpuCluster", "GpuNodeGroup", "SlurmCluster", "EksCluster", "LustreStorage", "DataBucket"} <= {
        c.__name__ for c in ADAPTED
    }


@pytest.mark.parametrize("cls", ADAPTED, ids=lambda c: c.__name__)
def test_the_args_adapter_is_from_args_returning_adapted(cls):
    """One spelling and one shape for every Args adapter (``components/_shared/edge.py``): the component's module has
    ``from_args(args)``, it returns an ``Adapted`` (``resolved``, ``wiring``), and the constructor calls it."""
    module = inspect.getmodule(cls)
    adapter = getattr(module, "from_args", None)
    assert callable(adapter), f"{module.__name__} has no from_args"  # type: ignore[union-attr]
    assert list(inspect.signature(adapter).parameters) == ["args"]
    assert typing.get_origin(typing.get_type_hints(adapter)["return"]) is Adapted
    assert "from_args(args)" in inspect.getsource(cls.__init__)


def test_no_other_adapter_spelling():
    """An Args adapter spelt another way (``network_from_args``, ``resolve_args``, ``_build_from_args``) is a second
    name for the same job: every one is ``from_args``."""
    root = Path(gpucluster.components.__path__[0])
    others = [
        f"{path.relative_to(root)}:{node.name}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name != "from_args" and re.search(r"from_args$|^_?resolve_args$", node.name)
    ]
    assert others == []


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


@pytest.mark.slow  # plans every shipped stack and two more programs (about 27 s of CPU)
@pytest.mark.parametrize("program", PROGRAMS)
def test_every_resource_descends_from_the_root_component(runs, program):
    """Every resource a component creates is its child, or a child of such a child (a namespace's policies go with
    the namespace): nothing escapes the tree the program's options flow down."""
    plan = runs(program).plan
    by_urn = {r.urn: r for r in plan.resources}
    (root,) = [r for r in plan.resources if r.parent not in by_urn and not r.type.startswith("pulumi:providers:")]
    assert root.type.startswith("gpucluster:index:")
    for r in plan.resources:
        if r is root or r.type.startswith("pulumi:providers:"):
            continue
        chain = [r]
        while chain[-1].parent in by_urn:
            chain.append(by_urn[chain[-1].parent])
        assert chain[-1] is root, f"{r.name} is not under {root.name}: {[c.name for c in chain]}"
        assert not by_urn[r.parent].custom or r.type.startswith("kubernetes:"), f"{r.name} is parented to a resource"


@pytest.mark.slow  # plans every shipped stack and two more programs (about 27 s of CPU)
@pytest.mark.parametrize("program", PROGRAMS)
def test_options_reach_every_child(runs, program):
    """``protect`` given to the root component reaches every resource under it (through ``parent``), and so does
    a provider: every Kubernetes object uses the program's provider."""
    run = runs(program)
    resources = [r for r in run.plan.resources if not r.type.startswith("pulumi:providers:")]
    assert [r.name for r in resources if not r.protect] == []
    if run.provider is not None:
        provider = run.plan.by_name(run.provider, "pulumi:providers:kubernetes").urn
        objects = [r for r in resources if r.custom and r.type.startswith("kubernetes:")]
        assert objects and [r.name for r in objects if not (r.provider or "").startswith(provider)] == []


@pytest.mark.slow  # plans every shipped stack and two more programs (about 27 s of CPU)
@pytest.mark.parametrize("program", [p for p in PROGRAMS if p != "kubernetes-on-prem"])
def test_taggable_children_carry_the_cluster_tags(runs, program):
    """Each taggable AWS resource carries the cluster tag, the managed-by tag and the program's own tags."""
    run = runs(program)
    wanted = {CLUSTER_TAG: run.cluster, MANAGED_BY_TAG: "gpucluster", **run.tags}
    taggable = [r for r in run.plan.resources if r.custom and _taggable(r.type)]
    assert len(taggable) > (10 if program.startswith("stack-") else 0)
    assert [r.name for r in taggable if not _tags(r.inputs).items() >= wanted.items()] == []


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


KEPT_WITH_DATA = (
    "aws:kms/key:Key",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
)


@pytest.mark.parametrize("protect", [True, False], ids=["protectData", "throwaway"])
def test_every_key_and_log_is_kept_like_the_data(run_components, protect):
    """Every KMS key, every log group and the file system follow storage.protectData (EKS's
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
    keys = [r for r in kept if r.type == "aws:kms/key:Key"]
    assert len(keys) == 4  # data bucket, Lustre, EKS Secrets, monitoring (logs, alerts)
    assert [(r.name, r.protect, r.retain_on_delete) for r in kept] == [(r.name, protect, protect) for r in kept]
