"""The offline plan: the real stack program and stack files under the mock engine."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster.tools.plan.diff.text import diff
from gpucluster.tools.plan.run.engine import run_plan
from gpucluster.tools.plan.run.json import dumps, to_json
from gpucluster.tools.plan.run.stackfile import stack_names
from gpucluster.tools.plan.show.report import render_text
from tests.conftest import GOLDEN, ROOT, check_golden, group, make_config, plan_config
from tests.plans import shipped_plan

LT = "aws:ec2/launchTemplate:LaunchTemplate"


@pytest.fixture(scope="module")
def p5_plan():
    return shipped_plan("p5-training")


def test_p5_training_acceptance(p5_plan):
    """p5-training: 16 p5 nodes, one template, 32 EFA interfaces, one placement group,
    self-referencing EFA security group, IMDSv2, the reservation targeted."""
    assert p5_plan.ok, p5_plan.error
    asgs = p5_plan.of_type("aws:autoscaling/group:Group")
    assert len(asgs) == 1 and asgs[0].inputs["desiredCapacity"] == 16 == asgs[0].inputs["minSize"]
    lts = p5_plan.of_type(LT)
    assert len(lts) == 1
    lt = lts[0].inputs
    assert lt["instanceType"] == "p5.48xlarge"
    assert asgs[0].inputs["launchTemplate"]["id"] == lts[0].id
    nics = lt["networkInterfaces"]
    efa = [n for n in nics if n["interfaceType"] == "efa-only"]
    assert len(efa) == 32 and sorted(n["networkCardIndex"] for n in efa) == [0, *range(1, 32)]
    assert (nics[0]["networkCardIndex"], nics[0]["deviceIndex"], nics[0]["interfaceType"]) == (0, 0, "interface")
    pgs = p5_plan.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert len(pgs) == 1 and pgs[0].inputs["strategy"] == "cluster"
    assert lt["placement"]["groupName"] == pgs[0].state["name"]
    efa_sg = p5_plan.by_name("p5-training-network-efa")
    assert all(efa_sg.id in n["securityGroups"] for n in nics)
    for rule_type in ("SecurityGroupIngressRule", "SecurityGroupEgressRule"):
        rules = [
            r.inputs
            for r in p5_plan.of_type(f"aws:vpc/securityGroup{rule_type[len('SecurityGroup') :]}:{rule_type}")
            if r.inputs["securityGroupId"] == efa_sg.id
        ]
        assert [(r["ipProtocol"], r["referencedSecurityGroupId"]) for r in rules] == [("-1", efa_sg.id)]
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == "cr-0123456789abcdef0"
    text = render_text(p5_plan)
    assert "33 network interfaces (32 EFA): card 0 dev 0 interface; card 0 dev 1 efa-only; cards 1–31 dev 0 efa-only" in text
    assert "capacity reservation cr-0123456789abcdef0 targeted" in text
    assert "IMDSv2 required" in text


def test_slurm_p5_plan_shows_head_node_agent_policy_and_slurm_conf():
    """The plan of slurm-p5 shows the head node, the agent's IAM policy and the
    rendered slurm.conf."""
    plan = shipped_plan("slurm-p5")
    assert plan.ok, plan.error
    text = render_text(plan, files="full", full_tree=True)
    head = plan.by_name("slurm-p5-slurm-head")
    assert head.type == "aws:ec2/instance:Instance"
    assert "aws:ec2:Instance  slurm-p5-slurm-head" in text
    ami = "image (AMI from SSM /aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id)"
    assert f"instance type m7i.xlarge · {ami}" in text and "termination protection on" in text
    agent = "\n".join(
        line.strip() for line in text.splitlines() if "aws:iam:RolePolicy  slurm-p5-slurm-agent" in line or ": Allow " in line
    )
    for sid in ("LaunchOnlyTheClustersInstances", "TagWhileLaunching", "TerminateOnlyDynamicNodes", "PassTheNodeRoleToEc2"):
        assert sid in agent, sid
    # RunInstances only on the cluster's tagged instances of its types, IMDSv2, the compute profile
    assert (
        "LaunchOnlyTheClustersInstances: Allow ec2:RunInstances on arn:aws:ec2:us-east-1:123456789012:instance/* when "
        "ArnLike ec2:LaunchTemplate = (arn of slurm-p5-slurm-p5-lt, assigned at create) and StringEquals "
        "aws:RequestTag/gpucluster:cluster = slurm-p5 and StringEquals aws:RequestTag/gpucluster:node-group = p5 and "
        "StringEquals ec2:InstanceType = p5.48xlarge and StringEquals ec2:MetadataHttpTokens = required and "
        "ArnEquals ec2:InstanceProfile = (arn of slurm-p5-slurm-node-profile, assigned at create)"
    ) in agent
    assert "ec2:RunInstances on *" not in text
    assert (
        "when StringEquals ec2:ResourceTag/gpucluster:cluster = slurm-p5 and StringEquals ec2:ResourceTag/gpucluster:node-group = p5"
        in text
    )
    conf = plan.files["slurm-p5-slurm-head-files/etc/slurm/slurm.conf"]
    assert "--- slurm-p5-slurm-head-files/etc/slurm/slurm.conf\n" in text and conf.rstrip("\n") in text
    assert "NodeName=p5-[1-16] State=CLOUD CPUs=192 RealMemory=1992294 Gres=gpu:h100:8" in conf
    assert "PartitionName=dev Nodes=dev-[1-2]" in conf and "SuspendExcParts=dev" in conf
    assert plan.of_type("aws:autoscaling/group:Group")[0].inputs["desiredCapacity"] == 2  # the static partition only


def _plan_sizes(size: int):
    config = make_config(group(minSize=size, maxSize=size, desiredSize=size))
    return plan_config(config, "scale")


def test_resources_do_not_grow_with_node_count():
    small, large = _plan_sizes(2), _plan_sizes(512)
    assert small.ok and large.ok
    shape = lambda p: sorted((r.type, r.name) for r in p.resources)  # noqa: E731
    assert shape(small) == shape(large)
    sizes = [r.inputs["desiredCapacity"] for r in large.of_type("aws:autoscaling/group:Group")]
    assert sizes == [512]


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_plans_and_matches_its_golden_plan(stack, update_golden):
    plan = shipped_plan(stack)
    assert plan.ok, plan.error
    assert plan.resources and plan.files
    check_golden(GOLDEN / "plans" / f"{stack}.json", dumps(plan), update_golden)


def test_plans_are_deterministic(p5_plan):
    assert dumps(run_plan("p5-training")) == dumps(p5_plan)


def test_diff_shows_what_changed(p5_plan):
    before = to_json(p5_plan)
    after = json.loads(json.dumps(before))
    asg = next(r for r in after["resources"] if r["type"] == "aws:autoscaling/group:Group")
    asg["inputs"]["desiredCapacity"] = 8
    after["resources"].append({**asg, "urn": asg["urn"] + "-new", "name": "extra"})
    lines = diff(before, after)
    assert lines[1] == "1 to create, 1 to update, 0 to replace, 0 to delete"
    assert "~ aws:autoscaling:Group p5-training-p5-asg" in lines
    assert "    desiredCapacity: 16 → 8" in lines
    assert "+ aws:autoscaling:Group extra" in lines
    assert diff(before, before)[-1] == "no changes"


def test_stack_outputs_exported(p5_plan):
    out = p5_plan.outputs
    assert out["clusterName"] == "p5-training" and out["vpcId"].startswith("vpc-")
    assert out["nodeGroups"]["p5"]["efaInterfaces"] == 32
    assert out["nodeGroups"]["p5"]["launchTemplateId"].startswith("lt-")
    assert out["estimate"]["nodeGroups"][0]["desired"] == 16
    assert [f["code"] for f in out["findings"]] == ["placement-group-capacity-reservation", "image-unpinned"]


def test_every_invoke_answered_from_the_catalog(p5_plan):
    assert "aws:ec2/getInstanceType:getInstanceType" in p5_plan.invokes
    assert "aws:ssm/getParameter:getParameter" in p5_plan.invokes


def test_stale_catalog_stops_the_program(monkeypatch):
    """If EC2 disagrees with the catalog (here: fewer EFA interfaces), nothing is created."""
    from gpucluster.tools.plan.run import lookups

    real = lookups.instance_type_result
    monkeypatch.setattr(lookups, "instance_type_result", lambda f: {**real(f), "efaMaximumInterfaces": 16})
    plan = run_plan("p5-training")
    assert not plan.ok and plan.resources == []
    assert "the instance catalog says p5.48xlarge has 32 maximum EFA interfaces, EC2 in us-east-1 says 16" in plan.error


# --- the CLI, as a user runs it ------------------------------------------------------------------------


def gpucluster(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucluster.tools.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow  # CLI processes, each planning a stack
def test_cli_plan_text_and_json(tmp_path):
    result = gpucluster("plan", "--stack", "p5-training", "--no-files")
    assert result.returncode == 0, result.stderr
    assert "GpuNodeGroup p5-training-p5" in result.stdout and "Estimate" in result.stdout
    assert result.stderr == ""  # no noise: warnings are in the plan, not on stderr
    out = tmp_path / "plan.json"
    assert gpucluster("plan", "--stack", "p5-training", "--json", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    assert doc["ok"] and {r["type"] for r in doc["resources"]} >= {LT, "aws:ec2/placementGroup:PlacementGroup"}
    same = gpucluster("plan", "diff", str(out), str(out))
    assert same.returncode == 0 and same.stdout.strip().endswith("0 to delete\nno changes")


@pytest.mark.slow  # a CLI process per case
def test_cli_exit_codes_for_bad_config_and_missing_stack(tmp_path):
    project = tmp_path / "proj"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", project)
    shutil.copy(ROOT / "__main__.py", project)
    (project / "stacks" / "Pulumi.bad.yaml").write_text(
        "config:\n  aws:region: us-east-1\n  gpucluster:nodeGroups:\n    - name: a\n      instanceType: p5.48xl\n"
        "      availabilityZones: [us-east-1a]\n      maxSize: 1\n"
    )
    bad = gpucluster("--project-dir", str(project), "plan", "--stack", "bad")
    assert bad.returncode == 2
    assert "gpucluster:nodeGroups[0].instanceType: instance type 'p5.48xl' is not in the instance catalog" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr
    missing = gpucluster("--project-dir", str(project), "plan", "--stack", "nope")
    assert missing.returncode == 1 and "no stack config stacks/Pulumi.nope.yaml (stacks: bad)" in missing.stderr


@pytest.mark.parametrize("stack", stack_names())
def test_every_shipped_stack_logs_its_vpc_and_closes_the_default_group(stack):
    """Security Hub EC2.6 and EC2.2 on every shipped stack, and every KMS key kept like the data."""
    plan = shipped_plan(stack)
    assert plan.ok, plan.error
    (vpc,) = plan.of_type("aws:ec2/vpc:Vpc")
    (flow,) = plan.of_type("aws:ec2/flowLog:FlowLog")
    # The flow log's group (monitoring adds its own log groups, held to the same rules by the policy).
    (group,) = [g for g in plan.of_type("aws:cloudwatch/logGroup:LogGroup") if g.state["arn"] == flow.inputs["logDestination"]]
    assert (flow.inputs["vpcId"], flow.inputs["trafficType"], flow.inputs["logDestinationType"]) == (
        vpc.id,
        "ALL",
        "cloud-watch-logs",
    )
    assert flow.inputs["logDestination"] == group.state["arn"] and group.inputs["retentionInDays"] == 365
    assert group.protect and group.retain_on_delete
    (default,) = plan.of_type("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
    assert default.inputs["vpcId"] == vpc.id and default.inputs["ingress"] == [] and default.inputs["egress"] == []
    assert all(k.protect and k.retain_on_delete for k in plan.of_type("aws:kms/key:Key"))


@pytest.mark.slow  # plans a cluster of every catalog type
def test_every_catalog_type_plans_in_text_and_json(catalog):
    """A group of each type in the catalog (p5e, p5en, p6-b200, p6-b300, trn2 included,
    which have no list price) plans; the text and the JSON plan show a missing price as unpriced with
    the field to set, and the JSON is strict (no NaN/Infinity)."""
    from gpucluster.resolve.cost.estimate import unknown_price_source

    def refuse(token: str) -> float:
        raise ValueError(f"non-finite number {token}")

    types = list(catalog)
    assert {"p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge", "trn2.48xlarge"} <= set(types)
    groups = [group(name=f"g{n}", instanceType=t, maxSize=1) for n, t in enumerate(types)]
    plan = plan_config(make_config(*groups), "every-type")
    assert plan.ok, plan.error
    text = render_text(plan, files="none")
    doc = json.loads(dumps(plan), parse_constant=refuse)
    estimated = {g["instanceType"]: g for g in doc["outputs"]["estimate"]["nodeGroups"]}
    assert sorted(estimated) == sorted(types)
    for n, t in enumerate(types):
        price = catalog[t].on_demand_usd_per_hour
        if price is None:
            assert estimated[t]["usdPerNodeHour"] is None
            assert estimated[t]["priceSource"] == unknown_price_source(n, t)
            assert f"× {t:<18} unpriced/node-hour" in text and unknown_price_source(n, t) in text
        else:
            assert estimated[t]["usdPerNodeHour"] == price
    # the total is the priced part, never "unknown", with the unpriced groups counted and named beside it
    unpriced = [f"g{n}" for n, t in enumerate(types) if catalog[t].on_demand_usd_per_hour is None]
    assert doc["outputs"]["estimate"]["unpriced"] == unpriced and doc["outputs"]["estimate"]["usdPerHour"] > 0
    assert f"at max size; {len(unpriced)} lines unpriced, not in these totals: {', '.join(unpriced)}" in text
    assert "total: unknown/h" not in text
