"""Login nodes under mocks: the Auto Scaling group and its lifecycle hook, the launch template, the role's policy
(nothing else), the security-group matrix (docs/slurm.md) exactly, and with SSH the load balancer's parts."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json

import pytest

from gpucluster.components._shared.build import part
from gpucluster.components.slurm.login_nodes import LoginWiring, build_login_nodes
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.iam import session_manager_policy
from gpucluster.resolve.compute.node_group import ResolvedImage
from gpucluster.resolve.slurm.identity import ResolvedLogin, ResolvedLoginSsh

ACCOUNT = "123456789012"
MUNGE = f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpucluster/p5/munge-AbCdEf"
PACKAGE = "arn:aws:s3:::p5-slurm-0a1b2c/agent/gpucluster_agents-0123456789abcdef.zip"
USERS = "arn:aws:s3:::p5-slurm-0a1b2c/users/users.json"
BIND = f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpucluster/ad-bind-AbCdEf"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
SG = "aws:ec2/securityGroup:SecurityGroup"
ASG = "aws:autoscaling/group:Group"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
USER_DATA = "#cloud-config\n# login\n"


def resolved(ssh: ResolvedLoginSsh | None = None, **changes) -> ResolvedLogin:
    login = ResolvedLogin(
        asg_name="p5-login",
        count=2,
        instance_type="m7i.2xlarge",
        facts=load_catalog()["m7i.2xlarge"],
        image=ResolvedImage(
            "ssm-parameter", "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
        ),
        subnets=("subnet-0aaa1111",),
        root_volume_gib=100,
        grace_seconds=600,
        srun_ports=(60001, 63000),
        ssh=ssh,
        zones=("us-east-1a",),
    )
    return dataclasses.replace(login, **changes)


SSH = ResolvedLoginSsh(allowed_cidrs=("10.20.0.0/16", "203.0.113.0/24"), scheme="internal", subnets=("subnet-0aaa1111",))


def _run(run_components, login: ResolvedLogin, **wiring):
    out = {}

    def program() -> None:
        parent = part("gpucluster:index:SlurmLoginNodes", "p5-slurm")
        out["parts"] = build_login_nodes(
            parent,
            "p5-slurm",
            login,
            LoginWiring(
                cluster="p5",
                region="us-east-1",
                partition="aws",
                account=ACCOUNT,
                vpc_id="vpc-0abc12345",
                subnet_ids=list(login.subnets),
                user_data=USER_DATA,
                munge_secret_arn=MUNGE,
                artifact_objects=[PACKAGE, USERS],
                tags={"gpucluster:cluster": "p5"},
                protect=True,
                **wiring,
            ),
        )

    plan = run_components(program)
    return plan, out["parts"]


def test_asg_lifecycle_hook_and_count(run_components) -> None:
    plan, parts = _run(run_components, resolved())
    (asg,) = plan.of_type(ASG)
    assert asg.inputs["name"] == "p5-login" == parts.asg_name
    assert "login" in asg.inputs["name"]
    assert asg.inputs["minSize"] == asg.inputs["maxSize"] == asg.inputs["desiredCapacity"] == 2
    assert asg.inputs["vpcZoneIdentifiers"] == ["subnet-0aaa1111"]
    assert asg.inputs["healthCheckType"] == "EC2"
    assert not asg.inputs.get("targetGroupArns")
    assert asg.inputs["initialLifecycleHooks"] == [
        {
            "name": "p5-login-grace",
            "lifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
            "heartbeatTimeout": 600,
            "defaultResult": "CONTINUE",
        }
    ]
    tags = {t["key"]: t["value"] for t in asg.inputs["tags"]}
    assert tags["gpucluster:role"] == "login" and tags["gpucluster:cluster"] == "p5"


def test_launch_template_imdsv2_encrypted_root_tags_and_user_data(run_components) -> None:
    plan, _ = _run(run_components, resolved(root_volume_gib=200))
    (lt,) = plan.of_type(LT)
    meta = lt.inputs["metadataOptions"]
    assert meta["httpTokens"] == "required" and meta["httpPutResponseHopLimit"] == 1
    (root,) = lt.inputs["blockDeviceMappings"]
    assert root["ebs"] == {"volumeSize": 200, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true"}
    assert gzip.decompress(base64.b64decode(lt.inputs["userData"])).decode() == USER_DATA
    specs = {s["resourceType"]: s["tags"] for s in lt.inputs["tagSpecifications"]}
    assert set(specs) == {"instance", "volume", "network-interface"}
    for tags in specs.values():
        assert tags["gpucluster:role"] == "login" and tags["gpucluster:cluster"] == "p5"
    login_sg = plan.by_name("p5-slurm-login", SG).state["id"]
    assert lt.inputs["vpcSecurityGroupIds"] == [login_sg]
    assert lt.inputs["instanceType"] == "m7i.2xlarge"


def _policies(plan, role: str) -> list[dict]:
    role_id = plan.by_name(role).state["id"]
    return [json.loads(r.inputs["policy"]) for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.inputs["role"] == role_id]


def test_login_role_has_exactly_its_policy(run_components) -> None:
    plan, _ = _run(run_components, resolved(ssh=SSH), bind_secret_arn=BIND)
    docs = _policies(plan, "p5-slurm-login-role")
    host_keys = plan.by_name("p5-slurm-login-host-keys").state["arn"]
    asg_arn = f"arn:aws:autoscaling:us-east-1:{ACCOUNT}:autoScalingGroup:*:autoScalingGroupName/p5-login"
    assert session_manager_policy() in docs
    (own,) = [d for d in docs if d != session_manager_policy()]
    assert own["Statement"] == [
        {
            "Sid": "ReadTheMungeKeyAndHostKeys",
            "Effect": "Allow",
            "Action": "secretsmanager:GetSecretValue",
            "Resource": [MUNGE, host_keys],
        },
        {
            "Sid": "DrainBeforeScaleIn",
            "Effect": "Allow",
            "Action": ["autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"],
            "Resource": asg_arn,
        },
        {"Sid": "FetchTheNodePackageAndUsers", "Effect": "Allow", "Action": "s3:GetObject", "Resource": [PACKAGE, USERS]},
        {"Sid": "ReadTheDirectoryBindPassword", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": BIND},
    ]
    role_id = plan.by_name("p5-slurm-login-role").state["id"]
    attached = [r for r in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if r.inputs["role"] == role_id]
    assert attached == []  # no managed policy (AmazonSSMManagedInstanceCore reads every parameter)


def _rules(plan) -> set[tuple]:
    """Every rule as (direction, group, peer group or CIDR, protocol, from, to), groups by resource name."""
    ids = {r.state["id"]: r.name.removeprefix("p5-slurm-") for r in plan.of_type(SG)}
    out = set()
    for direction, token in (("in", INGRESS), ("out", EGRESS)):
        for r in plan.of_type(token):
            i = r.inputs
            peer = ids.get(i.get("referencedSecurityGroupId")) or i.get("cidrIpv4")
            out.add((direction, ids[i["securityGroupId"]], peer, i["ipProtocol"], i.get("fromPort"), i.get("toPort")))
    return out


MATRIX = {
    ("in", "login-head", "login", "tcp", 6817, 6817),
    ("in", "login-head", "login", "tcp", 6819, 6819),
    ("out", "login", "login-head", "tcp", 6817, 6817),
    ("out", "login", "login-head", "tcp", 6819, 6819),
    ("in", "login", "login-head", "tcp", 60001, 63000),
    ("in", "login-compute", "login", "tcp", 6818, 6818),
    ("in", "login-compute", "login", "tcp", 22, 22),
    ("out", "login", "login-compute", "tcp", 6818, 6818),
    ("out", "login", "login-compute", "tcp", 22, 22),
    ("in", "login", "login-compute", "tcp", 60001, 63000),
    ("in", "login", "login-compute", "tcp", 6818, 6818),
    ("out", "login", "0.0.0.0/0", "tcp", 443, 443),
    ("out", "login", "0.0.0.0/0", "tcp", 80, 80),
    ("out", "login", "0.0.0.0/0", "udp", 53, 53),
    ("out", "login", "0.0.0.0/0", "tcp", 53, 53),
}


def test_security_groups_are_exactly_the_matrix(run_components) -> None:
    plan, _ = _run(run_components, resolved())
    assert _rules(plan) == MATRIX


def test_ssh_adds_only_the_balancers_rules_and_no_ingress_from_anywhere(run_components) -> None:
    plan, _ = _run(run_components, resolved(ssh=SSH))
    assert _rules(plan) - MATRIX == {
        ("in", "login-lb", "10.20.0.0/16", "tcp", 22, 22),
        ("in", "login-lb", "203.0.113.0/24", "tcp", 22, 22),
        ("out", "login-lb", "login", "tcp", 22, 22),
        ("in", "login", "login-lb", "tcp", 22, 22),
    }
    assert not [r for r in _rules(plan) if r[0] == "in" and r[2] in ("0.0.0.0/0", "::/0")]


@pytest.mark.parametrize("scheme", ["internal", "internet-facing"])
def test_balancer_scheme_target_group_and_listener(run_components, scheme) -> None:
    ssh = dataclasses.replace(SSH, scheme=scheme)
    plan, parts = _run(run_components, resolved(ssh=ssh), lb_subnet_ids=["subnet-0pub"])
    (lb,) = plan.of_type("aws:lb/loadBalancer:LoadBalancer")
    assert lb.inputs["name"] == "p5-login"
    assert lb.inputs["loadBalancerType"] == "network"
    assert lb.inputs["internal"] is (scheme == "internal")
    assert lb.inputs["subnets"] == ["subnet-0pub"]
    assert lb.inputs["securityGroups"] == [plan.by_name("p5-slurm-login-lb", SG).state["id"]]  # set at creation
    (tg,) = plan.of_type("aws:lb/targetGroup:TargetGroup")
    assert (tg.inputs["protocol"], tg.inputs["port"], tg.inputs["targetType"]) == ("TCP", 22, "instance")
    assert tg.inputs["healthCheck"]["protocol"] == "TCP"
    (listener,) = plan.of_type("aws:lb/listener:Listener")
    assert listener.inputs["defaultActions"] == [{"type": "forward", "targetGroupArn": tg.state["arn"]}]
    (asg,) = plan.of_type(ASG)
    assert asg.inputs["targetGroupArns"] == [tg.state["arn"]]
    assert asg.inputs["healthCheckType"] == "ELB"
    assert parts.ssh_endpoint is not None


def test_host_key_secret_protected_like_the_munge_key(run_components) -> None:
    plan, _ = _run(run_components, resolved(ssh=SSH))
    secret = plan.by_name("p5-slurm-login-host-keys")
    assert secret.inputs["name"] == "gpucluster/p5/login-host-keys"
    assert secret.inputs["recoveryWindowInDays"] == 30
    assert secret.protect and secret.retain_on_delete
    assert "secretString" not in secret.inputs  # empty: the head node fills it


def test_no_ssh_no_balancer_no_host_keys(run_components) -> None:
    plan, parts = _run(run_components, resolved())
    assert not plan.of_type("aws:lb/loadBalancer:LoadBalancer")
    assert not plan.of_type("aws:secretsmanager/secret:Secret")
    assert parts.ssh_endpoint is None and parts.host_key_secret_arn is None


def test_balancer_name_over_32_characters_refused(run_components) -> None:
    long = resolved(ssh=SSH, asg_name="a-cluster-name-of-thirty-chars-login")
    with pytest.raises(Exception, match="Elastic Load Balancing allows 32"):
        _run(run_components, long)


def test_every_taggable_child_tagged(run_components) -> None:
    plan, _ = _run(run_components, resolved(ssh=SSH))
    untagged = [
        r.name
        for r in plan.resources
        if "tags" in r.inputs and r.type != ASG and r.inputs["tags"].get("gpucluster:cluster") != "p5"
    ]
    assert untagged == []
