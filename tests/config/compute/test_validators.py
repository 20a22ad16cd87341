"""The pure validators, table-tested: each row is a config change and the finding it must produce."""

from __future__ import annotations

import pytest

from gpucluster.config.checks.cluster import validate_cluster
from gpucluster.config.errors import Level
from gpucluster.facts.regions import zone_in_region
from tests.conftest import assert_finding, group, make_config, parse_spec

RESERVATION = {"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0"}
BLOCK = {"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"}
BYO = {"vpcId": "vpc-0abc1234", "subnets": [{"id": "subnet-0aaa1111", "availabilityZone": "us-east-1a"}]}


parse = parse_spec


# (id, config, level, path, expected_message, expected code)
CASES = [
    (
        "unknown-type",
        make_config(group(instanceType="p5.48xl")),
        Level.ERROR,
        "gpucluster:nodeGroups[0].instanceType",
        "instance type 'p5.48xl' is not in the instance catalog",
        "unknown-instance-type",
    ),
    (
        "cpu-type-warns",
        make_config(group(instanceType="m7i.2xlarge")),
        Level.WARNING,
        "gpucluster:nodeGroups[0].instanceType",
        "instance type 'm7i.2xlarge' has no GPU or Neuron accelerator",
        "no-accelerator",
    ),
    (
        "efa-unsupported",
        make_config(group(instanceType="g5.xlarge", enableEfaSupport=True)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].enableEfaSupport",
        "EFA is enabled but g5.xlarge does not support EFA",
        "efa-unsupported",
    ),
    (
        "efa-multi-az",
        make_config(group(availabilityZones=["us-east-1a", "us-east-1c"])),
        Level.ERROR,
        "gpucluster:nodeGroups[0].availabilityZones",
        "an EFA node group must stay in one Availability Zone, but it spans ['us-east-1a', 'us-east-1c']: EFA traffic does not cross zones",
        "efa-multi-az",
    ),
    (
        "pg-capacity-block",
        make_config(group(createPlacementGroup=True, capacity=BLOCK)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].createPlacementGroup",
        "a placement group cannot be used with a capacity block: EC2 places the block's instances itself",
        "placement-group-capacity-block",
    ),
    (
        "existing-pg-capacity-block",
        make_config(group(placementGroupName="mine", capacity=BLOCK)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].placementGroupName",
        "a placement group cannot be used with a capacity block: EC2 places the block's instances itself",
        "placement-group-capacity-block",
    ),
    (
        "pg-capacity-reservation",
        make_config(group(createPlacementGroup=True, capacity=RESERVATION)),
        Level.WARNING,
        "gpucluster:nodeGroups[0].createPlacementGroup",
        "a placement group can stop a capacity reservation from delivering all its instances (only reserved capacity inside the group can be used)",
        "placement-group-capacity-reservation",
    ),
    (
        "max-above-reservation",
        make_config(group(maxSize=17, capacity={**RESERVATION, "instanceCount": 16})),
        Level.ERROR,
        "gpucluster:nodeGroups[0].maxSize",
        "maxSize 17 is above the 16 instances cr-0123456789abcdef0 holds; launches beyond it fail",
        "max-size-above-reservation",
    ),
    (
        "reservation-multi-az",
        make_config(group(enableEfaSupport=False, availabilityZones=["us-east-1a", "us-east-1b"], capacity=RESERVATION)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].availabilityZones",
        "a capacity-reservation lives in one Availability Zone, but the group spans ['us-east-1a', 'us-east-1b']",
        "reservation-multi-az",
    ),
    (
        "public-ip-multi-card",
        make_config(group(associatePublicIpAddress=True)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].associatePublicIpAddress",
        "p5.48xlarge has 32 network cards; EC2 cannot auto-assign a public IP to an instance with several network interfaces",
        "public-ip-multi-card",
    ),
    (
        "public-ip-private-subnet",
        make_config(group(instanceType="g6e.xlarge", associatePublicIpAddress=True)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].associatePublicIpAddress",
        "nodes of a gpucluster VPC live in private subnets, where a public IP is unreachable",
        "public-ip-private-subnet",
    ),
    (
        "min-max",
        make_config(group(minSize=3, maxSize=2)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].minSize",
        "minSize 3 is greater than maxSize 2",
        "sizes",
    ),
    (
        "desired-below-min",
        make_config(group(minSize=2, desiredSize=1, maxSize=4)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].desiredSize",
        "desiredSize 1 is outside minSize 2 .. maxSize 4",
        "sizes",
    ),
    (
        "zone-region",
        make_config(group(availabilityZones=["eu-west-1a"])),
        Level.ERROR,
        "gpucluster:nodeGroups[0].availabilityZones",
        "zone 'eu-west-1a' is not in region us-east-1",
        "zone-region",
    ),
    (
        "subnet-exhaustion",
        make_config(group(efaLayout="legacy", maxSize=256)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].maxSize",
        "256 nodes × 32 IP addresses each (legacy layout) = 8192 addresses, more than a /19 subnet's 8187",
        "subnet-exhaustion",
    ),
    (
        "capacity-block-unsupported",
        make_config(group(instanceType="g6e.48xlarge", capacity=BLOCK)),
        Level.ERROR,
        "gpucluster:nodeGroups[0].capacity.type",
        "g6e.48xlarge is not sold as a capacity block",
        "capacity-block-unsupported",
    ),
    (
        "too-many-tags",
        make_config(group(tags={f"k{i}": "v" for i in range(30)}), tags={f"c{i}": "v" for i in range(20)}),
        Level.ERROR,
        "gpucluster:nodeGroups[0].tags",
        "this group's resources would carry 54 tags; AWS allows 50",
        "too-many-tags",
    ),
    (
        "network-zone-region",
        make_config(network={"availabilityZones": ["us-west-2b"]}),
        Level.ERROR,
        "gpucluster:network.availabilityZones",
        "zone 'us-west-2b' is not in region us-east-1",
        "zone-region",
    ),
    (
        "scheduler-missing",
        make_config(group(scheduler="slurm")),
        Level.ERROR,
        "gpucluster:nodeGroups[0].scheduler",
        "the group asks for slurm, but the cluster configures no slurm (gpucluster:slurm)",
        "scheduler-missing",
    ),
    (
        "vpc-too-small",
        make_config(network={"vpcCidr": "10.0.0.0/24"}),
        Level.ERROR,
        "gpucluster:network.vpcCidr",
        "subnets of /19 and /24 cannot be carved from 10.0.0.0/24",
        "vpc-too-small",
    ),
    (
        "flow-log-retention-not-cloudwatch",
        make_config(network={"flowLogs": {"retentionDays": 100}}),
        Level.ERROR,
        "gpucluster:network.flowLogs.retentionDays",
        "retentionDays 100 is not a retention period CloudWatch Logs accepts",
        "flow-log-retention",
    ),
    (
        "flow-logs-off-new-vpc",
        make_config(network={"flowLogs": {"enabled": False}}),
        Level.WARNING,
        "gpucluster:network.flowLogs.enabled",
        "flow logs are off for the new VPC: none of its traffic is recorded (Security Hub EC2.6 flags the VPC)",
        "flow-logs-off",
    ),
    (
        "flow-log-own-vpc",
        make_config(group(subnetIds=None), network=BYO),
        Level.INFO,
        "gpucluster:network.flowLogs.enabled",
        "a flow log is created for your VPC vpc-0abc1234: it records all of that VPC's traffic, not only the cluster's",
        "flow-log-own-vpc",
    ),
]


@pytest.mark.parametrize(
    ("config", "level", "path", "expected_message", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_validator_finding(catalog, config, level, path, expected_message, code):
    assert_finding(validate_cluster(parse(config), catalog), level, path, expected_message, code)


def test_valid_configs_have_no_errors(catalog):
    for config in (
        make_config(group()),
        make_config(group(instanceType="g6e.xlarge", availabilityZones=["us-east-1a", "us-east-1b"])),
        make_config(group(capacity={**RESERVATION, "instanceCount": 2})),
        make_config(group(capacity=BLOCK)),
        make_config(group(instanceType="trn1.32xlarge", capacity={"type": "spot", "spotMaxPrice": 12.5})),
    ):
        errors = [f for f in validate_cluster(parse(config), catalog) if f.level is Level.ERROR]
        assert errors == [], errors


@pytest.mark.parametrize(
    ("zone", "region", "ok"),
    [
        ("us-east-1a", "us-east-1", True),
        ("us-east-1-bos-1a", "us-east-1", True),
        ("us-east-11a", "us-east-1", False),
        ("us-east-2a", "us-east-1", False),
        ("us-east-1", "us-east-1", False),
    ],
)
def test_zone_in_region(zone, region, ok):
    assert zone_in_region(zone, region) is ok


def test_flow_log_retention_fix_names_the_nearest_periods(catalog):
    (finding,) = [
        f
        for f in validate_cluster(parse(make_config(network={"flowLogs": {"retentionDays": 100}})), catalog)
        if f.code == "flow-log-retention"
    ]
    assert finding.fix.startswith("use 90 or 120 (CloudWatch takes 1, 3, 5,") and "destination: s3" in finding.fix
    (above_all,) = [
        f
        for f in validate_cluster(parse(make_config(network={"flowLogs": {"retentionDays": 4000}})), catalog)
        if f.code == "flow-log-retention"
    ]
    assert above_all.fix.startswith("use 3653 (")


@pytest.mark.parametrize(
    "flow_logs",
    [
        {"retentionDays": 400},
        {"destination": "s3", "retentionDays": 100},  # any number of days: a bucket lifecycle rule
        {"enabled": False, "retentionDays": 100},  # off: nothing to keep
    ],
)
def test_flow_log_settings_without_findings(catalog, flow_logs):
    findings = validate_cluster(parse(make_config(network={"flowLogs": flow_logs})), catalog)
    assert [f for f in findings if f.code == "flow-log-retention"] == []
