"""GpuNodeGroup under mocks: the launch template follows the instance's network cards."""

from __future__ import annotations

import pulumi
import pytest

from gpucluster.components.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from gpucluster.config.naming import CLUSTER_TAG, NODE_GROUP_TAG
from gpucluster.load import load_spec
from tests.conftest import group, make_config

SG = ["sg-0efa0000000000001", "sg-0node000000000002"]
SUBNETS = ["subnet-0aaa1111"]
LT = "aws:ec2/launchTemplate:LaunchTemplate"
ASG = "aws:autoscaling/group:Group"
PG = "aws:ec2/placementGroup:PlacementGroup"


def spec_of(**fields):
    return load_spec(make_config(group(**fields)), stack="t").spec.node_groups[0]


def build(node_group, **kwargs):
    args = dict(
        node_group=node_group, cluster_name="c", subnet_ids=SUBNETS, security_group_ids=SG, tags={CLUSTER_TAG: "c", "team": "ml"}
    )
    args.update(kwargs)
    return GpuNodeGroup("c-gpu", GpuNodeGroupArgs(**args))


def test_p5_launch_template_has_an_efa_interface_per_card(run_components):
    plan = run_components(lambda: build(spec_of(maxSize=16, minSize=16)))
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
    plan = run_components(lambda: build(spec_of()))
    lt = plan.of_type(LT)[0].inputs
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["metadataOptions"]["httpPutResponseHopLimit"] == 1
    ebs = lt["blockDeviceMappings"][0]["ebs"]
    assert (ebs["encrypted"], ebs["volumeType"], ebs["volumeSize"]) == ("true", "gp3", 200)
    assert "keyName" not in lt
    role = plan.of_type("aws:iam/role:Role")[0].inputs
    assert '"ec2.amazonaws.com"' in role["assumeRolePolicy"]
    policies = [r.inputs["policyArn"] for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")]
    assert policies == ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]


def test_capacity_reservation_targeted(run_components):
    plan = run_components(
        lambda: build(spec_of(capacity={"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0"}))
    )
    lt = plan.of_type(LT)[0].inputs
    assert lt["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "instanceMarketOptions" not in lt
    assert plan.of_type(PG) == []  # auto: no placement group for a reservation made outside it


def test_reservation_resource_group(run_components):
    arn = "arn:aws:resource-groups:us-east-1:123456789012:group/p5-odcrs"
    plan = run_components(lambda: build(spec_of(capacity={"type": "capacity-reservation", "resourceGroupArn": arn})))
    target = plan.of_type(LT)[0].inputs["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target == {"capacityReservationResourceGroupArn": arn}


def test_capacity_block(run_components):
    plan = run_components(lambda: build(spec_of(capacity={"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"})))
    lt = plan.of_type(LT)[0].inputs
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == "cr-0123456789abcdef0"
    assert plan.of_type(PG) == [] and "placement" not in lt


def test_spot(run_components):
    plan = run_components(lambda: build(spec_of(capacity={"type": "spot", "spotMaxPrice": 40.5})))
    market = plan.of_type(LT)[0].inputs["instanceMarketOptions"]
    assert market["marketType"] == "spot"
    assert market["spotOptions"]["maxPrice"] == "40.5"


def test_placement_group_is_its_own_switch(run_components):
    on = run_components(lambda: build(spec_of()))
    pg = on.of_type(PG)
    assert len(pg) == 1 and pg[0].inputs["strategy"] == "cluster"
    assert on.of_type(LT)[0].inputs["placement"]["groupName"] == pg[0].state["name"]
    off = run_components(lambda: build(spec_of(createPlacementGroup=False)))
    assert off.of_type(PG) == [] and "placement" not in off.of_type(LT)[0].inputs
    assert len(off.of_type(LT)[0].inputs["networkInterfaces"]) == 33  # EFA stays on
    existing = run_components(lambda: build(spec_of(placementGroupName="reserved-pg")))
    assert existing.of_type(PG) == [] and existing.of_type(LT)[0].inputs["placement"]["groupName"] == "reserved-pg"


def test_auto_scaling_group_sizes_and_subnets(run_components):
    plan = run_components(lambda: build(spec_of(minSize=2, desiredSize=3, maxSize=8)))
    asg = plan.of_type(ASG)[0].inputs
    assert (asg["minSize"], asg["desiredCapacity"], asg["maxSize"]) == (2, 3, 8)
    assert asg["vpcZoneIdentifiers"] == SUBNETS
    assert asg["launchTemplate"]["id"] == plan.of_type(LT)[0].id
    assert asg["waitForCapacityTimeout"] == "0"


def test_launch_template_only(run_components):
    plan = run_components(lambda: build(spec_of(), create_auto_scaling_group=False))
    assert plan.of_type(ASG) == [] and len(plan.of_type(LT)) == 1


def test_brought_instance_profile(run_components):
    arn = "arn:aws:iam::123456789012:instance-profile/mine"
    plan = run_components(lambda: build(spec_of(), instance_profile_arn=arn))
    assert plan.of_type("aws:iam/role:Role") == []
    assert plan.of_type(LT)[0].inputs["iamInstanceProfile"] == {"arn": arn}


def test_tags_reach_instances_volumes_and_interfaces(run_components):
    plan = run_components(lambda: build(spec_of(tags={"owner": "alice"})))
    lt = plan.of_type(LT)[0].inputs
    kinds = {ts["resourceType"]: ts["tags"] for ts in lt["tagSpecifications"]}
    assert set(kinds) == {"instance", "volume", "network-interface"}
    for tags in kinds.values():
        assert tags[CLUSTER_TAG] == "c" and tags[NODE_GROUP_TAG] == "gpu" and tags["team"] == "ml" and tags["owner"] == "alice"


def test_user_data_is_base64_of_the_text(run_components):
    plan = run_components(lambda: build(spec_of(), user_data="#cloud-config\nruncmd: []\n"))
    assert plan.files["c-gpu-lt/user-data"] == "#cloud-config\nruncmd: []\n"


def test_outputs_resolve(run_components):
    """Assert on the component's outputs inside Output.all, as a consumer would read them."""
    seen = {}

    def program():
        ng = build(spec_of())
        pulumi.Output.all(ng.launch_template_id, ng.launch_template_version, ng.placement_group_name, ng.image_id).apply(
            lambda v: seen.update(lt=v[0], version=v[1], pg=v[2], ami=v[3])
        )

    run_components(program)
    assert seen["lt"].startswith("lt-") and seen["version"] == 1
    assert seen["pg"].startswith("c-gpu-pg-") and seen["ami"].startswith("ami-")


def test_standalone_spec_is_resolved_here(run_components):
    """Used outside GpuCluster, a hand-built spec gets the same defaults as one from load_spec."""
    from gpucluster.config.node_group import NodeGroupSpec

    raw = NodeGroupSpec(name="x", instance_type="p5.48xlarge", availability_zones=("us-east-1a",), max_size=1)
    plan = run_components(lambda: build(raw))
    assert len(plan.of_type(LT)[0].inputs["networkInterfaces"]) == 33 and len(plan.of_type(PG)) == 1


def test_standalone_invalid_spec_raises_input_properties_error(run_components):
    from gpucluster.config.node_group import NodeGroupSpec

    raw = NodeGroupSpec(
        name="x", instance_type="g6e.xlarge", availability_zones=("us-east-1a",), max_size=1, min_size=3, enable_efa_support=True
    )
    with pytest.raises(pulumi.InputPropertiesError) as info:
        run_components(lambda: build(raw))
    paths = {e["property_path"] for e in info.value.errors or []}
    assert paths == {"node_group.enableEfaSupport", "node_group.minSize"}


@pytest.mark.parametrize(
    "itype", ["p4d.24xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge", "trn1.32xlarge", "g6e.48xlarge"]
)
def test_efa_interfaces_match_catalog(run_components, catalog, itype):
    plan = run_components(lambda: build(spec_of(instanceType=itype)))
    nics = plan.of_type(LT)[0].inputs["networkInterfaces"]
    efa = [n for n in nics if n["interfaceType"] == "efa-only"]
    assert len(efa) == len(catalog[itype].efa_cards)
    assert {n["networkCardIndex"] for n in efa} == {c.index for c in catalog[itype].efa_cards}


def test_tags_stay_out_of_instance_metadata_unless_asked(run_components):
    default = run_components(lambda: build(spec_of()))
    assert default.of_type(LT)[0].inputs["metadataOptions"]["instanceMetadataTags"] == "disabled"
    slurm = run_components(lambda: build(spec_of(), expose_tags_in_metadata=True))
    assert slurm.of_type(LT)[0].inputs["metadataOptions"]["instanceMetadataTags"] == "enabled"
