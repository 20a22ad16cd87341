"""The Pulumi policy pack in policy-pack/: it builds, each policy calls its rule, preview-time unknowns are
handled, and served over gRPC it answers the engine's Analyze and AnalyzeStack calls as the CLI's
rules do.

pulumi-policy serves the pack only from ``PolicyPack(...)``, which blocks, so the pack's module builds
its policies in ``policies()`` and constructs the pack only when Pulumi runs it as ``__main__``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sysconfig
import venv
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from gpucluster.policy import types as t
from gpucluster.policy.evaluate import RULES, evaluate, from_plan
from tests.conftest import ROOT
from tests.tools.policy.fixtures import FIXTURES, lt, plan, res

pytestmark = pytest.mark.slow  # builds a virtualenv and serves the pack over gRPC as Pulumi does

PACK = ROOT / "policy-pack"


@pytest.fixture(scope="module")
def pack() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpucluster_policy_pack", PACK / "__main__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not as __main__: builds nothing, serves nothing
    return module


def test_the_pack_builds_one_mandatory_policy_per_rule(pack: ModuleType):
    policies = pack.policies()
    assert [p.name for p in policies] == [rule.name for rule in RULES]
    for policy, rule in zip(policies, RULES, strict=True):
        assert policy.enforcement_level is EnforcementLevel.MANDATORY
        assert policy.description == rule.description
        assert isinstance(policy, StackValidationPolicy if rule.stack else ResourceValidationPolicy)


def test_the_pack_project_file_and_requirements_pin_what_the_tests_run():
    import yaml

    project = yaml.safe_load((PACK / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python" and project["runtime"]["options"]["virtualenv"] == "venv"
    pins = dict(line.split("==") for line in (PACK / "requirements.txt").read_text().splitlines() if "==" in line)
    from importlib.metadata import version

    assert pins == {name: version(name) for name in ("pulumi", "pulumi-policy", "PyYAML")}
    assert f"pulumi-policy=={pins['pulumi-policy']}" in (ROOT / "requirements-dev.txt").read_text()


def _opts(protect: bool) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def _props(values: dict[str, Any]) -> Any:
    """Properties as pulumi-policy hands them to a policy: deserialized, behind the unknown-checking proxy."""
    return unknown_checking_proxy(deserialize_properties(values))


def _run_pack(pack: ModuleType, doc: dict[str, Any]) -> set[tuple[str, str]]:
    """Every (urn, message) the pack's policies report for a plan, through their validate callbacks."""
    reported: set[tuple[str, str]] = set()

    def report(message: str, urn: str | None = None) -> None:
        reported.add((urn or "", message))

    stack = [
        PolicyResource(
            r["type"], _props({**r["inputs"], "id": r["id"]}), r["urn"], r["name"], _opts(r["protect"]), None, None, [], {}
        )
        for r in doc["resources"]
    ]
    for policy in pack.policies():
        if isinstance(policy, StackValidationPolicy):
            policy.validate(StackValidationArgs(stack), report)
            continue
        for r in doc["resources"]:
            args = ResourceValidationArgs(r["type"], _props(r["inputs"]), r["urn"], r["name"], _opts(r["protect"]), None)
            policy.validate(args, report)
    return reported


def _expected(doc: dict[str, Any]) -> set[tuple[str, str]]:
    # Pulumi tells a policy pack `protect` but not `retainOnDelete`: the pack checks what it is told.
    resources = [dataclasses.replace(r, retain_on_delete=None) for r in from_plan(doc)]
    return {(v.urn, f"{v.property}: {v.message}. Fix: {v.fix}") for v in evaluate(resources)}


@pytest.mark.parametrize("rule", sorted(FIXTURES))
def test_each_policy_calls_its_rule_on_the_failing_fixture(pack: ModuleType, rule: str):
    doc, _ = FIXTURES[rule]
    reported = _run_pack(pack, doc)
    assert reported == _expected(doc)
    assert reported  # the fixture fails in the pack too


def test_the_pack_passes_a_shipped_stack(pack: ModuleType):
    doc = json.loads((ROOT / "tests" / "golden" / "plans" / "slurm-p5.json").read_text())
    doc["resources"] = [r for r in doc["resources"] if r["custom"]]
    assert _run_pack(pack, doc) == set()


def test_unknowns_in_a_preview_are_not_violations(pack: ModuleType):
    """A launch template whose user data is not known yet, and a flow log whose VPC id is not known but
    whose property dependency names its VPC: nothing to report, and no policy aborted."""
    doc = plan(
        lt("lt", userData=UNKNOWN_STRING_VALUE, metadataOptions={"httpTokens": UNKNOWN_STRING_VALUE}),
        res(t.VPC, "logged", {"cidrBlock": "10.0.0.0/16"}),
        res(t.FLOW_LOG, "flow", {"vpcId": UNKNOWN_STRING_VALUE}),
        res(t.VPC, "dark", {"cidrBlock": "10.1.0.0/16"}),
    )
    reported: list[tuple[str, str | None]] = []
    (lt_policy_args,) = [r for r in doc["resources"] if r["name"] == "lt"]
    for policy in pack.policies():
        if isinstance(policy, ResourceValidationPolicy):
            args = ResourceValidationArgs(t.LAUNCH_TEMPLATE, _props(lt_policy_args["inputs"]), "urn:lt", "lt", _opts(False), None)
            policy.validate(args, lambda m, u=None: reported.append((m, u)))
    assert reported == []

    resources = {
        r["name"]: PolicyResource(r["type"], _props(r["inputs"]), r["urn"], r["name"], _opts(False), None, None, [], {})
        for r in doc["resources"]
    }
    resources["flow"].property_dependencies["vpcId"] = [resources["logged"]]
    (flow_logs,) = [p for p in pack.policies() if p.name == "vpc-flow-logs"]
    flow_logs.validate(StackValidationArgs(list(resources.values())), lambda m, u=None: reported.append((m, u)))
    assert [u for _, u in reported] == [resources["dark"].urn]


# --- the pack as the Pulumi engine runs it ---------------------------------------------------------------


@pytest.fixture(scope="module")
def pack_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A virtualenv like the one Pulumi builds in policy-pack/venv: third-party packages but no gpucluster
    (this run's site-packages as a plain path entry, so the editable install's finder is not loaded),
    and a working directory outside the checkout. The pack must find the rules in its own checkout."""
    home = tmp_path_factory.mktemp("pack-venv")
    venv.EnvBuilder(with_pip=False).create(home / "venv")
    python = home / "venv" / "bin" / "python"
    probe = [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    purelib = Path(subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    scratch = home / "elsewhere"
    scratch.mkdir()
    lost = subprocess.run([str(python), "-c", "import gpucluster"], cwd=scratch, capture_output=True, text=True)
    assert lost.returncode != 0, "the pack's environment must not have gpucluster installed"
    return python, scratch


def test_the_pack_needs_only_what_its_requirements_install(pack_env: tuple[Path, Path]):
    """Loaded in an environment without gpucluster, the pack takes the rules from its checkout and
    imports no distribution beyond policy-pack/requirements.txt and what those pull in."""
    python, scratch = pack_env
    probe = (
        "import json, runpy, sys, importlib.metadata as md\n"
        "before = set(sys.modules)\n"
        f"pack = runpy.run_path({str(PACK / '__main__.py')!r}, run_name='probe')\n"
        "names = [p.name for p in pack['policies']()]\n"
        "top = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "dists = md.packages_distributions()\n"
        "print(json.dumps({'names': names, 'rules_from': sys.modules['gpucluster.policy'].__file__,"
        " 'ours': sorted(m for m in sys.modules if m.split('.')[0] == 'gpucluster'),"
        " 'dists': sorted({d for t in top - {'gpucluster'} for d in dists.get(t, [])})}))\n"
    )
    result = subprocess.run([str(python), "-c", probe], cwd=scratch, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["names"] == [rule.name for rule in RULES]
    assert seen["rules_from"] == str(ROOT / "gpucluster" / "policy" / "__init__.py")
    # Of gpucluster, only the policy room (stdlib + PyYAML) and the settings hatch's key list (stdlib, in facts,
    # an empty package) are loaded: no Pulumi provider, no config model.
    others = {m for m in seen["ours"] if m != "gpucluster" and m.split(".")[1] != "policy"}
    assert others == {"gpucluster.facts", "gpucluster.facts.slurm_settings"}
    pins = [line.split("==")[0] for line in (PACK / "requirements.txt").read_text().splitlines() if "==" in line]
    assert set(seen["dists"]) <= _closure(pins), sorted(set(seen["dists"]) - _closure(pins))


def _closure(names: list[str]) -> set[str]:
    """The distributions ``names`` install, with everything they require (as installed here)."""
    import re
    from importlib.metadata import PackageNotFoundError, distribution

    out: set[str] = set()
    todo = list(names)
    while todo:
        try:
            dist = distribution(todo.pop())
        except PackageNotFoundError:
            continue
        if dist.metadata["Name"] in out:
            continue
        out.add(dist.metadata["Name"])
        todo += [re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0] for req in dist.requires or [] if "extra ==" not in req]
    return out


@pytest.fixture(scope="module")
def served(pack_env: tuple[Path, Path]) -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """The pack started as Pulumi starts a Python policy pack (``python -m pulumi.policy <engine>
    <pack dir>``, in the pack's own environment), which prints the port of its Analyzer service."""
    python, scratch = pack_env
    process = subprocess.Popen(
        [str(python), "-m", "pulumi.policy", "127.0.0.1:1", str(PACK)],
        cwd=scratch,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        assert port.isdigit(), process.stderr.read() if process.stderr else port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        process.kill()
        process.communicate(timeout=30)


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    json_format.ParseDict(values, out)
    return out


def test_the_served_pack_describes_its_policies(served: analyzer_pb2_grpc.AnalyzerStub):
    info = served.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "gpucluster"
    assert [p.name for p in info.policies] == [rule.name for rule in RULES]
    assert {p.enforcementLevel for p in info.policies} == {analyzer_pb2.MANDATORY}


@pytest.mark.parametrize("rule", sorted(FIXTURES))
def test_the_served_pack_reports_what_the_rules_find(served: analyzer_pb2_grpc.AnalyzerStub, rule: str):
    doc, _ = FIXTURES[rule]
    reported: set[tuple[str, str, str]] = set()
    for r in doc["resources"]:
        request = analyzer_pb2.AnalyzeRequest(
            type=r["type"],
            properties=_struct(r["inputs"]),
            urn=r["urn"],
            name=r["name"],
            options=analyzer_pb2.AnalyzerResourceOptions(protect=r["protect"]),
        )
        response = served.Analyze(request)
        assert {d.enforcementLevel for d in response.diagnostics} <= {analyzer_pb2.MANDATORY}
        reported |= {(d.policyName, d.urn, d.message) for d in response.diagnostics}
    stack = analyzer_pb2.AnalyzeStackRequest(
        resources=[
            analyzer_pb2.AnalyzerResource(
                type=r["type"],
                properties=_struct({**r["inputs"], "id": r["id"]}),
                urn=r["urn"],
                name=r["name"],
                options=analyzer_pb2.AnalyzerResourceOptions(protect=r["protect"]),
            )
            for r in doc["resources"]
        ]
    )
    reported |= {(d.policyName, d.urn, d.message) for d in served.AnalyzeStack(stack).diagnostics}
    # pulumi-policy puts the policy's description on the first line of every diagnostic.
    described = {rule.name: rule.description for rule in RULES}
    resources = [dataclasses.replace(r, retain_on_delete=None) for r in from_plan(doc)]  # not told to a pack
    expected = {(v.rule, v.urn, f"{described[v.rule]}\n{v.property}: {v.message}. Fix: {v.fix}") for v in evaluate(resources)}
    assert reported == expected and reported
