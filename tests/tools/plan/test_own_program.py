"""``gpucluster plan`` runs any Pulumi Python program, not only the stack program: a project of your own
(its own ``Pulumi.yaml``, stack file next to it, no estimate or findings outputs) plans, and the mock ids
of the resources such a program creates and wires into the components are ids the components accept."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.inputs import KINDS
from gpucluster.tools.plan.engine import execute, run_plan
from gpucluster.tools.plan.report import render_text


def test_a_program_of_your_own_plans(tmp_path: Path):
    (tmp_path / "Pulumi.yaml").write_text("name: mine\nruntime: python\n")
    (tmp_path / "Pulumi.s.yaml").write_text("config:\n  aws:region: eu-west-1\n  mine:size: 3\n")
    (tmp_path / "__main__.py").write_text(
        "import pulumi, pulumi_aws as aws\n"
        "vpc = aws.ec2.Vpc('vpc', cidr_block='10.0.0.0/16')\n"
        "pulumi.export('vpcId', vpc.id)\n"
        "pulumi.export('size', pulumi.Config().require_int('size'))\n"
    )
    plan = run_plan("s", tmp_path)
    assert plan.ok, plan.error
    assert plan.project == "mine" and plan.region == "eu-west-1"
    assert [r.type for r in plan.resources] == ["aws:ec2/vpc:Vpc"]
    assert plan.outputs == {"vpcId": plan.resources[0].id, "size": 3}
    text = render_text(plan)
    assert "aws:ec2:Vpc  vpc" in text and "Findings: none" in text


def test_mock_ids_of_resources_a_program_wires_in_are_well_formed():
    seen: dict[str, str] = {}

    def program() -> None:
        vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
        subnet = aws.ec2.Subnet("a", vpc_id=vpc.id, cidr_block="10.0.0.0/19", availability_zone="us-east-1a")
        cr = aws.ec2.CapacityReservation(
            "cr-name-without-the-prefix",
            instance_type="p5.48xlarge",
            instance_platform="Linux/UNIX",
            availability_zone="us-east-1a",
            instance_count=1,
        )
        group = aws.resourcegroups.Group("reservations", name="reservations")
        key = aws.kms.Key("key")
        fs = aws.fsx.LustreFileSystem("fs", subnet_ids=subnet.id, storage_capacity=1200)
        for kind, out in [
            ("vpc", vpc.id),
            ("subnet", subnet.id),
            ("capacity-reservation", cr.id),
            ("resource-group", group.arn),
            ("kms", key.arn),
            ("kms-arn", key.arn),
            ("file-system", fs.id),
        ]:
            pulumi.Output.from_input(out).apply(lambda v, k=kind: seen.__setitem__(k, v))

    plan = execute(program)
    assert plan.ok, plan.error
    assert len(seen) == 7
    bad = {k: v for k, v in seen.items() if not KINDS[k].accepts(v)}
    assert not bad, bad
