"""GpuNodeGroup under mocks: typed Args (config + wiring), the launch template follows the instance's
network cards, and the three node-group variants share one launch-template core."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import typing
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from gpucluster.components._shared.build import part
from gpucluster.components._shared.config_types import NodeGroupConfig
from gpucluster.components.compute._launch_template import ASG as ASG_SETTINGS
from gpucluster.components.compute._launch_template import TOKEN, NodeWiring, build_node_group
from gpucluster.components.compute.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from gpucluster.components.kubernetes._eks_node_groups import EksNodeTemplate
from gpucluster.components.slurm._node_group import SlurmNodeGroup
from gpucluster.config.naming import CLUSTER_TAG, NODE_GROUP_TAG
from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.render.iam import session_manager_policy
from gpucluster.resolve.compute.node_group import resolve_node_group
from tests.conftest import group, make_config

SG = ["sg-0efa0000000000001", "sg-0node000000000002"]
SUBNETS = ["subnet-0aaa1111"]
LT = "aws:ec2/launchTemplate:LaunchTemplate"
ASG = "aws:autoscaling/group:Group"
PG = "aws:ec2/placementGroup:PlacementGroup"
CR = "cr-0123456789abcdef0"


def args(**fields: Any) -> GpuNodeGroupArgs:
    """What a Python user writes: a p5 group in one zone, plus ``fields`` (snake_case)."""
    out: dict[str, Any] = {
        "name": "gpu",
        "instance_type": "p5.48xlarge",
        "availability_zones": ["us-east-1a"],
        "max_size": 2,
        "subnet_ids": SUBNETS,
        "cluster_name": "c",
        "security_group_ids": SG,
        "tags": {"team": "ml"},
    }
    out.update(fields)
    return typing.cast(GpuNodeGroupArgs, out)


def build(a: GpuNodeGroupArgs) -> GpuNodeGroup:
    return GpuNodeGroup("c-gpu", a)


def test_p5_launch_template_has_an_efa_interface_per_card(run_components):
    plan = run_components(lambda: build(args(max_size=16, min_size=16)))
    lt = plan.of_type(LT)[0].inputs
    nics = lt["networkInterfaces"]
    assert len(nics) == 33
    assert (nics[0]["networkCardIndex"], nics[0]["deviceIndex"], nics[0]["interfaceType"]) == (0, 0, "interface")
    assert (nics[1]["networkCardIndex"], nics[1]["deviceIndex"], nics[1]["interfaceType"]) == (0, 1, "efa-only")
    assert [(n["networkCardIndex"], n["deviceIndex"], n["interfaceType"]) for n in nics[2:]] == [
        (c, 0, "efa-only") for c in range(1, 32)
    ]
    assert all(n["securityGroups"] == SG for n in nics)
    assert all("subnetId" not in n for n in nics)  # the ASG (or EKS) supplies subnets
    assert all("associatePublicIpAddress" not in n for n in nics)
    assert lt["instanceType"] == "p5.48xlarge"


def test_secure_defaults(run_components):
    plan = run_components(lambda: build(args()))
    lt = plan.of_type(LT)[0].inputs
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert lt["metadataOptions"]["instanceMetadataTags"] == "disabled"
    ebs = lt["blockDeviceMappings"][0]["ebs"]
    assert (ebs["encrypted"], ebs["volumeType"], ebs["volumeSize"]) == ("true", "gp3", 200)
    assert lt["blockDeviceMappings"][0]["deviceName"] == "/dev/sda1"
    assert "keyName" not in lt
    role = plan.of_type("aws:iam/role:Role")[0].inputs
    assert '"ec2.amazonaws.com"' in role["assumeRolePolicy"]
    # Session Manager only, and without AmazonSSMManagedInstanceCore's ssm:GetParameter* on "*"
    assert plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") == []
    (ssm,) = plan.of_type("aws:iam/rolePolicy:RolePolicy")
    assert json.loads(ssm.inputs["policy"]) == session_manager_policy()


def test_capacity_reservation_targeted(run_components):
    plan = run_components(lambda: build(args(capacity={"type": "capacity-reservation", "reservation_id": CR})))
    lt = plan.of_type(LT)[0].inputs
    assert lt["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": CR}}
    assert "instanceMarketOptions" not in lt
    assert plan.of_type(PG) == []  # auto: no placement group for a reservation made outside it


def test_reservation_resource_group(run_components):
    arn = "arn:aws:resource-groups:us-east-1:123456789012:group/p5-odcrs"
    plan = run_components(lambda: build(args(capacity={"type": "capacity-reservation", "resource_group_arn": arn})))
    target = plan.of_type(LT)[0].inputs["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target == {"capacityReservationResourceGroupArn": arn}


def test_capacity_block(run_components):
    plan = run_components(lambda: build(args(capacity={"type": "capacity-block", "reservation_id": CR})))
    lt = plan.of_type(LT)[0].inputs
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == CR
    assert plan.of_type(PG) == [] and "placement" not in lt


def test_spot(run_components):
    plan = run_components(lambda: build(args(capacity={"type": "spot", "spot_max_price": 40.5})))
    market = plan.of_type(LT)[0].inputs["instanceMarketOptions"]
    assert market["marketType"] == "spot"
    assert market["spotOptions"]["maxPrice"] == "40.5"


def test_placement_group_is_its_own_switch(run_components):
    on = run_components(lambda: build(args()))
    pg = on.of_type(PG)
    assert len(pg) == 1 and pg[0].inputs["strategy"] == "cluster"
    assert on.of_type(LT)[0].inputs["placement"]["groupName"] == pg[0].state["name"]
    off = run_components(lambda: build(args(create_placement_group=False)))
    assert off.of_type(PG) == [] and "placement" not in off.of_type(LT)[0].inputs
    assert len(off.of_type(LT)[0].inputs["networkInterfaces"]) == 33  # EFA stays on
    existing = run_components(lambda: build(args(placement_group_name="reserved-pg")))
    assert existing.of_type(PG) == [] and existing.of_type(LT)[0].inputs["placement"]["groupName"] == "reserved-pg"


def test_auto_scaling_group_sizes_and_subnets(run_components):
    plan = run_components(lambda: build(args(min_size=2, desired_size=3, max_size=8)))
    asg = plan.of_type(ASG)[0].inputs
    assert (asg["minSize"], asg["desiredCapacity"], asg["maxSize"]) == (2, 3, 8)
    assert asg["vpcZoneIdentifiers"] == SUBNETS
    assert asg["launchTemplate"]["id"] == plan.of_type(LT)[0].id
    assert asg["waitForCapacityTimeout"] == "0"


def test_brought_instance_profile(run_components):
    arn = "arn:aws:iam::123456789012:instance-profile/mine"
    plan = run_components(lambda: build(args(instance_profile_arn=arn)))
    assert plan.of_type("aws:iam/role:Role") == []
    assert plan.of_type(LT)[0].inputs["iamInstanceProfile"] == {"arn": arn}


def test_tags_reach_instances_volumes_and_interfaces(run_components):
    plan = run_components(lambda: build(args(tags={"owner": "alice"})))
    lt = plan.of_type(LT)[0].inputs
    kinds = {ts["resourceType"]: ts["tags"] for ts in lt["tagSpecifications"]}
    assert set(kinds) == {"instance", "volume", "network-interface"}
    for tags in kinds.values():
        assert tags[CLUSTER_TAG] == "c" and tags[NODE_GROUP_TAG] == "gpu" and tags["owner"] == "alice"


def test_user_data_is_base64_of_the_text(run_components):
    plan = run_components(lambda: build(args(user_data="#cloud-config\nruncmd: []\n")))
    assert plan.files["c-gpu-lt/user-data"] == "#cloud-config\nruncmd: []\n"


def test_outputs_resolve(run_components):
    """Assert on the component's outputs inside Output.all, as a consumer would read them."""
    seen = {}

    def program():
        ng = build(args())
        pulumi.Output.all(ng.launch_template_id, ng.launch_template_version, ng.placement_group_name, ng.image_id).apply(
            lambda v: seen.update(lt=v[0], version=v[1], pg=v[2], ami=v[3])
        )

    run_components(program)
    assert seen["lt"].startswith("lt-") and seen["version"] == 1
    assert seen["pg"].startswith("c-gpu-pg-") and seen["ami"].startswith("ami-")


@pytest.mark.parametrize(
    "itype", ["p4d.24xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge", "trn1.32xlarge", "g6e.48xlarge"]
)
def test_efa_interfaces_match_catalog(run_components, catalog, itype):
    plan = run_components(lambda: build(args(instance_type=itype)))
    nics = plan.of_type(LT)[0].inputs["networkInterfaces"]
    efa = [n for n in nics if n["interfaceType"] == "efa-only"]
    assert len(efa) == len(catalog[itype].efa_cards)
    assert {n["networkCardIndex"] for n in efa} == {c.index for c in catalog[itype].efa_cards}


# --- Args: Outputs of other resources, the stack's defaults, errors before any resource -------------------


def test_outputs_of_other_resources_reach_the_launch_template_and_the_asg(run_components):
    """A reservation and subnets created in the same program, wired in as Outputs."""
    seen: dict[str, Any] = {}

    def program():
        vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
        subnet = aws.ec2.Subnet("s", vpc_id=vpc.id, cidr_block="10.0.0.0/20", availability_zone="us-east-1a")
        cr = aws.ec2.CapacityReservation(
            "cr", instance_type="p5.48xlarge", instance_platform="Linux/UNIX", availability_zone="us-east-1a", instance_count=2
        )
        subnets = pulumi.Output.all(subnet.id).apply(list)  # a whole list as one Output, as a VPC component gives it
        ng = build(
            args(
                subnet_ids=subnets,
                capacity={"type": "capacity-reservation", "reservation_id": cr.id},
                security_group_ids=[vpc.default_security_group_id],
            )
        )
        pulumi.Output.all(cr.id, subnet.id).apply(lambda v: seen.update(cr=v[0], subnet=v[1]))
        return ng

    plan = run_components(program)
    lt = plan.of_type(LT)[0].inputs
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == seen["cr"]
    assert seen["cr"].startswith("cr-") and "eeee" not in seen["cr"]  # the real id, not the stand-in
    assert plan.of_type(ASG)[0].inputs["vpcZoneIdentifiers"] == [seen["subnet"]]


WRONG_RESERVATION_PROGRAM = """
import pulumi_aws as aws
from gpucluster.components.compute.gpu_node_group import GpuNodeGroup
from gpucluster.tools.plan.run.engine import execute

def program():
    vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
    GpuNodeGroup("c-gpu", {"name": "gpu", "instance_type": "p5.48xlarge", "availability_zones": ["us-east-1a"],
                           "max_size": 2, "subnet_ids": ["subnet-0aaa1111"], "cluster_name": "c",
                           "security_group_ids": ["sg-0efa0000000000001"],
                           "capacity": {"type": "capacity-reservation", "reservation_id": vpc.id}})

try:
    execute(program, config={"aws:region": "us-east-1"})
except Exception as exc:
    print("ERROR:", exc)
"""


def test_an_output_that_is_not_a_reservation_fails_at_deploy_time_naming_the_field():
    # In a process of its own: a program failing inside an apply leaves Pulumi's runtime unusable.
    result = subprocess.run([sys.executable, "-c", WRONG_RESERVATION_PROGRAM], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "args.capacity.reservationId: 'vpc-" in result.stdout and "is not a capacity reservation id" in result.stdout


def test_same_defaults_as_the_stack(run_components):
    """A group used on its own resolves exactly as the same group in a stack (GpuCluster builds the stack's
    groups from this same resolved type, so equal types give equal resources)."""
    loaded = load_spec(make_config(group()), stack="t").spec  # a stack picks subnets from its network
    expected = resolve_node_group(loaded.node_groups[0], load_catalog(), loaded)
    seen = {}
    run_components(lambda: seen.setdefault("ng", build(args(tags={}))))
    own = seen["ng"].group
    assert own.spec.subnet_ids == tuple(SUBNETS)
    assert dataclasses.replace(own, spec=own.spec.model_copy(update={"subnet_ids": ()})) == expected
    assert (expected.desired_size, expected.efa, expected.create_placement_group, expected.scheduler) == (0, True, True, "none")
    assert expected.image.source == "ssm-parameter" and "deeplearning" in expected.image.value


def test_the_public_args_have_no_mode_flag():
    """Variants are components of their own; the public Args are the group's config and its wiring."""
    wiring = set(GpuNodeGroupArgs.__annotations__) - set(NodeGroupConfig.__annotations__)
    assert wiring == {"cluster_name", "security_group_ids", "user_data", "instance_profile_arn", "shared_storage"}
    assert all(GpuNodeGroupArgs.__annotations__[k] is not bool for k in wiring)
    old_flags = {"gzip_user_data", "create_auto_scaling_group", "include_subnet_in_interfaces", "expose_tags_in_metadata"}
    assert not old_flags & set(GpuNodeGroupArgs.__annotations__)


# --- the variants share one core ---------------------------------------------------------------------------


def test_asg_eks_and_slurm_variants_share_one_launch_template_core(run_components):
    catalog = load_catalog()
    loaded = load_spec(make_config(group(maxSize=4)), stack="t").spec.node_groups[0]
    resolved = resolve_node_group(loaded, catalog)

    def wiring() -> NodeWiring:
        return NodeWiring(cluster_name="c", subnet_ids=SUBNETS, security_group_ids=SG, user_data="#cloud-config\n")

    def program():
        build_node_group(part(TOKEN, "asg"), "asg", resolved, wiring(), ASG_SETTINGS, auto_scaling=True)
        EksNodeTemplate("eks", resolved, wiring())
        SlurmNodeGroup("slurm", resolved, wiring(), static=False)

    plan = run_components(program)
    lts = {r.name: r.inputs for r in plan.of_type(LT)}
    layouts = {
        n: [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in lt["networkInterfaces"]]
        for n, lt in lts.items()
    }
    assert layouts["asg-lt"] == layouts["eks-lt"] == layouts["slurm-lt"] and len(layouts["asg-lt"]) == 33
    assert {r.name for r in plan.of_type(ASG)} == {"asg-asg"}  # EKS and the Slurm agent launch the others
    # What each variant changes, and nothing else:
    eks, slurm, asg = lts["eks-lt"], lts["slurm-lt"], lts["asg-lt"]
    assert "imageId" not in eks and "iamInstanceProfile" not in eks and eks["blockDeviceMappings"][0]["deviceName"] == "/dev/xvda"
    assert plan.files["eks-lt/user-data"] == "#cloud-config\n" and "gzip" not in plan.files.get("eks-lt/user-data-encoding", "")
    assert slurm["metadataOptions"]["instanceMetadataTags"] == "enabled"
    assert asg["metadataOptions"]["instanceMetadataTags"] == "disabled"
    assert {r.type for r in plan.resources if r.name.startswith(("asg", "eks", "slurm")) and r.parent is None} <= {
        "gpucluster:index:GpuNodeGroup"
    }


def test_a_static_slurm_group_gets_an_auto_scaling_group(run_components):
    resolved = resolve_node_group(load_spec(make_config(group()), stack="t").spec.node_groups[0], load_catalog())
    plan = run_components(
        lambda: SlurmNodeGroup(
            "s", resolved, NodeWiring(cluster_name="c", subnet_ids=SUBNETS, security_group_ids=SG), static=True
        )
    )
    assert [r.name for r in plan.of_type(ASG)] == ["s-asg"]
