"""The Slurm validators, table-tested: each row is a config and the finding it must produce; and the
resolution of the Slurm section (partitions, default partition, head node zone, images)."""

from __future__ import annotations

import pytest

from gpucluster.config.checks.cluster import validate_cluster
from gpucluster.config.errors import Level
from gpucluster.config.slurm import image_release
from gpucluster.load import load_spec
from tests.conftest import assert_finding, group, make_config
from tests.conftest import parse_spec as parse

CPU = {"name": "cpu", "instanceType": "g6e.xlarge", "availabilityZones": ["us-east-1a"], "minSize": 1, "maxSize": 2}
STATIC_CPU = {"nodeGroups": [{"name": "cpu", "mode": "static"}]}
BYO = {"vpcId": "vpc-0abc12345", "subnets": [{"id": "subnet-0aaa1111", "availabilityZone": "us-east-1a"}]}


def slurm(*groups, network=None, tags=None, **section):
    keys = {"slurm": section}
    if network is not None:
        keys["network"] = network
    if tags is not None:
        keys["tags"] = tags
    return make_config(*(groups or (group(),)), **keys)


# (id, config, level, path, expected_message, code)
CASES = [
    (
        "no-slurm-groups",
        slurm(group(scheduler="none")),
        Level.ERROR,
        "gpucluster:slurm",
        "the Slurm section has no node group to run: no node group has scheduler slurm",
        "no-slurm-groups",
    ),
    (
        "entry-names-unknown-group",
        slurm(nodeGroups=[{"name": "gpus"}]),
        Level.ERROR,
        "gpucluster:slurm.nodeGroups[0].name",
        "no node group is named 'gpus'",
        "slurm-group-unknown",
    ),
    (
        "entry-names-non-slurm-group",
        slurm(group(), group(name="plain", scheduler="none"), nodeGroups=[{"name": "plain"}]),
        Level.ERROR,
        "gpucluster:slurm.nodeGroups[0].name",
        "node group 'plain' is not run by Slurm",
        "slurm-group-not-slurm",
    ),
    (
        "partition-twice",
        slurm(group(), CPU, nodeGroups=[{"name": "cpu", "partition": "gpu", "mode": "static"}]),
        Level.ERROR,
        "gpucluster:slurm.nodeGroups[0].partition",
        "node groups 'gpu' and 'cpu' both use partition 'gpu'",
        "partition-twice",
    ),
    (
        "partition-reserved",
        slurm(nodeGroups=[{"name": "gpu", "partition": "Default"}]),
        Level.ERROR,
        "gpucluster:slurm.nodeGroups[0].partition",
        "partition name 'Default' is reserved: PartitionName=DEFAULT sets defaults for every partition",
        "partition-reserved",
    ),
    (
        "two-defaults",
        slurm(group(), CPU, nodeGroups=[{"name": "gpu", "default": True}, {"name": "cpu", "default": True, "mode": "static"}]),
        Level.ERROR,
        "gpucluster:slurm.nodeGroups",
        "2 partitions are marked default (gpu, cpu); Slurm has one default partition",
        "default-partition-twice",
    ),
    (
        "dynamic-with-min-size",
        slurm(group(minSize=1)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].minSize",
        "'gpu' is a dynamic Slurm group: its nodes are launched when jobs need them, so minSize 1 would never be used",
        "dynamic-min-size",
    ),
    (
        "dynamic-with-desired-size",
        slurm(group(desiredSize=2)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].desiredSize",
        "'gpu' is a dynamic Slurm group: its nodes are launched when jobs need them, so desiredSize 2 would never be used",
        "dynamic-min-size",
    ),
    (
        "empty-group",
        slurm(group(maxSize=0)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].maxSize",
        "Slurm node group 'gpu' has maxSize 0: its partition would have no nodes",
        "slurm-group-empty",
    ),
    (
        "jammy-image",
        slurm(
            group(imageSsmParameter="/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id")
        ),
        Level.ERROR,
        "gpucluster:nodeGroups[0].imageSsmParameter",
        "the image is Ubuntu 22.04, whose slurm-wlm cannot talk to the head node's Slurm 23.11 (Ubuntu 24.04)",
        "slurm-image-release",
    ),
    (
        "custom-image",
        slurm(group(imageId="ami-0123456789abcdef0")),
        Level.WARNING,
        "gpucluster:nodeGroups[0].imageId",
        "gpucluster cannot tell which Slurm the custom image ami-0123456789abcdef0 installs; nodes run slurmd from "
        "their Ubuntu archive and must be Ubuntu 24.04 (Slurm 23.11)",
        "slurm-custom-image",
    ),
    (
        "cluster-tag-with-slash",
        slurm(tags={"team/name": "ml"}),
        Level.ERROR,
        "gpucluster:tags",
        "tag key 'team/name' contains '/': Slurm nodes read their tags from instance metadata, which does not allow such keys",
        "slurm-tag-slash",
    ),
    (
        "group-tag-with-slash",
        slurm(group(tags={"kubernetes.io/role": "x"})),
        Level.ERROR,
        "gpucluster:nodeGroups[0].tags",
        "tag key 'kubernetes.io/role' contains '/': Slurm nodes read their tags from instance metadata, which does not "
        "allow such keys",
        "slurm-tag-slash",
    ),
    (
        "head-type-unknown",
        slurm(headNode={"instanceType": "m7i.xlarg"}),
        Level.ERROR,
        "gpucluster:slurm.headNode.instanceType",
        "instance type 'm7i.xlarg' is not in the instance catalog",
        "unknown-instance-type",
    ),
    (
        "head-type-gpu",
        slurm(headNode={"instanceType": "g6e.xlarge"}),
        Level.WARNING,
        "gpucluster:slurm.headNode.instanceType",
        "the head node runs slurmctld and the agent only, but g6e.xlarge has 1 L40S accelerators",
        "head-node-accelerated",
    ),
    (
        "head-zone-other-region",
        slurm(headNode={"availabilityZone": "us-west-2a"}),
        Level.ERROR,
        "gpucluster:slurm.headNode.availabilityZone",
        "zone 'us-west-2a' is not in region us-east-1",
        "zone-region",
    ),
    (
        "head-subnet-without-vpc",
        slurm(headNode={"subnetId": "subnet-0aaa1111"}),
        Level.ERROR,
        "gpucluster:slurm.headNode.subnetId",
        "subnetId is only used with your own VPC (network.vpcId); gpucluster creates the subnets of a new VPC",
        "subnets-without-vpc",
    ),
    (
        "head-subnet-unknown",
        slurm(network=BYO, headNode={"subnetId": "subnet-0bbb2222"}),
        Level.ERROR,
        "gpucluster:slurm.headNode.subnetId",
        "subnet subnet-0bbb2222 is not listed in network.subnets",
        "subnet-unknown",
    ),
    (
        "head-zone-without-subnet",
        slurm(network=BYO, headNode={"availabilityZone": "us-east-1b"}),
        Level.ERROR,
        "gpucluster:slurm.headNode.availabilityZone",
        "no subnet of network.subnets is in us-east-1b, the head node's zone",
        "zone-without-subnet",
    ),
    (
        "no-nat",
        slurm(network={"enableNatGateway": False}),
        Level.ERROR,
        "gpucluster:network.enableNatGateway",
        "the Slurm head node and compute nodes install slurm-wlm and munge from the Ubuntu archive at first boot, "
        "which a VPC without NAT cannot reach",
        "slurm-needs-internet",
    ),
    (
        "resume-timeout-short",
        slurm(powerSaving={"resumeTimeoutSeconds": 300}),
        Level.WARNING,
        "gpucluster:slurm.powerSaving.resumeTimeoutSeconds",
        "ResumeTimeout 300 s: accelerated instances take minutes to launch, boot, install slurmd and mount file systems, "
        "and Slurm fails nodes that take longer",
        "resume-timeout-short",
    ),
]


@pytest.mark.parametrize(
    ("config", "level", "path", "expected_message", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_slurm_finding(catalog, config, level, path, expected_message, code):
    assert_finding(validate_cluster(parse(config), catalog), level, path, expected_message, code)


def test_a_good_slurm_config_has_no_findings(catalog):
    config = slurm(
        group(maxSize=16),
        CPU,
        nodeGroups=[{"name": "cpu", "mode": "static", "features": ["login"]}],
        accounting={},
        headNode={"instanceType": "m7i.2xlarge"},
    )
    config["gpucluster:monitoring"] = {"alarmEmails": ["oncall@example.com"]}  # somebody receives the alerts
    assert validate_cluster(parse(config), catalog) == []


def test_no_slurm_section_no_slurm_findings(catalog):
    findings = validate_cluster(parse(make_config(group(tags={"a/b": "c"}))), catalog)
    assert not [f for f in findings if "slurm" in f.code or f.path.startswith("gpucluster:slurm")]


def test_resolution_fills_partitions_default_zone_and_images():
    spec = load_spec(
        slurm(group(name="p5-a"), {**CPU, "availabilityZones": ["us-east-1b"]}, nodeGroups=[{"name": "cpu", "mode": "static"}]),
        stack="s",
    ).spec
    assert spec.slurm is not None
    entries = {e.name: (e.partition, e.default, e.mode) for e in spec.slurm.node_groups}
    assert entries == {"p5-a": ("p5-a", True, "dynamic"), "cpu": ("cpu", False, "static")}
    assert spec.slurm.head_node.availability_zone == "us-east-1a"  # the first Slurm group's zone
    assert spec.slurm.protect_data is True
    for g in spec.node_groups:
        assert g.scheduler == "slurm"
        assert image_release(g.image_ssm_parameter) == "24.04"  # the head node's release: one Slurm version


def test_an_explicit_default_partition_wins_and_byo_head_subnet_is_chosen():
    spec = load_spec(
        slurm(
            group(subnetIds=["subnet-0aaa1111"]),
            {**CPU, "subnetIds": ["subnet-0aaa1111"]},
            network=BYO,
            nodeGroups=[{"name": "cpu", "mode": "static", "default": True, "partition": "login"}],
        ),
        stack="s",
    ).spec
    assert spec.slurm is not None
    assert [(e.name, e.partition, e.default) for e in spec.slurm.node_groups] == [("gpu", "gpu", False), ("cpu", "login", True)]
    assert spec.slurm.head_node.subnet_id == "subnet-0aaa1111"


@pytest.mark.parametrize(
    ("parameter", "release"),
    [
        ("/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id", "24.04"),
        ("/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id", "22.04"),
        ("/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id", "24.04"),
        ("/my/own/ami", None),
        (None, None),
    ],
)
def test_image_release(parameter, release):
    assert image_release(parameter) == release
