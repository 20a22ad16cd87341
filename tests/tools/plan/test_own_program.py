"""``gpucluster plan`` runs any Pulumi Python program, not only the stack program: a project of your own
(its own ``Pulumi.yaml``, stack file next to it, no estimate or findings outputs) plans, and the mock ids
of the resources such a program creates and wires into the components are ids the components accept."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.inputs import KINDS
from gpucluster.tools.plan.run.engine import execute, run_plan
from gpucluster.tools.plan.show.report import render_text


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


# --- a program of your own: the summary and cost come from its resources -----------------------------------

OWN_PROGRAM = Path(__file__).parent / "own_program"


def test_a_gpu_node_group_and_lustre_in_an_existing_vpc_plan_with_nodes_and_cost():
    """A user's own program (a GpuNodeGroup of 2 × p5.48xlarge and a LustreStorage of
    2,400 GiB in an existing VPC whose subnet it looks up with aws.ec2.get_subnets) plans offline with exit 0, and
    its summary shows the nodes and a cost, worked out from its resources (it exports no estimate)."""
    from gpucluster.config.storage.sizing import USD_PER_GB_MONTH
    from gpucluster.facts.prices import load_prices
    from tests.tools.plan.test_plan import gpucluster

    result = gpucluster("plan", "--stack", "test", "--project-dir", str(OWN_PROGRAM), "--no-files")
    assert result.returncode == 0, result.stderr
    summary: list[str] = []
    for line in result.stdout.split("\n\n")[0].splitlines():
        if line.startswith(" " * 15) and summary:  # a row wrapped at the plan's width goes on under its value
            summary[-1] += " " + line.strip()
        else:
            summary.append(line)
    rows = {line[2:12].strip() or f"more {n}": line[13:] for n, line in enumerate(summary[1:])}
    assert rows["nodes"] == "p5: 2 × p5.48xlarge · 8 × H100 per node · 32 EFA · zones unknown · Auto Scaling group"
    assert rows["GPUs"] == "16 now, 16 at max size (16 H100 at max)"
    assert rows["storage"] == "FSx for Lustre lustre-fs · 2,400 GiB · PERSISTENT_2 · 250 MB/s/TiB (600 MB/s) · no EFA"
    node_hour = load_prices().quote("p5.48xlarge", "us-east-1").usd_per_hour
    assert node_hour is not None
    hourly = round(2 * node_hour, 2) + round(2400 * USD_PER_GB_MONTH["PERSISTENT_2"][250] / 730, 2)
    assert rows["cost"].startswith(f"${hourly:,.2f}/h now, ${hourly:,.2f}/h at max size")
    assert "unknown" not in rows["cost"] and "20.4 kW" in rows["cost"]
    assert "  p5              2 × p5.48xlarge " in result.stdout  # the estimate section, per group
    assert "subnets (the subnet in us-east-1a get_subnets finds)" in result.stdout


def test_the_node_group_of_your_own_program_boots_as_a_clusters_and_mounts_its_lustre():
    """The launch template of the user's GpuNodeGroup carries the node
    bootstrap (the EFA check, the NCCL environment, the health thresholds) and the Lustre mount of the program's
    LustreStorage (its mount point, DNS name and mount name, with nosuid,nodev whatever the options say)."""
    import base64
    import gzip
    import json

    import yaml

    plan = run_plan("test", OWN_PROGRAM)
    assert plan.ok, plan.error
    (lt,) = [r for r in plan.resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"]
    assert lt.name == "p5-lt"
    text = gzip.decompress(base64.b64decode(lt.inputs["userData"])).decode()
    assert text.startswith("#cloud-config") and "gpucluster mine / node group p5 (p5.48xlarge)" in text
    files = {f["path"]: f for f in yaml.safe_load(text)["write_files"]}
    # the bootstrap: 32 EFA interfaces checked, the NCCL environment over EFA, the node facts, the health thresholds
    assert "/usr/local/sbin/gpucluster-efa-check" in files and "32" in files["/usr/local/sbin/gpucluster-efa-check"]["content"]
    assert "FI_PROVIDER=efa" in files["/etc/gpucluster/nccl.env"]["content"]
    assert json.loads(files["/etc/gpucluster/node.json"]["content"])["efaInterfaces"] == 32
    health = json.loads(gzip.decompress(base64.b64decode(files["/etc/gpucluster/health.json"]["content"])))
    assert (health["gpu_count"], health["efa_count"], health["shared_fs_mount"]) == (8, 32, "/fsx")
    # the Lustre mount: the file system's real names (not stand-ins), its mount point, nosuid,nodev
    (fs,) = [r for r in plan.resources if r.type == "aws:fsx/lustreFileSystem:LustreFileSystem"]
    mount = files["/usr/local/sbin/gpucluster-mount-lustre"]["content"]
    fstab = f"{fs.state['dnsName']}@tcp:/{fs.state['mountName']} /fsx lustre "
    assert fstab in mount and "nosuid,nodev" in mount.split(fstab)[1].splitlines()[0]
    assert "fs-00000000000000000" not in text and "xxxxxxxx" not in text
    assert ["/usr/local/sbin/gpucluster-mount-lustre"] in yaml.safe_load(text)["runcmd"]


def test_the_cost_of_a_change_to_your_own_program(tmp_path: Path):
    """plan diff's cost delta reads the estimate worked out from the resources too."""
    from gpucluster.tools.plan.diff.cost import compare
    from gpucluster.tools.plan.run.json import to_json

    def plan(size: int) -> dict:
        project = tmp_path / str(size)
        project.mkdir()
        for f in ("Pulumi.yaml", "Pulumi.test.yaml"):
            (project / f).write_text((OWN_PROGRAM / f).read_text())
        text = (OWN_PROGRAM / "__main__.py").read_text()
        (project / "__main__.py").write_text(
            text.replace('"max_size": 2,\n        "desired_size": 2', f'"max_size": {size},\n        "desired_size": {size}')
        )
        done = run_plan("test", project)
        assert done.ok, done.error
        return to_json(done)

    delta = compare(plan(2), plan(4))
    (group,) = [r for r in delta.rows if r.kind == "nodeGroup"]
    assert group.key == "p5" and group.status == "changed" and group.before and group.after
    assert group.before["usdPerHour"] and group.after["usdPerHour"] == round(2 * group.before["usdPerHour"], 2)
    assert group.delta("kw") == group.before["kw"]
