"""plan diff carries a replacement to what depends on it, on a small program of plain pulumi-aws resources: a
subnet whose CIDR changes is replaced, and with it the file system in it (data loss, protected), the file
system's association, and the launch template that mounts it by DNS name (a new version); an input the program
ignores is not carried."""

from __future__ import annotations

import base64

import pulumi
import pulumi_aws as aws

from gpucluster.tools.plan.diff.changes import compare
from gpucluster.tools.plan.diff.json import to_json as diff_json
from gpucluster.tools.plan.diff.text import render
from gpucluster.tools.plan.run.engine import execute
from gpucluster.tools.plan.run.json import to_json


def _plan(cidr: str) -> dict:
    def program() -> None:
        vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
        subnet = aws.ec2.Subnet("a", vpc_id=vpc.id, cidr_block=cidr, availability_zone="us-east-1a")
        fs = aws.fsx.LustreFileSystem(
            "fs",
            subnet_ids=subnet.id,
            storage_capacity=1200,
            deployment_type="PERSISTENT_2",
            per_unit_storage_throughput=125,
            opts=pulumi.ResourceOptions(protect=True),
        )
        aws.fsx.DataRepositoryAssociation(
            "dra", file_system_id=fs.id, file_system_path="/data", data_repository_path="s3://bucket/data"
        )
        mount = fs.dns_name.apply(
            lambda dns: base64.b64encode(f"#!/bin/sh\nmount -t lustre {dns}@tcp:/fsx /fsx\n".encode()).decode()
        )
        aws.ec2.LaunchTemplate("nodes", instance_type="p5.48xlarge", user_data=mount)
        aws.ec2.LaunchTemplate(
            "ignoring", instance_type="m7i.large", user_data=mount, opts=pulumi.ResourceOptions(ignore_changes=["userData"])
        )

    plan = execute(program)
    assert plan.ok, plan.error
    return to_json(plan)


def test_a_replaced_subnet_carries_to_the_file_system_and_on():
    c = compare(_plan("10.0.0.0/19"), _plan("10.0.32.0/19"))
    ops = {s.name: (s.op, s.because() or s.diff_reasons) for s in c.changes}
    assert ops == {
        "a": ("replace", "cidrBlock"),
        "fs": ("replace", "subnetIds (a is replaced)"),
        "dra": ("replace", "fileSystemId (fs is replaced)"),
        "nodes": ("update", ["userData"]),
    }
    fs = next(s for s in c.steps if s.name == "fs")
    assert fs.carried == {"subnetIds": ["a"]} and fs.blocked
    assert fs.data_loss == (
        "replacing fs (forced by subnetIds (a is replaced)) loses every file on the Lustre file system; "
        "it is protected, so `pulumi up` stops before touching it"
    )
    assert next(s for s in c.steps if s.name == "ignoring").op == "same"  # ignore_changes: not carried
    text = render(c)
    assert (
        "  ± aws:fsx:LustreFileSystem fs: subnetIds (a is replaced) forces a new one; protected: `pulumi up` stops here" in text
    )
    assert "    userData: holds values of fs, which is replaced" in text
    steps = {s["name"]: s for s in diff_json(c)["steps"]}
    assert steps["dra"]["carried"] == {"fileSystemId": ["fs"]}
    assert steps["dra"]["detailedDiff"] == {"fileSystemId": {"kind": "update-replace", "inputDiff": True}}
    assert "carried" not in steps["a"]


def test_nothing_replaced_nothing_carried():
    same = compare(_plan("10.0.0.0/19"), _plan("10.0.0.0/19"))
    assert not same.changed and all(not s.carried for s in same.steps)
