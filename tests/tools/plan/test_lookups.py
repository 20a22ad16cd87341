"""The plan's mocks answer the look-ups a Pulumi user writes, with the shapes pulumi-aws reads back: every field of
each result type is present, both in the plain and in the ``_output`` form; the answers agree with one another and
with the ids the components accept; an invoke nothing answers stops the plan with one line naming it, exit 2."""

from __future__ import annotations

import inspect
import json
import logging
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from gpucluster.components._shared.inputs import KINDS
from gpucluster.tools.plan.run.engine import execute
from gpucluster.tools.plan.run.lookups import ANSWERED, UnansweredInvoke, short
from gpucluster.tools.plan.show.report import render_text
from tests.tools.plan.test_plan import gpucluster

VPC = "vpc-0123456789abcdef0"
IN_VPC = [{"name": "vpc-id", "values": [VPC]}]
UBUNTU = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"

# function name → keyword arguments, as a user writes them
CALLS: dict[str, dict[str, Any]] = {
    "ec2.get_subnets": {"filters": [*IN_VPC, {"name": "availability-zone", "values": ["us-east-1a", "us-east-1b"]}]},
    "ec2.get_subnet": {"id": "subnet-0123456789abcdef0"},
    "ec2.get_vpc": {"default": True},
    "ec2.get_security_group": {"vpc_id": VPC, "name": "default"},
    "ec2.get_security_groups": {"filters": IN_VPC, "tags": {"role": "gpu"}},
    "get_caller_identity": {},
    "get_region": {},
    "ec2.get_ami": {"most_recent": True, "owners": ["099720109477"], "filters": [{"name": "name", "values": [UBUNTU]}]},
}


def _function(path: str, output: bool):
    owner: Any = aws
    *modules, name = path.split(".")
    for m in modules:
        owner = getattr(owner, m)
    return getattr(owner, name + ("_output" if output else ""))


def _fields(result: Any) -> dict[str, Any]:
    """Every property of a pulumi-aws result type, read as a program reads it."""
    return {n: getattr(result, n) for n, _ in inspect.getmembers(type(result), lambda m: isinstance(m, property))}


def _run(program) -> Any:
    seen: dict[str, Any] = {}
    plan = execute(lambda: program(seen), config={"aws:region": "us-east-1"})
    assert plan.ok, plan.error
    return seen


@pytest.mark.filterwarnings("ignore::UserWarning:pulumi_aws._utilities")  # reading the deprecated fields too
@pytest.mark.parametrize("path", sorted(CALLS))
def test_every_field_of_the_result_is_there(path):
    def program(seen: dict[str, Any]) -> None:
        seen["plain"] = _fields(_function(path, output=False)(**CALLS[path]))
        _function(path, output=True)(**CALLS[path]).apply(lambda r: seen.__setitem__("output", _fields(r)))

    seen = _run(program)
    missing = sorted(n for n, v in seen["plain"].items() if v is None)
    assert not missing, f"{path} leaves {missing} unanswered"
    assert repr(seen["output"]) == repr(seen["plain"])  # the _output form makes the same invoke


def test_the_answers_agree_and_look_like_aws():
    def program(seen: dict[str, Any]) -> None:
        ids = aws.ec2.get_subnets(**CALLS["ec2.get_subnets"]).ids
        seen["subnets"] = [aws.ec2.get_subnet(id=i) for i in ids]
        seen["vpc"] = aws.ec2.get_vpc(id=VPC)
        seen["default"] = aws.ec2.get_vpc(default=True)
        seen["sg"] = aws.ec2.get_security_group(vpc_id=VPC, name="default")
        seen["ami"] = aws.ec2.get_ami(**CALLS["ec2.get_ami"])
        seen["me"] = aws.get_caller_identity()

    seen = _run(program)
    a, b = seen["subnets"]
    assert (a.availability_zone, b.availability_zone) == ("us-east-1a", "us-east-1b")
    assert a.vpc_id == b.vpc_id == VPC and a.cidr_block != b.cidr_block and a.availability_zone_id == "use1-az1"
    assert KINDS["subnet"].accepts(a.id) and KINDS["vpc"].accepts(seen["default"].id)
    assert seen["vpc"].id == VPC and seen["vpc"].cidr_block == "10.0.0.0/16"
    assert seen["default"].default is True and seen["default"].cidr_block == "172.31.0.0/16"
    assert seen["sg"].id.startswith("sg-") and seen["sg"].name == "default" and seen["sg"].vpc_id == VPC
    ami = seen["ami"]
    assert ami.id == ami.image_id and ami.id.startswith("ami-") and ami.architecture == "x86_64"
    assert ami.name == UBUNTU.replace("*", "20251101") and ami.owner_id == "099720109477"
    assert ami.block_device_mappings[0].ebs["snapshot_id"] == ami.root_snapshot_id
    assert seen["me"].account_id == "123456789012"


def test_the_same_lookups_give_the_same_answers_and_the_text_plan_names_them():
    def program() -> None:
        ids = aws.ec2.get_subnets_output(filters=IN_VPC).ids
        pulumi.export("subnet", ids[0])
        pulumi.export("ami", aws.ec2.get_ami_output(**CALLS["ec2.get_ami"]).id)

    one, two = (execute(program, config={"aws:region": "eu-west-1"}) for _ in range(2))
    assert one.outputs == two.outputs and one.outputs["subnet"].startswith("subnet-")
    shown = {line.split()[0]: " ".join(line.split()[1:]) for line in render_text(one).split("Outputs")[1].splitlines()[1:]}
    assert shown == {"ami": f"(AMI get_ami finds: {UBUNTU})", "subnet": "(the subnet in eu-west-1a get_subnets finds)"}


def test_an_unanswered_invoke_is_named():
    def program() -> None:
        aws.ec2.get_vpc_endpoint(service_name="com.amazonaws.us-east-1.s3")

    with pytest.raises(UnansweredInvoke) as caught:
        execute(program)
    message = str(caught.value)
    assert message.startswith(
        "the program calls the data source aws.ec2.get_vpc_endpoint (aws:ec2/getVpcEndpoint:getVpcEndpoint) "
        'with {"serviceName": "com.amazonaws.us-east-1.s3"}, which the offline plan does not answer'
    )
    assert all(short(t) in message for t in ANSWERED)


@pytest.mark.parametrize("form", ["get_vpc_endpoint", "get_vpc_endpoint_output"])
@pytest.mark.slow  # a CLI process that runs a program
def test_an_unanswered_invoke_exits_2_in_one_line(tmp_path: Path, form: str):
    (tmp_path / "Pulumi.yaml").write_text("name: mine\nruntime: python\n")
    (tmp_path / "Pulumi.s.yaml").write_text("config:\n  aws:region: us-east-1\n")
    (tmp_path / "__main__.py").write_text(
        "import pulumi, pulumi_aws as aws\n"
        f"e = aws.ec2.{form}(service_name='com.amazonaws.us-east-1.s3')\n"
        "pulumi.export('endpoint', e.id)\n"
    )
    result = gpucluster("plan", "--stack", "s", "--project-dir", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr and "unexpected error" not in result.stderr
    assert result.stderr.startswith("gpucluster plan: the program calls the data source aws.ec2.get_vpc_endpoint")
    assert json.dumps({"serviceName": "com.amazonaws.us-east-1.s3"}) in result.stderr


def test_the_throwaway_stack_of_set_mocks_never_overwrites_the_exports(monkeypatch):
    """``set_mocks`` registers a stack of the same URN as ours, whose empty outputs used to land after our exports
    in one plan of five: the plan records one stack only, and its exports every time."""
    from gpucluster.tools.plan.run import engine

    monitors: list[Any] = []

    class Kept(engine.RecordingMonitor):
        def __init__(self, mocks: Any) -> None:
            super().__init__(mocks)
            monitors.append(self)

    monkeypatch.setattr(engine, "RecordingMonitor", Kept)

    def program() -> None:
        pulumi.export("subnet", aws.ec2.get_subnets_output(filters=IN_VPC).ids[0])

    for _ in range(10):
        plan = execute(program, config={"aws:region": "eu-west-1"})
        assert [r.type for r in monitors[-1].registrations] == ["pulumi:pulumi:Stack"]
        assert plan.ok and plan.outputs["subnet"].startswith("subnet-")


@pytest.mark.slow  # waits out the unanswered invoke's deadline, in real time
def test_a_program_stopped_by_an_unanswered_invoke_leaves_no_task_behind(caplog):
    """The runtime's RPC tasks still pending when an unanswered invoke stops the program are cancelled before the
    plan's loop closes: else the collector logs "Task was destroyed but it is pending!" (one run in five), a second
    stderr line after the plan's one-line error."""
    import gc

    def program() -> None:
        pulumi.export("endpoint", aws.ec2.get_vpc_endpoint_output(service_name="com.amazonaws.us-east-1.s3").id)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for _ in range(15):
            with pytest.raises(UnansweredInvoke):
                execute(program)
            gc.collect()
    assert not [r.getMessage() for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
