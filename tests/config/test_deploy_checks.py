"""Values AWS or Kubernetes would refuse only at deploy time, caught at load: each row is a config and
the exact finding it must produce (validators in gpucluster/config/checks/deploy.py and the add-on pins)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import botocore
import pytest

from gpucluster.config.checks.cluster import validate_cluster
from gpucluster.config.checks.deploy import check_capacity_block_start, parse_time
from gpucluster.config.errors import Level
from gpucluster.config.kubernetes import ADDON_PINS, SUPPORTED_EKS_VERSIONS, KubernetesSpec, minor_tuple, pinned_addon_version
from gpucluster.facts.regions import REGIONS_FILE, aws_partition_of
from tests.conftest import assert_finding, group, make_config, parse_spec

KEY_UUID = "1234abcd-12ab-34cd-56ef-1234567890ab"
KEY_ARN = f"arn:aws:kms:us-east-1:111122223333:key/{KEY_UUID}"
BLOCK = {"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"}
TWO_ZONES = {"availabilityZones": ["us-east-1a", "us-east-1b"]}
WORKLOAD = {"datasetSizeTib": 10, "readMbPerSecondPerGpu": 50, "checkpointSizeGib": 100, "checkpointWriteSeconds": 60}


def k8s(**section):
    return make_config(group(), network=TWO_ZONES, kubernetes=section)


# (id, config, level, path, expected_message, code)
CASES = [
    (
        "unknown-region",
        make_config(group(availabilityZones=["us-moon-1a"]), region="us-moon-1"),
        Level.ERROR,
        "aws:region",
        "region 'us-moon-1' is not an AWS region (aws, aws-cn or aws-us-gov partition)",
        "unknown-region",
    ),
    (
        "lustre-zone-region",
        make_config(group(), storage={"lustre": {"storageCapacityGib": 1200, "availabilityZone": "us-west-2a"}}),
        Level.ERROR,
        "gpucluster:storage.lustre.availabilityZone",
        "zone 'us-west-2a' is not in region us-east-1",
        "zone-region",
    ),
    (
        "tag-shell-chars",
        make_config(group(), tags={"team": "a;$(id)"}),
        Level.ERROR,
        "gpucluster:tags",
        "tag value 'a;$(id)' contains ';', '$', '(', ')', which AWS services other than EC2 refuse in tags",
        "tag-characters",
    ),
    (
        "tag-newline-in-key",
        make_config(group(tags={"cost\ncenter": "x"})),
        Level.ERROR,
        "gpucluster:nodeGroups[0].tags",
        "tag key 'cost\\ncenter' contains '\\n', which AWS services other than EC2 refuse in tags",
        "tag-characters",
    ),
    (
        "tag-aws-prefix",
        make_config(group(), tags={"AWS:team": "x"}),
        Level.ERROR,
        "gpucluster:tags",
        "tag key 'AWS:team' uses the reserved 'aws:' prefix",
        "tag-aws-prefix",
    ),
    (
        "tag-reserved-key",
        make_config(group(), tags={"Name": "mine"}),
        Level.ERROR,
        "gpucluster:tags",
        "tag key 'Name' is one gpucluster sets itself (it names and finds resources by it)",
        "tag-reserved",
    ),
    (
        "tag-key-too-long",
        make_config(group(), tags={"k" * 129: "x"}),
        Level.ERROR,
        "gpucluster:tags",
        f"tag key {'k' * 129!r} has 129 characters; AWS allows 1-128",
        "tag-key-length",
    ),
    (
        "tag-value-too-long",
        make_config(group(tags={"team": "v" * 257})),
        Level.ERROR,
        "gpucluster:nodeGroups[0].tags",
        "tag 'team' has a value of 257 characters; AWS allows 256",
        "tag-value-length",
    ),
    (
        "group-kms-garbage",
        make_config(group(kmsKeyId="my key")),
        Level.ERROR,
        "gpucluster:nodeGroups[0].kmsKeyId",
        "'my key' is not a key ARN, key id, alias/<name> or alias ARN, which the launch template's EBS volume needs",
        "kms-key-syntax",
    ),
    (
        "group-kms-other-region",
        make_config(group(kmsKeyId=KEY_ARN.replace("us-east-1", "eu-west-1"))),
        Level.ERROR,
        "gpucluster:nodeGroups[0].kmsKeyId",
        f"KMS key {KEY_ARN.replace('us-east-1', 'eu-west-1')!r} is in eu-west-1, but the cluster is in us-east-1; "
        "the launch template's EBS volume uses keys of its own region only",
        "kms-key-region",
    ),
    (
        "lustre-kms-alias",
        make_config(group(), storage={"lustre": {"storageCapacityGib": 1200, "kmsKeyId": "alias/fsx"}}),
        Level.ERROR,
        "gpucluster:storage.lustre.kmsKeyId",
        "'alias/fsx' is not a key ARN, which FSx for Lustre needs",
        "kms-key-syntax",
    ),
    (
        "head-kms-alias-arn",
        make_config(group(), slurm={"headNode": {"kmsKeyId": "arn:aws:kms:us-east-1:111122223333:alias/ebs"}}),
        Level.ERROR,
        "gpucluster:slurm.headNode.kmsKeyId",
        "'arn:aws:kms:us-east-1:111122223333:alias/ebs' is an alias ARN; EBS (head node volumes) needs the key's own ARN",
        "kms-key-syntax",
    ),
    (
        "secrets-kms-partition",
        k8s(secretsKmsKeyArn=KEY_ARN.replace("arn:aws:", "arn:aws-cn:")),
        Level.ERROR,
        "gpucluster:kubernetes.secretsKmsKeyArn",
        f"KMS key {KEY_ARN.replace('arn:aws:', 'arn:aws-cn:')!r} is in partition aws-cn, but us-east-1 is in aws",
        "kms-key-region",
    ),
    (
        "key-name-non-ascii",
        make_config(group(keyName="clé")),
        Level.ERROR,
        "gpucluster:nodeGroups[0].keyName",
        "key pair name 'clé' is not 1-255 printable ASCII characters, as EC2 requires",
        "key-name",
    ),
    (
        "ssm-parameter-injection",
        make_config(group(imageSsmParameter="/aws/service/x; rm -rf /")),
        Level.ERROR,
        "gpucluster:nodeGroups[0].imageSsmParameter",
        "'/aws/service/x; rm -rf /' is not an SSM parameter name: letters, digits, '_', '.', '-', levels separated by "
        "'/' and starting with '/', at most 15 levels and 1011 characters",
        "ssm-parameter-name",
    ),
    (
        "duplicate-group",
        make_config(group(), group(instanceType="p4d.24xlarge")),
        Level.ERROR,
        "gpucluster:nodeGroups[1].name",
        "node group name 'gpu' is already used by entry [0]; node group names must be unique",
        "duplicate-name",
    ),
    (
        "duplicate-team",
        k8s(teams=[{"name": "a"}, {"name": "b"}, {"name": "a"}]),
        Level.ERROR,
        "gpucluster:kubernetes.teams[2].name",
        "team name 'a' is already used by entry [0]; team names must be unique",
        "duplicate-name",
    ),
    (
        "duplicate-slurm-entry",
        make_config(group(), slurm={"nodeGroups": [{"name": "gpu"}, {"name": "gpu"}]}),
        Level.ERROR,
        "gpucluster:slurm.nodeGroups[1].name",
        "Slurm node group setting name 'gpu' is already used by entry [0]; Slurm node group setting names must be unique",
        "duplicate-name",
    ),
    (
        "zero-read",
        make_config(group(), storage={"workload": {**WORKLOAD, "readMbPerSecondPerGpu": 0}, "lustre": {}}),
        Level.ERROR,
        "gpucluster:storage.workload.readMbPerSecondPerGpu",
        "readMbPerSecondPerGpu is 0, but the GPUs read the 10 TiB dataset while training: the file system would be "
        "sized as if nothing were read",
        "zero-read-throughput",
    ),
    (
        "block-not-started",
        make_config(group(minSize=2, capacity={**BLOCK, "startTime": "2099-01-01T11:30:00Z"})),
        Level.WARNING,
        "gpucluster:nodeGroups[0].capacity.startTime",
        "node group 'gpu' wants 2 nodes now, but its capacity block cr-0123456789abcdef0 starts 2099-01-01T11:30:00Z: "
        "every launch fails until then",
        "capacity-block-not-started",
    ),
    (
        "block-time-not-iso",
        make_config(group(capacity={**BLOCK, "endTime": "next tuesday"})),
        Level.ERROR,
        "gpucluster:nodeGroups[0].capacity.endTime",
        "endTime 'next tuesday' is not an ISO 8601 time",
        "capacity-block-time",
    ),
    (
        "vpc-cni-pin-for-older-kubernetes",
        k8s(version="1.34", addonVersions={"vpc-cni": "v1.20.1-eksbuild.3"}),
        Level.ERROR,
        "gpucluster:kubernetes.addonVersions.vpc-cni",
        "vpc-cni v1.20.1-eksbuild.3 is gpucluster's pin for Kubernetes 1.27–1.33, not for 1.34",
        "addon-version-range",
    ),
    (
        "coredns-pin-for-other-kubernetes",
        k8s(version="1.33", addonVersions={"coredns": "v1.11.4-eksbuild.22"}),
        Level.ERROR,
        "gpucluster:kubernetes.addonVersions.coredns",
        "coredns v1.11.4-eksbuild.22 is gpucluster's pin for Kubernetes 1.29–1.32, not for 1.33",
        "addon-version-range",
    ),
    (
        "unpinned-kubernetes-version",
        k8s(version="1.34"),
        Level.INFO,
        "gpucluster:kubernetes.addonVersions.vpc-cni",
        "gpucluster has no vpc-cni pin for Kubernetes 1.34; EKS installs its default vpc-cni for 1.34, which can "
        "change between deploys",
        "addon-unpinned",
    ),
]


@pytest.mark.parametrize(
    ("config", "level", "path", "expected_message", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_deploy_finding(catalog, config, level, path, expected_message, code):
    assert_finding(validate_cluster(parse_spec(config), catalog), level, path, expected_message, code)


# Values that AWS accepts must pass: no finding of these codes.
GOOD = [
    ("unicode-tags", make_config(group(tags={"équipe": "recherche ML", "cost-center": "a+b=c/d@e.f_g:h"}))),
    ("govcloud-region", make_config(group(availabilityZones=["us-gov-west-1a"]), region="us-gov-west-1")),
    ("china-region", make_config(group(availabilityZones=["cn-north-1a"]), region="cn-north-1")),
    ("group-kms-key-id", make_config(group(kmsKeyId=KEY_UUID))),
    ("group-kms-alias", make_config(group(kmsKeyId="alias/aws/ebs"))),
    ("group-kms-multi-region", make_config(group(kmsKeyId="mrk-" + "0" * 32))),
    ("lustre-kms-arn", make_config(group(), storage={"lustre": {"storageCapacityGib": 1200, "kmsKeyId": KEY_ARN}})),
    ("key-name", make_config(group(keyName="ops key (2024)"))),
    (
        "ssm-name",
        make_config(
            group(imageSsmParameter="/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id")
        ),
    ),
    ("block-started", make_config(group(minSize=2, capacity={**BLOCK, "startTime": "2020-01-01T00:00:00Z"}))),
    ("block-future-empty", make_config(group(capacity={**BLOCK, "startTime": "2099-01-01T00:00:00+02:00"}))),
    ("vpc-cni-pinned-133", k8s(version="1.33", addonVersions={"vpc-cni": "v1.20.1-eksbuild.3"})),
]
CODES = {c[-1] for c in CASES}


@pytest.mark.parametrize("config", [c[1] for c in GOOD], ids=[c[0] for c in GOOD])
def test_accepted_values_pass(catalog, config):
    found = [(f.code, f.path, f.message) for f in validate_cluster(parse_spec(config), catalog) if f.code in CODES]
    assert found == []


def test_region_table_matches_pinned_botocore():
    """data/regions.json is botocore's endpoints.json (the pinned version) for the three partitions."""
    table = json.loads(REGIONS_FILE.read_text())
    assert botocore.__version__ in table["Source"] and table["Retrieved"]
    endpoints = json.loads((Path(botocore.__file__).parent / "data" / "endpoints.json").read_text())
    upstream = {p["partition"]: sorted(p["regions"]) for p in endpoints["partitions"]}
    for partition, regions in table["Partitions"].items():
        assert sorted(regions) == upstream[partition], partition
    assert aws_partition_of("us-east-1") == "aws" and aws_partition_of("cn-northwest-1") == "aws-cn"
    assert aws_partition_of("us-gov-east-1") == "aws-us-gov" and aws_partition_of("us-moon-1") is None


@pytest.mark.parametrize("version", SUPPORTED_EKS_VERSIONS)
def test_every_supported_version_gets_a_compatible_pin(version):
    """A pinned add-on version is one whose range covers the cluster's Kubernetes version (or none: EKS's default)."""
    chosen = KubernetesSpec(version=version).addon_versions_for(lustre=True)

    def covers(low: str, high: str) -> bool:
        return (minor_tuple(low) or (0, 0)) <= (minor_tuple(version) or (0, 0)) <= (minor_tuple(high) or (0, 0))

    for addon, ranges in ADDON_PINS.items():
        pin = chosen[addon]
        if pin is None:
            assert not any(covers(lo, hi) for lo, hi, _ in ranges), (addon, version)
        else:
            assert any(v == pin and covers(lo, hi) for lo, hi, v in ranges), (addon, version, pin)
    assert chosen["vpc-cni"] == ("v1.20.1-eksbuild.3" if version != "1.34" else None)
    assert pinned_addon_version("vpc-cni", "1.34") is None


def test_capacity_block_warning_uses_the_clock(catalog):
    spec = parse_spec(make_config(group(desiredSize=1, maxSize=2, capacity={**BLOCK, "startTime": "2030-06-01T12:00:00"})))
    g = spec.node_groups[0]
    before = datetime(2030, 6, 1, 11, 59, tzinfo=timezone.utc)
    after = datetime(2030, 6, 1, 12, 1, tzinfo=timezone.utc)
    assert [f.code for f in check_capacity_block_start(0, g, None, spec, catalog, now=before)] == ["capacity-block-not-started"]
    assert list(check_capacity_block_start(0, g, None, spec, catalog, now=after)) == []
    assert parse_time("2030-06-01T12:00:00") == datetime(2030, 6, 1, 12, tzinfo=timezone.utc)


def test_config_text_for_numbers_and_switches_is_read():
    """The Pulumi CLI hands values over as text: "4" is the count 4 and "false" the switch false."""
    spec = parse_spec(make_config(group(maxSize="4", minSize="1", enableEfaSupport="false")))
    g = spec.node_groups[0]
    assert (g.max_size, g.min_size, g.enable_efa_support) == (4, 1, False)


def test_plan_clock_can_be_pinned(monkeypatch):
    from gpucluster.config.checks.deploy import utc_now

    monkeypatch.setenv("GPUCLUSTER_NOW", "2031-02-03T04:05:06Z")
    assert utc_now() == datetime(2031, 2, 3, 4, 5, 6, tzinfo=timezone.utc)
    monkeypatch.setenv("GPUCLUSTER_NOW", "")
    assert utc_now().year >= 2026
