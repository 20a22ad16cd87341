"""Preflight against moto's server (a real HTTP AWS API on 127.0.0.1).

moto does not implement DescribeCapacityReservations or Service Quotas; those answers are injected
with a botocore ``before-call`` hook that returns a canned response for that one operation — every
other call goes to moto over HTTP.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.tools.preflight import Clients, preflight, quota_family
from tests.conftest import ROOT, group, make_config

CATALOG = load_catalog()
NOW = datetime.now(timezone.utc)


def inject(client: Any, operation: str, parsed: dict[str, Any], status: int = 200) -> None:
    """Answer ``operation`` on ``client`` with ``parsed`` instead of calling the endpoint."""

    def handler(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse("http://injected", status, {}, None), parsed

    client.meta.events.register(f"before-call.{client.meta.service_model.service_id.hyphenize()}.{operation}", handler)


def reservation(**fields: Any) -> dict[str, Any]:
    base = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "TotalInstanceCount": 16,
        "AvailableInstanceCount": 16,
        "State": "active",
        "InstanceMatchCriteria": "targeted",
        "ReservationType": "default",
        "EndDate": NOW + timedelta(days=30),
    }
    return {**base, **fields}


def quota(code: str, value: float) -> dict[str, Any]:
    return {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": "Running On-Demand P instances", "Value": value}}


@pytest.fixture
def aws(moto_endpoint, aws_env):
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"))
    return Clients.create("us-east-1", moto_endpoint)


def codes(findings):
    return [f.code for f in findings]


def test_offered_type_reserved_capacity_and_quota_pass(aws):
    spec = load_spec(
        make_config(
            group(
                maxSize=16,
                capacity={"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0", "instanceCount": 16},
            )
        ),
        stack="s",
    ).spec
    inject(aws.ec2, "DescribeCapacityReservations", {"CapacityReservations": [reservation()]})
    inject(aws.quotas, "GetServiceQuota", quota("L-417A185B", 4000))
    assert [f for f in preflight(spec, CATALOG, aws) if f.level.value == "error"] == []


def test_type_not_offered_in_zone(aws):
    spec = load_spec(make_config(group(instanceType="g6e.xlarge", availabilityZones=["us-east-1f"])), stack="s").spec
    inject(aws.quotas, "GetServiceQuota", quota("L-DB2E81BA", 100))
    findings = preflight(spec, CATALOG, aws)
    f = next(f for f in findings if f.code == "type-not-offered")
    assert f.path == "gpucluster:nodeGroups[0].availabilityZones" and "g6e.xlarge is not offered in us-east-1f" in f.message
    assert "us-east-1a" in f.fix  # where it is offered (moto's offering data)


@pytest.mark.parametrize(
    ("fields", "code", "fragment"),
    [
        ({"InstanceType": "p4d.24xlarge"}, "reservation-type", "reserves p4d.24xlarge, not p5.48xlarge"),
        ({"AvailabilityZone": "us-east-1b"}, "reservation-zone", "is in us-east-1b"),
        ({"TotalInstanceCount": 8, "AvailableInstanceCount": 8}, "max-size-above-reservation", "above the 8 instances"),
        ({"State": "expired"}, "reservation-state", "is expired"),
        ({"EndDate": NOW - timedelta(days=1)}, "reservation-ended", "ended at"),
        ({"ReservationType": "capacity-block"}, "reservation-kind", "is a capacity block"),
        ({"AvailableInstanceCount": 4}, "reservation-full", "has 4 free instances; the group wants 16"),
    ],
)
def test_reservation_checks(aws, fields, code, fragment):
    spec = load_spec(
        make_config(
            group(minSize=16, maxSize=16, capacity={"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0"})
        ),
        stack="s",
    ).spec
    inject(aws.ec2, "DescribeCapacityReservations", {"CapacityReservations": [reservation(**fields)]})
    inject(aws.quotas, "GetServiceQuota", quota("L-417A185B", 4000))
    found = [f for f in preflight(spec, CATALOG, aws) if f.code == code]
    assert found and fragment in found[0].message


def test_unknown_reservation(aws):
    spec = load_spec(
        make_config(group(capacity={"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"})), stack="s"
    ).spec
    inject(
        aws.ec2,
        "DescribeCapacityReservations",
        {"Error": {"Code": "InvalidCapacityReservationId.NotFound", "Message": "not found"}},
        status=400,
    )
    f = next(f for f in preflight(spec, CATALOG, aws) if f.code == "reservation-missing")
    assert "InvalidCapacityReservationId.NotFound" in f.message and f.path.endswith("capacity.reservationId")


def test_quota_too_low(aws):
    spec = load_spec(make_config(group(maxSize=32)), stack="s").spec
    inject(aws.quotas, "GetServiceQuota", quota("L-417A185B", 1536))
    f = next(f for f in preflight(spec, CATALOG, aws) if f.code == "quota")
    assert "need 6,144 vCPUs at maximum size" in f.message and "(L-417A185B) is 1,536" in f.message


def test_spot_and_capacity_block_quotas():
    assert quota_family("p5.48xlarge") == "p" and quota_family("g6e.xlarge") == "g"
    assert quota_family("trn1.32xlarge") == "trn" and quota_family("m7i.2xlarge") == "standard"


def test_byo_subnets_checked_against_ec2(aws):
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=aws.ec2.meta.endpoint_url)
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    other = ec2.create_vpc(CidrBlock="10.2.0.0/16")["Vpc"]["VpcId"]
    a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    b = ec2.create_subnet(VpcId=other, CidrBlock="10.2.0.0/20", AvailabilityZone="us-east-1b")["Subnet"]["SubnetId"]
    network = {
        "vpcId": vpc,
        "subnets": [{"id": a, "availabilityZone": "us-east-1c"}, {"id": b, "availabilityZone": "us-east-1b"}],
    }
    spec = load_spec(make_config(group(availabilityZones=["us-east-1c"]), network=network), stack="s").spec
    inject(aws.quotas, "GetServiceQuota", quota("L-417A185B", 4000))
    findings = preflight(spec, CATALOG, aws)
    zone = next(f for f in findings if f.code == "subnet-zone")
    assert zone.path == "gpucluster:network.subnets[0].availabilityZone" and "is in us-east-1a, not us-east-1c" in zone.message
    assert any(f.code == "subnet-vpc" and b in f.message for f in findings)


def test_existing_file_system(aws):
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=aws.ec2.meta.endpoint_url)
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/20", AvailabilityZone="us-east-1b")["Subnet"]["SubnetId"]
    fs = aws.fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[subnet],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
    )
    fs_id = fs["FileSystem"]["FileSystemId"]
    spec = load_spec(make_config(group(), storage={"lustre": {"fileSystemId": fs_id}}), stack="s").spec
    inject(aws.quotas, "GetServiceQuota", quota("L-417A185B", 4000))
    f = next(f for f in preflight(spec, CATALOG, aws) if f.code == "file-system-zone")
    assert f"{fs_id} is in us-east-1b, but EFA node group 'gpu' is in us-east-1a" in f.message


def test_cli_preflight_against_moto(aws, moto_endpoint):
    result = subprocess.run(
        [sys.executable, "-m", "gpucluster.tools.cli", "preflight", "--stack", "dev", "--endpoint-url", moto_endpoint],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # dev: g6e.xlarge in us-east-1a is offered; Service Quotas is not in moto, so the quota is a warning
    assert result.returncode == 0, result.stdout + result.stderr
    assert "could not read quota L-DB2E81BA" in result.stdout


def test_an_unsupported_call_is_a_finding_and_the_other_checks_go_on(aws):
    """EC2 answers DescribeInstanceTypeOfferings with UnsupportedOperation: preflight reports "could not
    check …" for that check and still runs the reservation and quota checks."""
    spec = load_spec(
        make_config(group(maxSize=32, capacity={"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0"})),
        stack="s",
    ).spec
    inject(
        aws.ec2,
        "DescribeInstanceTypeOfferings",
        {
            "Error": {
                "Code": "UnsupportedOperation",
                "Message": "The functionality you requested is not available in this region.",
            }
        },
        status=400,
    )
    inject(aws.ec2, "DescribeCapacityReservations", {"CapacityReservations": [reservation(InstanceType="p4d.24xlarge")]})
    inject(aws.quotas, "GetServiceQuota", quota("L-417A185B", 1536))
    findings = preflight(spec, CATALOG, aws)
    failed = [f for f in findings if f.code == "check-failed"]
    assert [(f.level.value, f.path, f.message) for f in failed] == [
        (
            "warning",
            "gpucluster:nodeGroups",
            "could not check instance type offerings per zone: UnsupportedOperation: "
            "The functionality you requested is not available in this region.",
        )
    ]
    assert failed[0].fix
    assert {"reservation-type", "quota"} <= set(codes(findings))  # the later checks still ran


def test_an_endpoint_that_is_not_there_is_a_finding_per_check(aws_env):
    """Nothing listens at the endpoint: every check reports why it could not check, none raises."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from botocore.config import Config

    clients = Clients.create("us-east-1", f"http://127.0.0.1:{port}")
    no_retry = Config(retries={"max_attempts": 1}, connect_timeout=1)
    clients = Clients(
        ec2=boto3.client("ec2", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{port}", config=no_retry),
        fsx=clients.fsx,
        quotas=boto3.client("service-quotas", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{port}", config=no_retry),
    )
    spec = load_spec(make_config(group()), stack="s").spec
    findings = preflight(spec, CATALOG, clients)
    assert [f.code for f in findings] == ["check-failed", "check-failed"]  # offerings and quotas; the rest have nothing to check
    assert all("EndpointConnectionError" in f.message or "Could not connect" in f.message for f in findings), findings
