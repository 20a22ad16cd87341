"""Which AMI a node group should run (:func:`gpucluster_agents.power.images.expected_image`), against moto."""

from __future__ import annotations

import json

from gpucluster_agents import contract
from gpucluster_agents.contract import AgentConfig, NodeGroup
from gpucluster_agents.power.images import expected_image
from tests.agents.moto_env import AMI_ID, MotoServer, ec2_client, make_world


def _group(lt: str, version: str = "$Default", image_id: str | None = None) -> NodeGroup:
    return NodeGroup("p5", "p5", 2, "p5.48xlarge", lt, version, ("subnet-0a",), image_id=image_id)


def test_the_launch_template_default_version_names_the_image(moto: MotoServer) -> None:
    world = make_world(moto.url, {"p5": "p5.48xlarge"})
    ec2 = ec2_client(moto.url)
    lt = world.launch_templates["p5"]
    assert expected_image(ec2, _group(lt)) == AMI_ID
    # a new version with a new image, made the default: the group now expects that image
    ec2.create_launch_template_version(LaunchTemplateId=lt, LaunchTemplateData={"ImageId": "ami-0b0b0b0b0b0b0b0b0"})
    ec2.modify_launch_template(LaunchTemplateId=lt, DefaultVersion="2")
    assert expected_image(ec2, _group(lt)) == "ami-0b0b0b0b0b0b0b0b0"
    assert expected_image(ec2, _group(lt, "1")) == AMI_ID


def test_an_image_named_in_the_config_wins_without_asking_ec2() -> None:
    class NoEc2:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"EC2 asked: {name}")

    assert expected_image(NoEc2(), _group("lt-0a", image_id="ami-0123456789abcdef0")) == "ami-0123456789abcdef0"


def test_image_id_round_trips_and_is_checked() -> None:
    cfg = AgentConfig("demo", "us-east-1", (_group("lt-0a", image_id="ami-0123456789abcdef0"),))
    doc = contract.to_dict(cfg)
    assert doc["node_groups"][0]["image_id"] == "ami-0123456789abcdef0"
    assert contract.parse(doc) == cfg
    assert "image_id" not in contract.to_dict(AgentConfig("demo", "us-east-1", (_group("lt-0a"),)))["node_groups"][0]
    doc["node_groups"][0]["image_id"] = "ubuntu-latest"
    try:
        contract.parse(json.loads(json.dumps(doc)))
    except contract.ConfigError as e:
        assert "node_groups[0].image_id" in str(e) and "ami-0123456789abcdef0" in str(e)
    else:
        raise AssertionError("a bad image_id was accepted")
