"""LustreStorage from Args: plain dicts, Outputs of other resources, the stack's defaults, errors by field."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pytest

from gpucluster.components.storage.lustre_storage import LustreStorage, LustreStorageArgs, from_args
from gpucluster.load import load_spec
from tests.conftest import make_config

FS = "aws:fsx/lustreFileSystem:LustreFileSystem"
WIRING: LustreStorageArgs = {
    "cluster_name": "c",
    "vpc_id": "vpc-0abc1234",
    "subnet_id": "subnet-0aaa1111",
    "client_security_group_id": "sg-0efa0000000000001",
}
WORKLOAD = {
    "datasetSizeTib": 5,
    "readMbPerSecondPerGpu": 50,
    "checkpointSizeGib": 100,
    "checkpointWriteSeconds": 60,
    "gpuCount": 16,
}


def stack_lustre(lustre: dict, **storage):
    spec = load_spec(make_config(storage={"lustre": lustre, **storage}), stack="c").spec
    assert spec.storage is not None and spec.storage.lustre is not None
    return spec.storage.lustre


def standalone(args: LustreStorageArgs):
    return from_args({**WIRING, **args}).resolved  # type: ignore[typeddict-item]


@pytest.mark.parametrize("deployment", ["PERSISTENT_2", "SCRATCH_2"])
def test_standalone_gets_the_stacks_backup_default(deployment):
    ours = standalone(
        {
            "deployment_type": deployment,
            "storage_capacity_gib": 1200,
            "throughput_per_unit_storage": 200 if deployment == "SCRATCH_2" else 125,
        }
    )
    theirs = stack_lustre(
        {
            "deploymentType": deployment,
            "storageCapacityGib": 1200,
            "throughputPerUnitStorage": 200 if deployment == "SCRATCH_2" else 125,
        }
    )
    assert ours.automatic_backup_retention_days == theirs.automatic_backup_retention_days
    assert ours.automatic_backup_retention_days == (7 if deployment == "PERSISTENT_2" else 0)
    fields = set(type(ours).model_fields) - {"node_groups", "availability_zone"}  # placed by the stack only
    assert {f: getattr(ours, f) for f in fields} == {f: getattr(theirs, f) for f in fields}


def test_standalone_sizing_matches_the_stacks():
    ours = from_args(
        {
            **WIRING,
            "workload": {
                "dataset_size_tib": 5,
                "read_mb_per_second_per_gpu": 50,
                "checkpoint_size_gib": 100,
                "checkpoint_write_seconds": 60,
                "gpu_count": 16,
            },
        },
    ).resolved
    theirs = stack_lustre({}, workload=WORKLOAD)
    got = (ours.throughput_per_unit_storage, ours.storage_capacity_gib, ours.metadata_iops)
    assert got == (theirs.throughput_per_unit_storage, theirs.storage_capacity_gib, theirs.metadata_iops)
    assert ours.storage_capacity_gib is not None


def test_created_file_system_keeps_seven_days_of_backups(run_components):
    plan = run_components(
        lambda: LustreStorage("l", {**WIRING, "storage_capacity_gib": 1200, "throughput_per_unit_storage": 125})
    )
    assert plan.of_type(FS)[0].inputs["automaticBackupRetentionDays"] == 7


def test_kms_key_and_ids_from_other_resources(run_components):
    def program():
        vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
        subnet = aws.ec2.Subnet("sn", vpc_id=vpc.id, cidr_block="10.0.0.0/19", availability_zone="us-east-1a")
        sg = aws.ec2.SecurityGroup("clients", vpc_id=vpc.id)
        key = aws.kms.Key("mine")
        LustreStorage(
            "l",
            {
                "cluster_name": "c",
                "vpc_id": vpc.id,
                "subnet_id": subnet.id,
                "client_security_group_id": sg.id,
                "kms_key_id": key.arn,
                "storage_capacity_gib": 1200,
                "throughput_per_unit_storage": 125,
            },
        )

    plan = run_components(program)
    fs = plan.of_type(FS)[0]
    assert fs.inputs["kmsKeyId"] == plan.by_name("mine").state["arn"]  # the key's ARN, not a stand-in
    assert fs.inputs["subnetIds"] == plan.by_name("sn").id
    assert [k.name for k in plan.of_type("aws:kms/key:Key")] == ["mine"]  # no key of its own


def test_existing_file_system_id_as_an_output(run_components):
    seen = {}

    def program():
        fs_id = pulumi.Output.from_input("fs-0123456789abcdef0")
        fs = LustreStorage("l", {"cluster_name": "c", "vpc_id": "vpc-0abc1234", "file_system_id": fs_id})
        fs.dns_name.apply(lambda d: seen.update(dns=d))

    plan = run_components(program)
    assert plan.of_type("aws:kms/key:Key") == [] and plan.of_type("aws:ec2/securityGroup:SecurityGroup") == []
    assert seen["dns"] == "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"


SIZED: LustreStorageArgs = {"storage_capacity_gib": 1200, "throughput_per_unit_storage": 125}


def test_root_squash_is_on_by_default_and_admin_hosts_keep_root(run_components):
    """A new file system squashes root (nobody:nogroup); the admin hosts a program names, as Outputs
    of its own resources, and noSquashClients are its no-squash clients, each once."""

    def program():
        vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
        subnet = aws.ec2.Subnet("sn", vpc_id=vpc.id, cidr_block="10.0.0.0/19")
        admin = aws.ec2.NetworkInterface("admin", subnet_id=subnet.id)
        LustreStorage(
            "l",
            {
                **WIRING,
                **SIZED,
                "no_squash_clients": ["10.0.[2-3].[1-255]@tcp", "10.0.9.9@tcp"],
                "admin_host_ips": [admin.private_ip, "10.0.9.9"],
            },
        )

    plan = run_components(program)
    squash = plan.of_type(FS)[0].inputs["rootSquashConfiguration"]
    admin_ip = plan.by_name("admin").state["privateIp"]
    assert squash == {
        "rootSquash": "65534:65534",
        "noSquashNids": ["10.0.[2-3].[1-255]@tcp", "10.0.9.9@tcp", f"{admin_ip}@tcp"],
    }


def test_the_loud_opt_out_turns_root_squash_off_explicitly(run_components):
    """A file system that squashed before stops squashing (0:0 sent), rather than keeping a setting the program no
    longer states; the policy rule still reports it."""
    from gpucluster.policy.evaluate import evaluate, from_plan
    from gpucluster.tools.plan.run.json import to_json

    plan = run_components(lambda: LustreStorage("l", {**WIRING, **SIZED, "unsafe_disable_root_squash": True}))
    assert plan.of_type(FS)[0].inputs["rootSquashConfiguration"] == {"rootSquash": "0:0", "noSquashNids": []}
    found = [v for v in evaluate(from_plan(to_json(plan))) if v.rule == "lustre-root-squash"]
    assert [v.property for v in found] == ["rootSquashConfiguration.rootSquash"] and "'0:0'" in found[0].message
