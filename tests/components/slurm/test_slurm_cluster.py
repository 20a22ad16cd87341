"""SlurmCluster under mocks: the head node, its least-privilege role, the munge key flow, the agent's
config and the compute node groups (dynamic: a launch template only; static: an Auto Scaling group)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json

import pytest
import yaml

from gpucluster.components._shared.agent_iam import LaunchScope, slurm_agent_policy
from gpucluster.components._shared.build import part
from gpucluster.components.gpu_cluster import TOKEN as CLUSTER_TOKEN
from gpucluster.components.gpu_cluster import build_gpu_cluster
from gpucluster.components.slurm._args import SlurmWiring
from gpucluster.components.slurm.slurm_cluster import TOKEN as SLURM_TOKEN
from gpucluster.components.slurm.slurm_cluster import build_slurm_cluster
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.naming import CLUSTER_TAG
from gpucluster.load import load_spec
from gpucluster.render.iam import session_manager_policy
from gpucluster.render.slurm.agent import ARTIFACT_BUCKET_STAND_IN
from gpucluster.render.slurm.names import controller_address, munge_secret_name
from gpucluster_agents.contract import parse as parse_config
from tests.conftest import ROOT, group, make_config

SUBNETS = ["subnet-0aaa1111"]
SG = ["sg-0efa0000000000001", "sg-0node000000000002"]
LT = "aws:ec2/launchTemplate:LaunchTemplate"
ASG = "aws:autoscaling/group:Group"
POLICY = "aws:iam/rolePolicy:RolePolicy"
LUSTRE = SharedStorage(
    "fsx", "lustre", "/fsx", "noatime,flock", "fs-0123.fsx.us-east-1.amazonaws.com", "abcdefgh", "fs-0123", 4800
)
DEV = {"name": "dev", "instanceType": "g6e.2xlarge", "availabilityZones": ["us-east-1a"], "minSize": 1, "maxSize": 2}


def spec_of(*groups, storage=None, **slurm):
    keys = {"slurm": slurm}
    if storage is not None:
        keys["storage"] = storage
    return load_spec(make_config(*(groups or (group(name="p5", maxSize=16),)), **keys), stack="s").cluster


def build(spec, shared_storage=(LUSTRE,), **extra):
    """``build_slurm_cluster`` of ``spec`` with stand-in wiring; ``extra``: more SlurmWiring fields (``people``)."""
    groups = spec.slurm.node_groups
    return build_slurm_cluster(
        part(SLURM_TOKEN, "s-slurm"),
        "s-slurm",
        spec,
        SlurmWiring(
            vpc_id="vpc-0abc12345",
            head_subnet_id=SUBNETS[0],
            node_group_subnet_ids={g.name: SUBNETS for g in groups},
            security_group_ids=SG,
            user_data={g.name: f"#cloud-config\n# {g.name}\n" for g in groups},
            shared_storage=shared_storage,
            tags={CLUSTER_TAG: "s", "team": "ml"},
            **extra,
        ),
    )


def policy(plan, name: str) -> dict:
    return json.loads(plan.by_name(name).inputs["policy"])


def head_files(plan, prefix: str = "s-slurm-head") -> dict[str, str]:
    """The head node's files: its user data's and its bundle's (``<prefix>-files``, render/slurm/headfiles.py)."""
    out: dict[str, str] = {}
    for owner in (prefix, prefix + "-files"):
        out.update(
            {
                p[len(owner) :]: t
                for p, t in plan.files.items()
                if p.startswith(owner + "/") and not p.endswith("/files-bundle.list")
            }
        )
    return out


@pytest.fixture(scope="module")
def two_groups():
    return spec_of(group(name="p5", maxSize=16), DEV, nodeGroups=[{"name": "dev", "mode": "static"}], accounting={})


def test_agent_policy_is_least_privilege(run_components, two_groups):
    plan = run_components(lambda: build(two_groups))
    lts = {r.name: r.id for r in plan.of_type(LT)}
    role = plan.by_name("s-slurm-node-role").state["arn"]
    arn = "arn:aws:ec2:us-east-1:123456789012"
    # only the dynamic group's template: the static group "dev" launches through its Auto Scaling group
    template = f"{arn}:launch-template/{lts['s-slurm-p5-lt']}"
    profile = plan.by_name("s-slurm-node-profile").state["arn"]
    tagged = {"aws:RequestTag/gpucluster:cluster": "s", "aws:RequestTag/gpucluster:node-group": ["p5"]}
    subnet = f"{arn}:subnet/{SUBNETS[0]}"
    assert policy(plan, "s-slurm-agent")["Statement"] == [
        {
            # the instance: from the dynamic group's template, tagged as the cluster's, its type, IMDSv2, the
            # compute nodes' profile
            "Sid": "LaunchOnlyTheClustersInstances",
            "Effect": "Allow",
            "Action": "ec2:RunInstances",
            "Resource": f"{arn}:instance/*",
            "Condition": {
                "ArnLike": {"ec2:LaunchTemplate": [template]},
                "StringEquals": {**tagged, "ec2:InstanceType": ["p5.48xlarge"], "ec2:MetadataHttpTokens": "required"},
                "ArnEquals": {"ec2:InstanceProfile": profile},
            },
        },
        {
            "Sid": "LaunchVolumesTaggedAsTheClusters",
            "Effect": "Allow",
            "Action": "ec2:RunInstances",
            "Resource": f"{arn}:volume/*",
            "Condition": {"StringEquals": tagged},
        },
        {
            "Sid": "LaunchInterfacesInTheClustersSubnets",
            "Effect": "Allow",
            "Action": "ec2:RunInstances",
            "Resource": f"{arn}:network-interface/*",
            "Condition": {"StringEquals": tagged, "ArnEquals": {"ec2:Subnet": [subnet]}},
        },
        {
            "Sid": "LaunchIntoTheClustersSubnetsAndSecurityGroups",
            "Effect": "Allow",
            "Action": "ec2:RunInstances",
            "Resource": [subnet, *(f"{arn}:security-group/{sg}" for sg in SG)],
        },
        {
            "Sid": "LaunchFromTheTemplates",
            "Effect": "Allow",
            "Action": "ec2:RunInstances",
            "Resource": [
                "arn:aws:ec2:us-east-1::image/*",
                "arn:aws:ec2:us-east-1::snapshot/*",
                f"{arn}:launch-template/*",
                f"{arn}:placement-group/*",
                f"{arn}:capacity-reservation/*",
                f"{arn}:key-pair/*",
            ],
        },
        {
            "Sid": "LaunchIntoCapacityGroups",
            "Effect": "Allow",
            "Action": "ec2:RunInstances",
            "Resource": "arn:aws:resource-groups:us-east-1:123456789012:group/*",
        },
        {
            "Sid": "NoOtherImageThanTheTemplates",
            "Effect": "Deny",
            "Action": "ec2:RunInstances",
            "Resource": "arn:aws:ec2:us-east-1::image/*",
            "Condition": {"Bool": {"ec2:IsLaunchTemplateResource": "false"}},
        },
        {
            "Sid": "InstantFleetsFromTheClustersTemplates",
            "Effect": "Allow",
            "Action": "ec2:CreateFleet",
            "Resource": [f"{arn}:fleet/*", template],
        },
        {
            "Sid": "InstantFleetInstancesAreTheClusters",
            "Effect": "Allow",
            "Action": "ec2:CreateFleet",
            "Resource": f"{arn}:instance/*",
            "Condition": {"StringEquals": tagged},
        },
        {
            "Sid": "InstantFleetLaunchResources",
            "Effect": "Allow",
            "Action": "ec2:CreateFleet",
            "Resource": [
                f"{arn}:volume/*",
                f"{arn}:network-interface/*",
                f"{arn}:subnet/*",
                f"{arn}:security-group/*",
                f"{arn}:placement-group/*",
                f"{arn}:capacity-reservation/*",
                f"{arn}:key-pair/*",
                f"{arn}:spot-instances-request/*",
                "arn:aws:ec2:us-east-1::image/*",
                "arn:aws:ec2:us-east-1::snapshot/*",
                "arn:aws:resource-groups:us-east-1:123456789012:group/*",
            ],
        },
        {
            "Sid": "TagWhileLaunching",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": [f"{arn}:instance/*", f"{arn}:volume/*", f"{arn}:network-interface/*"],
            "Condition": {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
        },
        {
            "Sid": "NameTheClustersInstances",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{arn}:instance/*",
            "Condition": {
                "StringEquals": {"ec2:ResourceTag/gpucluster:cluster": "s"},
                "ForAllValues:StringEquals": {"aws:TagKeys": ["gpucluster:node-name", "Name"]},
            },
        },
        {
            # the static group's instances belong to its Auto Scaling group: never terminated by the agent
            "Sid": "TerminateOnlyDynamicNodes",
            "Effect": "Allow",
            "Action": "ec2:TerminateInstances",
            "Resource": f"{arn}:instance/*",
            "Condition": {
                "StringEquals": {"ec2:ResourceTag/gpucluster:cluster": "s", "ec2:ResourceTag/gpucluster:node-group": ["p5"]}
            },
        },
        {
            # strays of a group the config removed: the launch-token tag only the agent's CreateFleet sets
            "Sid": "TerminateStraysTheAgentLaunched",
            "Effect": "Allow",
            "Action": "ec2:TerminateInstances",
            "Resource": f"{arn}:instance/*",
            "Condition": {
                "StringEquals": {"ec2:ResourceTag/gpucluster:cluster": "s"},
                "Null": {"ec2:ResourceTag/gpucluster:launch-token": "false"},
            },
        },
        {
            # the repair pass: one reboot for a reboot-class GPU fault, compute nodes only (never the head node)
            "Sid": "RebootTheClustersComputeNodes",
            "Effect": "Allow",
            "Action": "ec2:RebootInstances",
            "Resource": f"{arn}:instance/*",
            "Condition": {
                "StringEquals": {"ec2:ResourceTag/gpucluster:cluster": "s"},
                "Null": {"ec2:ResourceTag/gpucluster:node-group": "false"},
            },
        },
        {
            "Sid": "MarkStaticNodesUnhealthy",
            "Effect": "Allow",
            "Action": "autoscaling:SetInstanceHealth",
            "Resource": "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/*",
            "Condition": {"StringEquals": {"autoscaling:ResourceTag/gpucluster:cluster": "s"}},
        },
        {
            "Sid": "Describe",
            "Effect": "Allow",
            "Action": ["ec2:DescribeInstances", "ec2:DescribeInstanceTopology", "ec2:DescribeLaunchTemplateVersions"],
            "Resource": "*",
        },
        {
            "Sid": "PassTheNodeRoleToEc2",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": role,
            "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        },
    ]


def scope_of(groups, templates, **more):
    values = {
        "partition": "aws-us-gov",
        "region": "us-gov-west-1",
        "account": "123456789012",
        "cluster": "s",
        "groups": tuple(groups),
        "instance_types": tuple("p5.48xlarge" for _ in groups),
        "launch_template_ids": tuple(templates),
        "subnet_ids": ("subnet-0aaa",),
        "security_group_ids": ("sg-0aaa",),
        "node_role_arn": "arn:aws-us-gov:iam::123456789012:role/n",
        "node_profile_arn": "arn:aws-us-gov:iam::123456789012:instance-profile/n",
    }
    return LaunchScope(**{**values, **more})


def test_no_launch_grant_is_unscoped():
    """No CreateFleet or RunInstances grant on "*"; every one in this partition, region and account; the instances
    only with the cluster's request tags; the templates named are exactly the dynamic groups'."""
    from gpucluster_agents.contract import TAG_CLUSTER
    from gpucluster_agents.contract import TAG_NODE_GROUP as TAG_GROUP

    doc = slurm_agent_policy(scope_of(["p5", "h100"], ["lt-0aaa", "lt-0bbb"]))
    launch = [st for st in doc["Statement"] if st["Action"] in ("ec2:CreateFleet", "ec2:RunInstances")]
    assert len(launch) == 10 and all(st["Resource"] != "*" for st in launch)
    resources = [r for st in launch for r in ([st["Resource"]] if isinstance(st["Resource"], str) else st["Resource"])]
    assert all(
        r.startswith(("arn:aws-us-gov:ec2:us-gov-west-1:", "arn:aws-us-gov:resource-groups:us-gov-west-1:")) for r in resources
    )
    templates = [r for r in resources if ":launch-template/lt-" in r]
    assert templates == [
        "arn:aws-us-gov:ec2:us-gov-west-1:123456789012:launch-template/lt-0aaa",
        "arn:aws-us-gov:ec2:us-gov-west-1:123456789012:launch-template/lt-0bbb",
    ]
    instance = "arn:aws-us-gov:ec2:us-gov-west-1:123456789012:instance/*"
    for st in [st for st in launch if st["Resource"] == instance]:
        assert st["Effect"] == "Allow"
        assert {
            k: st["Condition"]["StringEquals"][k] for k in (f"aws:RequestTag/{TAG_CLUSTER}", f"aws:RequestTag/{TAG_GROUP}")
        } == {
            f"aws:RequestTag/{TAG_CLUSTER}": "s",
            f"aws:RequestTag/{TAG_GROUP}": ["p5", "h100"],
        }
    (run,) = [st for st in launch if st["Action"] == "ec2:RunInstances" and st["Resource"] == instance]
    assert run["Condition"]["ArnLike"] == {"ec2:LaunchTemplate": templates}


def test_the_agents_fleet_request_satisfies_the_fleet_statements(run_components, two_groups):
    """The request the agent builds from the config the head node gets names a template the policy
    allows, tags its instances as the instance statement requires and overrides no AMI."""
    from gpucluster_agents.power.ec2 import fleet_request

    plan = run_components(lambda: build(two_groups))
    statements = {st["Sid"]: st for st in policy(plan, "s-slurm-agent")["Statement"]}
    cfg = parse_config(json.loads(head_files(plan)["/etc/gpucluster/agent.json"]))
    (group,) = [g for g in cfg.node_groups if g.name == "p5"]
    req = fleet_request(cfg, group, 2, "tok")
    (spec,) = req["TagSpecifications"]
    assert spec["ResourceType"] == "instance"
    tags = {t["Key"]: t["Value"] for t in spec["Tags"]}
    for key, wanted in statements["InstantFleetInstancesAreTheClusters"]["Condition"]["StringEquals"].items():
        assert tags[key.removeprefix("aws:RequestTag/")] in (wanted if isinstance(wanted, list) else [wanted])
    (config,) = req["LaunchTemplateConfigs"]
    template = config["LaunchTemplateSpecification"]["LaunchTemplateId"]
    assert (
        f"arn:aws:ec2:us-east-1:123456789012:launch-template/{template}"
        in statements["InstantFleetsFromTheClustersTemplates"]["Resource"]
    )
    assert all("ImageId" not in o for o in config["Overrides"])


def test_a_static_only_cluster_cannot_launch_or_terminate():
    doc = slurm_agent_policy(scope_of([], []))
    actions = {st["Action"] if isinstance(st["Action"], str) else tuple(st["Action"]) for st in doc["Statement"]}
    # no launch, no terminate: only naming, the repair pass's reboot and Unhealthy mark, and describes
    assert actions == {
        "ec2:CreateTags",
        "ec2:RebootInstances",
        "autoscaling:SetInstanceHealth",
        ("ec2:DescribeInstances", "ec2:DescribeInstanceTopology", "ec2:DescribeLaunchTemplateVersions"),
    }


def test_munge_key_lives_only_in_an_empty_protected_secret(run_components, two_groups):
    plan = run_components(lambda: build(two_groups))
    (secret,) = plan.of_type("aws:secretsmanager/secret:Secret")
    assert secret.inputs["name"] == munge_secret_name("s") and secret.protect and secret.retain_on_delete
    assert secret.inputs["recoveryWindowInDays"] == 30
    # no secret value anywhere in the program: not in Pulumi state, not in user data
    assert plan.of_type("aws:secretsmanager/secretVersion:SecretVersion") == []
    assert not any(k in r.inputs for r in plan.resources for k in ("secretString", "secretBinary"))
    files = head_files(plan)
    assert not any("munge.key" in path for path in files)
    assert "put_secret_value(SecretId=secret, SecretBinary=os.urandom(1024))" in files["/usr/local/sbin/gpucluster-aws"]
    assert json.loads(files["/usr/local/sbin/gpucluster-aws.json"])["secret_name"] == munge_secret_name("s")
    # the head node may make and read it; compute nodes only read it; both only this secret
    arn = secret.state["arn"]
    head = policy(plan, "s-slurm-head-access")["Statement"][0]
    assert (head["Action"], head["Resource"]) == (
        ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"],
        arn,
    )
    package = plan.by_name("s-slurm-agent-package")
    assert policy(plan, "s-slurm-node-munge")["Statement"] == [
        {"Sid": "ReadTheMungeKey", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": arn},
        # the node package (the health program), that one object only
        {
            "Sid": "FetchTheNodePackage",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": f"{plan.by_name('s-slurm-artifacts').state['arn']}/{package.inputs['key']}",
        },
        # the launches' node maps, by key only (no s3:ListBucket: a node knows only its own launch's token)
        {
            "Sid": "ReadOwnLaunchsNodeMap",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": f"{plan.by_name('s-slurm-artifacts').state['arn']}/node-maps/*",
        },
    ]
    # the head node (the agent) writes them there, and nowhere else in the bucket; it reads them back (by key,
    # no s3:ListBucket) when its names.json is lost
    assert policy(plan, "s-slurm-head-access")["Statement"][2:] == [
        {
            "Sid": "PublishNodeMaps",
            "Effect": "Allow",
            "Action": "s3:PutObject",
            "Resource": f"{plan.by_name('s-slurm-artifacts').state['arn']}/node-maps/*",
        },
        {
            "Sid": "ReadNodeMapsBack",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": f"{plan.by_name('s-slurm-artifacts').state['arn']}/node-maps/*",
        },
        {  # the bundles of its own files (render/slurm/headfiles.py), read only; the compute role has no such right
            "Sid": "FetchItsFiles",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": f"{plan.by_name('s-slurm-artifacts').state['arn']}/head/*",
        },
        {  # the images' re-baseline figures (gpucluster_agents/power/baseline.py), by key
            "Sid": "KeepImageBaselines",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject"],
            "Resource": f"{plan.by_name('s-slurm-artifacts').state['arn']}/baselines/*",
        },
    ]
    # and that is all the compute role holds besides Session Manager (only root reaches it on a node:
    # the IMDS guard, tests/e2e/test_imds_guard_e2e.py)
    node_role = plan.by_name("s-slurm-node-role")
    inline = [r.name for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.inputs["role"] == node_role.id]
    attached = [
        r.inputs["policyArn"]
        for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.inputs["role"] == node_role.state["name"]
    ]
    # Session Manager's rights are a policy of our own: no managed policy, no ssm:GetParameter*
    assert (sorted(inline), attached) == (["s-slurm-node-munge", "s-slurm-node-ssm"], [])
    assert policy(plan, "s-slurm-node-ssm") == session_manager_policy()


def test_compute_nodes_name_the_artifact_bucket_once_it_exists(run_components, two_groups):
    """Compute user data is rendered before the bucket exists; the launch templates get its real name."""
    groups = two_groups.slurm.node_groups
    spec_data = {g.name: f"#cloud-config\n# {g.name} {ARTIFACT_BUCKET_STAND_IN}\n" for g in groups}
    plan = run_components(
        lambda: build_slurm_cluster(part(SLURM_TOKEN, "s-slurm"), "s-slurm", two_groups, _with_user_data(two_groups, spec_data))
    )
    bucket = plan.by_name("s-slurm-artifacts").state["bucket"]
    for lt in plan.of_type(LT):
        raw = base64.b64decode(lt.inputs["userData"])
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
        assert bucket in text and ARTIFACT_BUCKET_STAND_IN not in text, text


def _with_user_data(spec, user_data):
    groups = spec.slurm.node_groups
    return SlurmWiring(
        vpc_id="vpc-0abc12345",
        head_subnet_id=SUBNETS[0],
        node_group_subnet_ids={g.name: SUBNETS for g in groups},
        security_group_ids=SG,
        user_data=user_data,
        shared_storage=(LUSTRE,),
        tags={CLUSTER_TAG: "s", "team": "ml"},
    )


def test_head_node_is_private_protected_and_keeps_its_data(run_components, two_groups):
    plan = run_components(lambda: build(two_groups))
    (head,) = plan.of_type("aws:ec2/instance:Instance")
    i = head.inputs
    assert i["instanceType"] == "m7i.xlarge" and "keyName" not in i and "subnetId" not in i
    assert i["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
        "instanceMetadataTags": "disabled",
    }
    assert i["disableApiTermination"] is True
    assert i["rootBlockDevice"]["encrypted"] is True
    assert head.delete_before_replace and head.ignore_changes == ["ami"]
    (eni,) = plan.of_type("aws:ec2/networkInterface:NetworkInterface")
    assert i["networkInterfaces"] == [{"deviceIndex": 0, "networkInterfaceId": eni.id}]
    assert eni.inputs["subnetId"] == SUBNETS[0] and eni.inputs["securityGroups"] == SG
    (volume,) = plan.of_type("aws:ebs/volume:Volume")
    assert volume.protect and volume.retain_on_delete
    assert (volume.inputs["encrypted"], volume.inputs["type"], volume.inputs["size"], volume.inputs["finalSnapshot"]) == (
        True,
        "gp3",
        100,
        True,
    )
    (attach,) = plan.of_type("aws:ec2/volumeAttachment:VolumeAttachment")
    assert (attach.inputs["volumeId"], attach.inputs["instanceId"]) == (volume.id, head.id)
    assert head_files(plan)["/usr/local/sbin/gpucluster-slurm-head"].count(volume.id) >= 2
    # no ingress from anywhere: the head node is reached with Session Manager
    assert plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule") == []
    # no managed policy on a node's role; the one attachment is the image build instance's (docs/images.md)
    attachments = plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    assert [(a.name, a.inputs["policyArn"]) for a in attachments] == [
        ("s-slurm-build-imagebuilder", "arn:aws:iam::aws:policy/EC2InstanceProfileForImageBuilder")
    ]
    assert [policy(plan, n) for n in ("s-slurm-head-ssm", "s-slurm-node-ssm")] == [session_manager_policy()] * 2
    (record,) = plan.of_type("aws:route53/record:Record")
    assert record.inputs["name"] == controller_address("s") and record.inputs["records"] == [eni.state["privateIp"]]


def test_unprotected_stacks_can_be_destroyed(run_components):
    spec = spec_of(protectData=False)
    plan = run_components(lambda: build(spec))
    (volume,) = plan.of_type("aws:ebs/volume:Volume")
    (secret,) = plan.of_type("aws:secretsmanager/secret:Secret")
    assert not (volume.protect or volume.retain_on_delete or secret.protect or secret.retain_on_delete)
    assert secret.inputs["recoveryWindowInDays"] == 0 and volume.inputs["finalSnapshot"] is False


def test_agent_config_on_the_head_node_names_every_launch_template(run_components, two_groups):
    plan = run_components(lambda: build(two_groups))
    cfg = parse_config(json.loads(head_files(plan)["/etc/gpucluster/agent.json"]))  # the agent's own schema
    lts = {r.name: r for r in plan.of_type(LT)}
    p5, dev = cfg.node_groups
    assert (p5.name, p5.mode, p5.max_nodes, p5.launch_template_id) == ("p5", "dynamic", 16, lts["s-slurm-p5-lt"].id)
    assert (dev.name, dev.mode, dev.max_nodes, dev.launch_template_id) == ("dev", "static", 2, lts["s-slurm-dev-lt"].id)
    assert p5.launch_template_version == "$Default" and p5.subnet_ids == tuple(SUBNETS)
    pg = plan.of_type("aws:ec2/placementGroup:PlacementGroup")[0]
    assert p5.efa_enabled and p5.placement_group == pg.state["name"]
    assert cfg.cluster_name == "s" and cfg.state_dir == "/srv/slurm/agent"


def test_dynamic_groups_have_no_auto_scaling_group_static_ones_do(run_components, two_groups):
    plan = run_components(lambda: build(two_groups))
    (asg,) = plan.of_type(ASG)
    assert (asg.inputs["minSize"], asg.inputs["maxSize"], asg.inputs["desiredCapacity"]) == (1, 2, 1)
    lts = {r.name: r.inputs for r in plan.of_type(LT)}
    assert asg.inputs["launchTemplate"]["id"] == plan.by_name("s-slurm-dev-lt").id
    profile = plan.by_name("s-slurm-node-profile").state["arn"]
    for lt in lts.values():
        # nodes read the name the agent tags them with from instance metadata
        assert lt["metadataOptions"]["instanceMetadataTags"] == "enabled"
        assert lt["iamInstanceProfile"]["arn"] == profile


def test_head_node_files_and_lustre_mount(run_components, two_groups):
    plan = run_components(lambda: build(two_groups))
    files = head_files(plan)
    for path in (
        "/etc/slurm/slurm.conf",
        "/etc/slurm/gres.conf",
        "/etc/slurm/cgroup.conf",
        "/etc/slurm/slurmdbd.conf",
        "/var/lib/gpucluster/slurm/topology.conf",
        "/etc/gpucluster/agent.json",
        "/opt/gpucluster/bin/slurm-resume",
        "/etc/systemd/system/gpucluster-agent-maintain.timer",
    ):
        assert path in files, path
    assert "dns=fs-0123.fsx.us-east-1.amazonaws.com" in files["/usr/local/sbin/gpucluster-mount-lustre"]
    # the head node's user data goes to EC2 gzipped (cloud-init unpacks it); EC2 takes 16 KB of it
    raw = base64.b64decode(plan.of_type("aws:ec2/instance:Instance")[0].inputs["userDataBase64"])
    assert len(raw) <= 16384 and gzip.decompress(raw).decode() == plan.files["s-slurm-head/user-data"]
    obj = plan.by_name("s-slurm-agent-package")
    sha = obj.inputs["contentBase64"].split("sha256 ")[1].rstrip(">")
    bucket = plan.by_name("s-slurm-artifacts").state["bucket"]
    assert json.loads(files["/etc/gpucluster/agent-package.json"]) == {
        "bucket": bucket,
        "key": obj.inputs["key"],
        "sha256": sha,
        "dest": "/opt/gpucluster/lib",
    }
    assert "install-agent" in files["/usr/local/sbin/gpucluster-slurm-head"]
    head = policy(plan, "s-slurm-head-access")["Statement"][1]
    assert head["Resource"] == f"{plan.by_name('s-slurm-artifacts').state['arn']}/{obj.inputs['key']}"


def test_head_node_files_ride_in_the_artifact_bucket(run_components, two_groups):
    """The head node's files (but the few that fetch them) are one JSON object in the artifact bucket, under a key that
    carries its hash; the user data names that key and hash; the instance waits for the object; only the head node's
    role may read ``head/*``."""
    plan = run_components(lambda: build(two_groups))
    obj = plan.by_name("s-slurm-head-files")
    artifacts = plan.by_name("s-slurm-artifacts")
    text = obj.inputs["content"]
    if text.startswith("<"):  # the plan shows a large bundle as its size and sha256; its files are in plan.files
        sha = text.split("sha256 ")[1].rstrip(">")
    else:
        sha = hashlib.sha256(text.encode()).hexdigest()
    assert (obj.inputs["bucket"], obj.inputs["contentType"]) == (artifacts.id, "application/json")
    assert obj.inputs["key"] == f"head/files-{sha[:16]}.json"
    user_data = plan.files["s-slurm-head/user-data"]
    written = {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}
    pointer = json.loads(written["/etc/gpucluster/head-files.json"])
    assert pointer == {"bucket": artifacts.state["bucket"], "key": obj.inputs["key"], "sha256": sha}
    assert json.loads(head_files(plan)["/usr/local/sbin/gpucluster-aws.json"])["head_files"] == "/etc/gpucluster/head-files.json"
    head = plan.by_name("s-slurm-head", "aws:ec2/instance:Instance")
    assert obj.urn in head.dependencies and plan.by_name("s-slurm-agent-package").urn in head.dependencies
    # slurm.conf rides in the bundle, not in the user data
    assert "/etc/slurm/slurm.conf" not in user_data and "s-slurm-head-files/etc/slurm/slurm.conf" in plan.files
    arn = artifacts.state["arn"]
    reads = [s["Resource"] for s in policy(plan, "s-slurm-head-access")["Statement"] if s["Sid"] == "FetchItsFiles"]
    assert reads == [f"{arn}/head/*"]
    node = [s["Resource"] for s in policy(plan, "s-slurm-node-munge")["Statement"] if "s3:GetObject" in str(s["Action"])]
    assert node and not any(r.startswith(f"{arn}/head/") or r in (f"{arn}/*", "*") for r in node), node
    # and no other role's policy in the cluster names the bundles (or the whole bucket)
    grants = [r.name for r in plan.of_type(POLICY) if f"{arn}/head/" in r.inputs["policy"] or f'"{arn}/*"' in r.inputs["policy"]]
    assert grants == ["s-slurm-head-access"]


def test_gpu_cluster_wires_slurm_like_eks(run_components):
    spec = spec_of(
        group(name="p5", maxSize=4),
        DEV,
        nodeGroups=[{"name": "dev", "mode": "static"}],
        storage={"lustre": {"storageCapacityGib": 2400, "throughputPerUnitStorage": 250}},
    )
    plan = run_components(lambda: build_gpu_cluster(part(CLUSTER_TOKEN, "s"), "s", spec))
    slurm = plan.by_name("s-slurm")
    assert {r.name for r in plan.children(slurm.urn) if not r.custom} == {"s-slurm-p5", "s-slurm-dev", "s-slurm-agent-teardown"}
    # compute user data: the node's own parts (NCCL, the Lustre mount) and then slurmd, pointed at the controller
    p5 = plan.files["s-slurm-p5-lt/user-data"]
    assert "# Parts: node facts, nccl/efa environment, lustre mount, slurmd (configless)" in p5
    node = plan.files["s-slurm-p5-lt/usr/local/sbin/gpucluster-slurm-node"]
    assert f"--conf-server {controller_address('s')}:6817 -N $node" in node
    assert plan.files["s-slurm-p5-lt/etc/gpucluster/slurm/task-prolog"].startswith("#!/bin/sh")
    # the file system's real DNS name reaches the head node too
    fs = plan.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")[0]
    assert f"dns={fs.state['dnsName']}" in head_files(plan, "s-slurm-head")["/usr/local/sbin/gpucluster-mount-lustre"]


def test_the_slurm_side_writes_no_iam_document_of_its_own():
    """Every IAM document of the Slurm cluster is in gpucluster/render/iam.py (the agent's in
    components/_shared/agent_iam.py), where they are reviewed together: the cluster and its private parts only call
    those functions."""
    modules = sorted((ROOT / "components" / "slurm").glob("*.py"))
    assert len(modules) >= 3
    for path in modules:
        source = path.read_text()
        for marker in ("2012-10-17", '"Statement"', '"Effect"', "sts:AssumeRole"):
            assert marker not in source, f"{path.name} writes an IAM document ({marker}): put it in gpucluster/render/iam.py"
    iam = (ROOT / "gpucluster" / "render" / "iam.py").read_text() + (ROOT / "components" / "_shared" / "agent_iam.py").read_text()
    assert all(f"def slurm_{kind}_policy(" in iam for kind in ("agent", "head", "node"))


def test_the_head_node_serves_the_job_container_conf_of_the_groups_with_scratch(run_components):
    """Compute nodes fetch job_container.conf from slurmctld (configless): the head node's copy must put each NVMe
    scratch group's private /tmp on its scratch. The builder once made its own Slurm context without the scratch
    groups, so the head node served the /tmp default to every node; it now renders from the resolved cluster."""
    spec = spec_of(
        group(name="p5", maxSize=2),
        DEV,
        nodeGroups=[{"name": "dev", "mode": "static"}],
        storage={"nvmeScratch": {"mountPoint": "/scratch", "nodeGroups": ["p5"]}},
    )
    plan = run_components(lambda: build_gpu_cluster(part(CLUSTER_TOKEN, "s"), "s", spec))
    conf = next(text for path, text in head_files(plan).items() if path.endswith("/job_container.conf"))
    assert "NodeName=p5-[1-2] BasePath=/scratch/slurm-job-tmp AutoBasePath=true" in conf.splitlines()
    assert not [line for line in conf.splitlines() if line.startswith("NodeName=dev")]
