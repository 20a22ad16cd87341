"""SlurmCluster from a program's Args: plain dicts get the stack's defaults, Outputs of other resources
reach the resources and the head node's files, a bad value is refused naming the field before any resource."""

from __future__ import annotations

import base64
import gzip
import json

import pulumi_aws as aws
import pytest

from gpucluster.components.slurm.slurm_cluster import SlurmCluster, SlurmClusterArgs
from gpucluster.load import load_spec
from gpucluster_agents.contract import parse as parse_config
from tests.conftest import ROOT, group, make_config
from tests.pyright import pyright

INSTANCE = "aws:ec2/instance:Instance"
AGENT = "/etc/gpucluster/agent.json"


def minimal(**extra) -> SlurmClusterArgs:
    args: SlurmClusterArgs = {
        "cluster_name": "s",
        "region": "us-east-1",
        "compute_node_groups": [
            {"name": "p5", "instance_type": "p5.48xlarge", "availability_zones": ["us-east-1a"], "max_size": 16}
        ],
        "vpc_id": "vpc-0abc12345",
        "subnets": [{"id": "subnet-0aaa1111", "availability_zone": "us-east-1a"}],
        "security_group_ids": ["sg-0efa0000000000001"],
    }
    args.update(extra)  # type: ignore[typeddict-item]
    return args


def agent_config(plan) -> dict:
    return json.loads(plan.files["s-slurm-head-files" + AGENT])


def test_a_minimal_dict_gets_the_stacks_defaults(run_components):
    plan = run_components(lambda: SlurmCluster("s-slurm", minimal()))
    stack = load_spec(make_config(group(name="p5", maxSize=16), slurm={}), stack="s").spec.slurm
    assert stack is not None
    head = plan.by_name("s-slurm-head").inputs
    assert head["instanceType"] == stack.head_node.instance_type
    assert head["rootBlockDevice"]["volumeSize"] == stack.head_node.root_volume_size_gib
    assert plan.by_name("s-slurm-head-data", "aws:ebs/volume:Volume").inputs["size"] == stack.head_node.data_volume_size_gib
    cfg = parse_config(agent_config(plan))
    assert cfg.insufficient_capacity_hold_seconds == stack.agent.insufficient_capacity_hold_seconds
    # the head node sits in the zone's first subnet, as the stack's resolution picks with your own VPC
    assert plan.by_name("s-slurm-head-eni").inputs["subnetId"] == "subnet-0aaa1111"
    assert "s-slurm-p5-lt" in {r.name for r in plan.resources}


def test_an_output_reservation_reaches_the_agent_config_and_the_template(run_components):
    def program():
        cr = aws.ec2.CapacityReservation(
            "cr", instance_type="p5.48xlarge", instance_platform="Linux/UNIX", availability_zone="us-east-1a", instance_count=2
        )
        group = {
            "name": "p5",
            "instance_type": "p5.48xlarge",
            "availability_zones": ["us-east-1a"],
            "max_size": 2,
            "capacity": {"type": "capacity-reservation", "reservation_id": cr.id},
        }
        SlurmCluster("s-slurm", minimal(compute_node_groups=[group]))

    plan = run_components(program)
    cr_id = plan.by_name("cr").state["id"]
    assert cr_id.startswith("cr-")
    assert json.dumps(agent_config(plan)).count(cr_id) == 1
    lt = plan.by_name("s-slurm-p5-lt").inputs
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == cr_id
    assert "0eeee" not in plan.by_name("s-slurm-head").inputs["userDataBase64"]


def test_compute_user_data_is_what_the_launch_template_carries(run_components):
    seen: dict[str, str] = {}

    def program():
        cluster = SlurmCluster(
            "s-slurm", minimal(lustre={"dns_name": "fs-0123.fsx.us-east-1.amazonaws.com", "mount_name": "abcd"})
        )
        cluster.compute_user_data["p5"].apply(lambda t: seen.setdefault("p5", t))

    plan = run_components(program)
    text = seen["p5"]
    assert "slurmd" in text and "fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcd /fsx lustre noatime,flock,nosuid,nodev," in text
    carried = gzip.decompress(base64.b64decode(plan.by_name("s-slurm-p5-lt").inputs["userData"])).decode()
    assert carried == text


@pytest.mark.slow  # a pyright process
def test_the_typed_usage_is_pyright_clean(tmp_path_factory: pytest.TempPathFactory):
    result = pyright(tmp_path_factory, ROOT / "tests/components/slurm/typed_usage_slurm.py")
    assert result.returncode == 0, result.stdout
