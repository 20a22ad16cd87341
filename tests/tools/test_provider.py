"""The component provider other languages use: its schema, its gRPC server, construction from camelCase.

``pulumi package add`` cannot run here (no CLI), so these tests do what it does: start the provider the
way ``PulumiPlugin.yaml`` says, ask it for its schema and version over gRPC, and construct components
from the camelCase inputs a TypeScript or YAML program sends.
"""

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import grpc
import pulumi
import pytest
import yaml
from pulumi.provider.experimental import component as pulumi_component
from pulumi.provider.experimental.analyzer import Analyzer, DuplicateTypeError, InvalidMapKeyError
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from gpucluster.components._shared.build import part
from gpucluster.components.gpu_cluster import TOKEN as CLUSTER_TOKEN
from gpucluster.components.gpu_cluster import GpuCluster, build_gpu_cluster
from gpucluster.load import load_spec
from gpucluster.tools.provider import NAME, PUBLIC_COMPONENTS, ComponentProvider, package_version
from gpucluster.tools.provider.docstrings import InheritingAnalyzer, install, typed_dict_bases
from tests.conftest import GOLDEN, ROOT, check_golden

ANALYZABLE = list(PUBLIC_COMPONENTS)  # every public component: the analyzer must read each one
SCHEMA_GOLDEN = GOLDEN / "provider" / "schema.json"
ANY = "pulumi.json#/Any"

CAMEL_INPUTS: dict[str, dict[str, Any]] = {
    # What a TypeScript program passes: the stack file's keys, camelCase at every depth.
    "GpuCluster": {
        "name": "tc",
        "region": "us-east-1",
        "nodeGroups": [{"name": "gpu", "instanceType": "p5.48xlarge", "availabilityZones": ["us-east-1a"], "maxSize": 2}],
        "storage": {"lustre": {"storageCapacityGib": 2400, "throughputPerUnitStorage": 250}},
        "tags": {"team": "ml"},
    },
    "Network": {
        "clusterName": "tc",
        "availabilityZones": ["us-east-1a", "us-east-1b"],
        "interfaceEndpoints": ["ssm"],
        "flowLogs": {"destination": "s3", "retentionDays": 30},
        "tags": {"team": "ml"},
    },
    "GpuNodeGroup": {
        "clusterName": "tc",
        "name": "gpu",
        "instanceType": "p5.48xlarge",
        "availabilityZones": ["us-east-1a"],
        "maxSize": 2,
        "subnetIds": ["subnet-0aaa1111"],
        "securityGroupIds": ["sg-0efa0000000000001"],
        "capacity": {"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0"},
    },
    "LustreStorage": {
        "clusterName": "tc",
        "vpcId": "vpc-0abc1234",
        "subnetId": "subnet-0aaa1111",
        "clientSecurityGroupId": "sg-0node000000000001",
        "storageCapacityGib": 2400,
        "throughputPerUnitStorage": 250,
        "bucketName": "tc-data-bucket",
        "dataRepositories": [{"fileSystemPath": "/datasets", "bucketPrefix": "datasets/"}],
    },
    "DataBucket": {"clusterName": "tc", "noncurrentVersionDays": 14, "tags": {"team": "ml"}},
    "SlurmCluster": {
        "clusterName": "tc",
        "region": "us-east-1",
        "vpcId": "vpc-0123456789abcdef0",
        "subnets": [{"id": "subnet-0aaa1111", "availabilityZone": "us-east-1a"}],
        "securityGroupIds": ["sg-0123456789abcdef0"],
        "computeNodeGroups": [
            {
                "name": "p5",
                "instanceType": "p5.48xlarge",
                "availabilityZones": ["us-east-1a"],
                "maxSize": 2,
                "capacity": {"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0"},
            }
        ],
        "headNode": {"instanceType": "m7i.2xlarge"},
        "lustre": {"dnsName": "fs-0123.fsx.us-east-1.amazonaws.com", "mountName": "abcdefgh"},
        "tags": {"team": "ml"},
    },
    "EksCluster": {
        "clusterName": "tc",
        "region": "us-east-1",
        "clusterSubnetIds": ["subnet-0aaa1111", "subnet-0bbb2222"],
        "accessEntries": [{"principalArn": "arn:aws:iam::123456789012:role/admins", "policies": ["AmazonEKSClusterAdminPolicy"]}],
        "nodeGroups": [
            {
                "name": "gpu",
                "instanceType": "p5.48xlarge",
                "availabilityZones": ["us-east-1a"],
                "maxSize": 2,
                "subnetIds": ["subnet-0aaa1111"],
            }
        ],
        "securityGroupIds": ["sg-0123456789abcdef0"],
        "sharedStorage": [
            {
                "name": "fsx",
                "fsType": "lustre",
                "mountPoint": "/fsx",
                "mountOptions": "noatime,flock",
                "server": "fs-0123.fsx.us-east-1.amazonaws.com",
                "mountName": "abcdefgh",
                "fileSystemId": "fs-0123456789abcdef0",
                "efaEnabled": False,
            }
        ],
        "tags": {"team": "ml"},
    },
    "KubernetesPlatform": {
        "clusterName": "tc",
        "platform": "eks",
        "nodeGroups": [{"name": "gpu", "instanceType": "p5.48xlarge", "availabilityZones": ["us-east-1a"], "maxSize": 2}],
        "teams": [{"name": "research", "gpuQuota": {"h100": 16}, "groups": ["research"]}],
        "sharedStorage": [
            {
                "name": "fsx",
                "fsType": "lustre",
                "mountPoint": "/fsx",
                "mountOptions": "noatime,flock",
                "server": "fs-0123.fsx.us-east-1.amazonaws.com",
                "mountName": "abcdefgh",
                "efaEnabled": False,
            }
        ],
    },
}

MAIN_RESOURCES: dict[str, set[str]] = {
    # What each component built from CAMEL_INPUTS must contain: the camelCase inputs reached its resources.
    "Network": {
        "aws:ec2/vpc:Vpc",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/securityGroup:SecurityGroup",
        "aws:ec2/vpcEndpoint:VpcEndpoint",
    },
    "GpuNodeGroup": {"aws:ec2/launchTemplate:LaunchTemplate", "aws:autoscaling/group:Group"},
    "LustreStorage": {"aws:fsx/lustreFileSystem:LustreFileSystem", "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"},
    "DataBucket": {"aws:s3/bucket:Bucket", "aws:kms/key:Key"},
    "SlurmCluster": {"aws:ec2/instance:Instance", "aws:ec2/launchTemplate:LaunchTemplate", "aws:route53/record:Record"},
    "EksCluster": {"aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:kms/key:Key", "pulumi:providers:kubernetes"},
    "KubernetesPlatform": {
        "kubernetes:helm.sh/v3:Release",
        "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:PersistentVolumeClaim",
    },
}


def per_component() -> list[Any]:
    """PUBLIC_COMPONENTS as parameters."""
    return [pytest.param(c, id=c.__name__) for c in PUBLIC_COMPONENTS]


def schema_of(components: list[type[pulumi.ComponentResource]]) -> dict[str, Any]:
    return json.loads(ComponentProvider(components, NAME, version=package_version()).schema)


# --- (a) the provider as pulumi package add starts it --------------------------------------------------


def start(command: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start a provider process with a fake engine address; its first stdout line is its port."""
    process = subprocess.Popen(
        [*command, "127.0.0.1:1"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    port = process.stdout.readline().strip()
    if not port.isdigit():
        process.kill()
        _, err = process.communicate(timeout=30)
        raise AssertionError(f"the provider printed {port!r}, not a port:\n{err[-3000:]}")
    return process, port


def ask(port: str) -> tuple[dict[str, Any], str]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        schema = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60)
        info = stub.GetPluginInfo(_empty(), timeout=60)
    return json.loads(schema.schema), info.version


def _empty() -> Any:
    from google.protobuf import empty_pb2

    return empty_pb2.Empty()


@pytest.mark.slow  # starts the provider, a gRPC server process
def test_the_provider_serves_its_schema_and_version_over_grpc():
    # The analyzable components through the provider's own main(), in a process of its own.
    names = [c.__name__ for c in ANALYZABLE]
    script = (
        "from gpucluster.tools.provider import PUBLIC_COMPONENTS, main; "
        f"main([c for c in PUBLIC_COMPONENTS if c.__name__ in {names!r}])"
    )
    process, port = start([sys.executable, "-c", script])
    try:
        schema, version = ask(port)
    finally:
        process.kill()
        process.communicate(timeout=30)
    assert version == package_version() == schema["version"]
    assert schema["name"] == NAME
    assert schema == schema_of(ANALYZABLE)


@pytest.mark.slow  # starts the provider, a gRPC server process
def test_pulumi_plugin_yaml_starts_the_provider_with_every_public_component():
    plugin = yaml.safe_load((ROOT / "PulumiPlugin.yaml").read_text())
    assert plugin["runtime"]["name"] == "python"
    # The language host runs `python <root>/<main>`: the root's own __main__.py is the stack program.
    main = ROOT / plugin["main"]
    assert (main / "__main__.py").is_file()
    process, port = start([sys.executable, str(main)])
    try:
        schema, version = ask(port)
    finally:
        process.kill()
        process.communicate(timeout=30)
    assert version == package_version()
    assert {f"{NAME}:index:{c.__name__}" for c in PUBLIC_COMPONENTS} == set(schema["resources"])


# --- (b) the schema: pinned, described, typed -------------------------------------------------------------


def test_schema_golden(update_golden):
    schema = schema_of(ANALYZABLE)
    schema["version"] = "<package version>"  # a release does not change the golden
    check_golden(SCHEMA_GOLDEN, json.dumps(schema, indent=2, sort_keys=True) + "\n", update_golden)


@pytest.mark.parametrize("component", per_component())
def test_component_is_in_the_schema(component):
    schema = schema_of([component])
    resource = schema["resources"][f"{NAME}:index:{component.__name__}"]
    assert resource["isComponent"] is True
    assert resource.get("description")


def properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, property) for every input and output property of the components and their types."""
    out = []
    for token, resource in schema["resources"].items():
        for kind in ("inputProperties", "properties"):
            out += [(f"{token}.{kind}.{n}", p) for n, p in resource.get(kind, {}).items()]
    for token, typ in schema["types"].items():
        out += [(f"{token}.{n}", p) for n, p in typ.get("properties", {}).items()]
    return out


@pytest.mark.parametrize("component", per_component())
def test_every_property_is_described_and_typed(component):
    props = properties(schema_of([component]))
    assert props
    undescribed = [where for where, p in props if not (p.get("description") or "").strip()]
    assert not undescribed, f"no description (a docstring under the field): {undescribed}"
    text = json.dumps(schema_of([component]))
    assert ANY not in text, "an Any where a type was meant: annotate the field with its real type"


# --- (c) construction from camelCase inputs, as another language sends them -------------------------------


@pytest.mark.parametrize("component", per_component())
def test_construct_from_camel_case_inputs(run_components, component):
    provider = ComponentProvider([component], NAME, version=package_version())
    inputs = CAMEL_INPUTS.get(component.__name__)
    assert inputs is not None, f"add a camelCase example for {component.__name__} to CAMEL_INPUTS"
    built: dict[str, Any] = {}

    def program():
        result = provider.construct("tc", f"{NAME}:index:{component.__name__}", dict(inputs), None)
        built["urn"] = result.urn

    plan = run_components(program)
    roots = [r for r in plan.resources if r.type == f"{NAME}:index:{component.__name__}"]
    assert len(roots) == 1
    assert plan.resources, "the component created nothing"
    assert MAIN_RESOURCES.get(component.__name__, set()) <= {r.type for r in plan.resources}


def test_nested_camel_case_inputs_reach_the_resources(run_components):
    # camelCase at every depth: a nested key (capacity.reservationId, dataRepositories[].bucketPrefix) that the
    # provider failed to map back to snake_case would be dropped or refused, not placed.
    def build(component: type[pulumi.ComponentResource]) -> Any:
        provider = ComponentProvider([component], NAME, version=package_version())
        token = f"{NAME}:index:{component.__name__}"
        return run_components(lambda: provider.construct("tc", token, dict(CAMEL_INPUTS[component.__name__]), None))

    from gpucluster.components.compute.gpu_node_group import GpuNodeGroup
    from gpucluster.components.network.network import Network
    from gpucluster.components.storage.data_bucket import DataBucket
    from gpucluster.components.storage.lustre_storage import LustreStorage

    template = build(GpuNodeGroup).of_type("aws:ec2/launchTemplate:LaunchTemplate")[0].inputs
    target = template["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == "cr-0123456789abcdef0"
    association = build(LustreStorage).of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")[0]
    assert association.inputs["dataRepositoryPath"] == "s3://tc-data-bucket/datasets/"
    lifecycle = build(DataBucket).of_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")[0]
    assert {r["id"]: r for r in lifecycle.inputs["rules"]}["expire-old-versions"]["noncurrentVersionExpiration"] == {
        "noncurrentDays": 14
    }
    network = build(Network)
    assert sorted(s.inputs["availabilityZone"] for s in network.of_type("aws:ec2/subnet:Subnet")) == [
        "us-east-1a",
        "us-east-1a",
        "us-east-1b",
        "us-east-1b",
    ]  # a private and a public subnet per zone
    assert network.of_type("aws:ec2/flowLog:FlowLog")[0].inputs["logDestinationType"] == "s3"


MAIN_OUTPUTS: dict[str, set[str]] = {
    # Outputs the state of each component built from CAMEL_INPUTS must carry (what another language reads).
    "SlurmCluster": {"headInstanceId", "controllerAddress", "mungeSecretArn", "launchTemplateIds", "headUserData"},
    "EksCluster": {"clusterName", "endpoint", "kubeconfig", "nodeRoleArn", "provider"},
    "KubernetesPlatform": {"teamNamespaces"},
}


@pytest.mark.parametrize("name", sorted(MAIN_OUTPUTS))
def test_camel_case_construction_carries_outputs_and_nested_inputs(run_components, name):
    component = next(c for c in PUBLIC_COMPONENTS if c.__name__ == name)
    provider = ComponentProvider([component], NAME, version=package_version())
    built: dict[str, Any] = {}

    def program():
        built["result"] = provider.construct("tc", f"{NAME}:index:{name}", dict(CAMEL_INPUTS[name]), None)

    plan = run_components(program)
    assert MAIN_OUTPUTS[name] <= set(built["result"].state)
    if name == "SlurmCluster":  # a nested camelCase reference field reached the launch template
        template = next(r for r in plan.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate")
        target = template.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
        assert target["capacityReservationId"] == "cr-0123456789abcdef0"
    if name == "EksCluster":  # the sharedStorage dict became a Lustre file system: the FSx CSI driver add-on
        assert "aws-fsx-csi-driver" in {r.inputs.get("addonName") for r in plan.resources if r.type == "aws:eks/addon:Addon"}
    if name == "KubernetesPlatform":  # ... and a claim in the team's namespace
        assert plan.by_name("tc-team-research-fsx-pvc")


@pytest.mark.slow  # constructs the whole GpuCluster and plans the stack to compare
def test_gpu_cluster_from_camel_case_is_the_stacks_cluster(run_components):
    # The same settings as a stack file and as Args from another language: the same resources and inputs.
    args = CAMEL_INPUTS["GpuCluster"]
    provider = ComponentProvider([GpuCluster], NAME, version=package_version())
    from_args = run_components(lambda: provider.construct("tc", f"{NAME}:index:GpuCluster", dict(args), None))
    config = {f"gpucluster:{k}": v for k, v in args.items() if k != "region"} | {"aws:region": args["region"]}
    spec = load_spec(config, stack="tc").cluster
    from_stack = run_components(lambda: build_gpu_cluster(part(CLUSTER_TOKEN, "tc"), "tc", spec))

    def shape(plan: Any) -> list[tuple[str, str, str]]:
        return sorted((r.type, r.name, json.dumps(r.inputs, sort_keys=True, default=str)) for r in plan.resources)

    assert shape(from_args) == shape(from_stack)
    types = {r.type for r in from_args.resources}
    assert {"aws:ec2/vpc:Vpc", "aws:ec2/launchTemplate:LaunchTemplate", "aws:autoscaling/group:Group"} <= types
    assert "aws:fsx/lustreFileSystem:LustreFileSystem" in types  # the storage section made it through
    assert from_args.by_name("tc-gpu-lt").inputs["tagSpecifications"][0]["tags"]["team"] == "ml"


# --- (d) what the analyzer refuses: so CI catches an Args change that would break pulumi package add ------


class _UnionArgs(TypedDict, total=False):
    size: int | str
    """A size."""


class _UnionComponent(pulumi.ComponentResource):
    def __init__(self, name: str, args: _UnionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("t:index:U", name, None, opts)


class _IntKeyArgs(TypedDict, total=False):
    sizes: dict[int, str]
    """Sizes."""


class _IntKeyComponent(pulumi.ComponentResource):
    def __init__(self, name: str, args: _IntKeyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("t:index:K", name, None, opts)


class Settings(TypedDict, total=False):
    size: int
    """A size."""


class _OtherSettings(TypedDict, total=False):
    depth: int
    """A depth."""


_OtherSettings.__name__ = "Settings"  # the same type name, as if defined in another module
_OtherSettings.__module__ = "tests.tools.elsewhere"


class _FirstArgs(TypedDict, total=False):
    settings: Settings
    """Settings."""


class _SecondArgs(TypedDict, total=False):
    settings: _OtherSettings
    """Other settings."""


class _First(pulumi.ComponentResource):
    def __init__(self, name: str, args: _FirstArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("t:index:F", name, None, opts)


class _Second(pulumi.ComponentResource):
    def __init__(self, name: str, args: _SecondArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("t:index:S", name, None, opts)


def test_the_analyzer_refuses_a_union():
    with pytest.raises(Exception, match="Union types are not supported"):
        ComponentProvider([_UnionComponent], "t")


def test_the_analyzer_refuses_a_non_string_map_key():
    with pytest.raises(InvalidMapKeyError):
        ComponentProvider([_IntKeyComponent], "t")


def test_the_analyzer_refuses_duplicate_type_names():
    with pytest.raises(DuplicateTypeError):
        ComponentProvider([_First, _Second], "t")


# --- (e) descriptions of inherited Args fields: our analyzer, installed where pulumi looks it up ----------


class _BaseSettings(TypedDict, total=False):
    depth: int
    """How deep, from the base."""


class _MiddleSettings(_BaseSettings, total=False):
    width: int
    """How wide, from the middle."""


class _LeafArgs(_MiddleSettings, total=False):
    name: str
    """The leaf's own field."""


def test_the_provider_module_installs_its_analyzer_where_pulumi_looks_it_up():
    # ComponentProvider (and component_provider_host, which builds one) looks `Analyzer` up in this module when
    # it analyzes; a pulumi upgrade that moves that lookup must fail here, not silently drop descriptions.
    assert pulumi_component.Analyzer is InheritingAnalyzer
    assert issubclass(InheritingAnalyzer, Analyzer)
    assert "Analyzer(" in inspect.getsource(pulumi_component.ComponentProvider.__init__)
    assert ComponentProvider is pulumi_component.ComponentProvider


def test_install_refuses_a_lookup_point_it_does_not_know(monkeypatch):
    monkeypatch.setattr(pulumi_component, "Analyzer", object)
    with pytest.raises(RuntimeError, match="no longer looks up Analyzer"):
        install()


def test_inherited_fields_get_the_description_of_the_base_that_declares_them():
    assert typed_dict_bases(_LeafArgs) == [_MiddleSettings]
    assert typed_dict_bases(_BaseSettings) == []
    analyzer = InheritingAnalyzer("t")
    assert analyzer.get_docstring(_LeafArgs, "name") == "The leaf's own field."
    assert analyzer.get_docstring(_LeafArgs, "width") == "How wide, from the middle."
    assert analyzer.get_docstring(_LeafArgs, "depth") == "How deep, from the base."  # two levels up
    assert analyzer.get_docstring(_LeafArgs, "missing") is None
    assert Analyzer("t").get_docstring(_LeafArgs, "depth") is None  # upstream alone: why the subclass exists


def test_a_component_schema_describes_the_config_fields_its_args_inherit():
    from gpucluster.components.network.network import Network

    inputs = schema_of([Network])["resources"][f"{NAME}:index:Network"]["inputProperties"]
    assert inputs["vpcCidr"]["description"].startswith("CIDR of a new VPC.")  # from NetworkConfig
    assert inputs["clusterName"]["description"].startswith("Cluster name")  # NetworkArgs' own
