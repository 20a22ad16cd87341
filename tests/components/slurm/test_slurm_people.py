"""People wired into the Slurm cluster's builder: role tags on head and compute,
the matrix's head and compute sides on their nodes, sessions, home, login nodes, the bind password on every node
role and the host keys on the head's."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpucluster.components._shared.build import part
from gpucluster.components.slurm._people import People
from tests.components.slurm.test_login_nodes import SSH, resolved
from tests.components.slurm.test_sessions import DECLARED, DIRECTORY
from tests.components.slurm.test_slurm_cluster import SG, SUBNETS, build, spec_of
from tests.components.storage.test_home_storage import HOME

BIND = DIRECTORY.source.bind_password_secret_arn  # type: ignore[union-attr]
LT = "aws:ec2/launchTemplate:LaunchTemplate"
ENI = "aws:ec2/networkInterface:NetworkInterface"


@pytest.fixture(scope="module")
def spec():
    return spec_of()


def _build(run_components, spec, people: People):
    out = {}

    def program() -> None:
        out["parts"] = build(spec, people=people)

    return run_components(program), out["parts"]


FULL = People(
    identity=DIRECTORY,
    login=dataclasses.replace(resolved(ssh=SSH), asg_name="s-login"),
    home=dataclasses.replace(HOME, quotas=()),
    vpc_cidr="10.0.0.0/16",
    login_subnet_ids=SUBNETS,
    home_subnet_id=SUBNETS[0],
    login_user_data="#cloud-config\n# login\n",
)


def _role_docs(plan, role: str) -> list[dict]:
    role_id = plan.by_name(role).state["id"]
    return [json.loads(r.inputs["policy"]) for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.inputs["role"] == role_id]


def _statements(plan, role: str) -> list[dict]:
    return [s for d in _role_docs(plan, role) for s in d["Statement"]]


def test_role_tags_on_head_and_compute_without_people(run_components, spec) -> None:
    plan, _ = _build(run_components, spec, People())
    assert plan.by_name("s-slurm-head").inputs["tags"]["gpucluster:role"] == "head"
    for lt in plan.of_type(LT):
        specs = {s["resourceType"]: s["tags"] for s in lt.inputs["tagSpecifications"]}
        assert specs["instance"]["gpucluster:role"] == "compute"
    assert not plan.of_type("aws:ssm/document:Document") and not plan.of_type("aws:autoscaling/group:Group")
    assert plan.by_name("s-slurm-head-eni", ENI).inputs["securityGroups"] == SG  # unchanged without people


def test_people_wired(run_components, spec) -> None:
    plan, parts = _build(run_components, spec, FULL)
    sg = {r.name: r.state["id"] for r in plan.of_type("aws:ec2/securityGroup:SecurityGroup")}
    # the matrix's sides on the head and compute nodes
    assert plan.by_name("s-slurm-head-eni", ENI).inputs["securityGroups"] == [*SG, sg["s-slurm-login-head"]]
    for lt in plan.of_type(LT):
        if lt.name.endswith("-login-lt"):
            continue
        (nic, *_) = lt.inputs["networkInterfaces"]
        assert sg["s-slurm-login-compute"] in nic["securityGroups"], lt.name
    # sessions, login nodes, home
    assert [r.inputs["name"] for r in plan.of_type("aws:ssm/document:Document")] == ["s-session"]
    assert plan.by_name("s-slurm-login-asg").inputs["name"] == "s-login"
    assert plan.of_type("aws:fsx/openZfsFileSystem:OpenZfsFileSystem")
    assert parts.session_commands["*"].startswith("aws ssm start-session --document-name s-session ")
    assert parts.home_storage is not None and parts.home_storage.mount_point == "/home"
    # the bind password on every node role, exactly that secret
    read_bind = {
        "Sid": "ReadTheDirectoryBindPassword",
        "Effect": "Allow",
        "Action": "secretsmanager:GetSecretValue",
        "Resource": BIND,
    }
    for role in ("s-slurm-head-role", "s-slurm-node-role", "s-slurm-login-role"):
        assert read_bind in _statements(plan, role), role
    # the head fills the host keys; the login role only reads them
    host_keys = plan.by_name("s-slurm-login-host-keys").state["arn"]
    head = [s for s in _statements(plan, "s-slurm-head-role") if s.get("Resource") == host_keys]
    assert head == [
        {
            "Sid": "MakeTheLoginHostKeys",
            "Effect": "Allow",
            "Action": ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"],
            "Resource": host_keys,
        }
    ]
    home_sg = sg["s-slurm-home-sg"]
    sources = {
        r.inputs["referencedSecurityGroupId"]
        for r in plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs["securityGroupId"] == home_sg
    }
    assert sources == {sg["s-slurm-login"], sg["s-slurm-login-head"], sg["s-slurm-login-compute"]}


def test_declared_identity_no_bind_statement(run_components, spec) -> None:
    plan, _ = _build(run_components, spec, People(identity=DECLARED))
    for role in ("s-slurm-head-role", "s-slurm-node-role"):
        assert not [s for s in _statements(plan, role) if "Bind" in s.get("Sid", "")]
    assert {r.inputs["name"] for r in plan.of_type("aws:iam/policy:Policy")} >= {"s-session-alice", "s-login-sessions"}


def test_login_user_data_rendered_by_the_builder(run_components, spec) -> None:
    import base64
    import gzip

    from gpucluster.render.slurm.agent import ARTIFACT_BUCKET_STAND_IN

    plan, _ = _build(run_components, spec, dataclasses.replace(FULL, login_user_data=None))
    lt = plan.by_name("s-slurm-login-lt")
    text = gzip.decompress(base64.b64decode(lt.inputs["userData"])).decode()
    fs = plan.of_type("aws:fsx/openZfsFileSystem:OpenZfsFileSystem")[0]
    host_keys = plan.by_name("s-slurm-login-host-keys").state["arn"]
    assert "sackd" in text and '"asg_name": "s-login"' in text and '"hook_name": "s-login-grace"' in text
    assert fs.state["dnsName"] in text  # the home mount
    assert host_keys in text  # the shared host keys (SSH)
    assert ARTIFACT_BUCKET_STAND_IN not in text and "000000000000" not in text  # stand-ins replaced


def test_gpu_cluster_passes_the_resolved_people(run_components) -> None:
    from gpucluster.components.gpu_cluster import TOKEN as CLUSTER_TOKEN
    from gpucluster.components.gpu_cluster import build_gpu_cluster
    from gpucluster.load import load_spec
    from gpucluster.program import slurm_outputs
    from tests.conftest import IDENTITY_DECLARED, identity_config

    spec = load_spec(identity_config(IDENTITY_DECLARED), stack="people").cluster
    outputs = {}

    def program() -> None:
        parts = build_gpu_cluster(part(CLUSTER_TOKEN, "people"), "people", spec)
        assert parts.slurm is not None and spec.slurm is not None
        outputs.update(slurm_outputs(parts.slurm, spec.slurm, "us-east-1"))

    plan = run_components(program)
    cluster = spec.spec.name
    assert outputs["sessionDocuments"] == {"*": f"{cluster}-session", "alice": f"{cluster}-session-alice"}
    assert set(outputs["sessionPolicyArns"]) == {"login", "admin", "alice"}
    assert outputs["sessionCommands"]["alice"].startswith(f"aws ssm start-session --document-name {cluster}-session-alice ")
    assert "loginAsgName" not in outputs
    docs = sorted(r.inputs["name"] for r in plan.of_type("aws:ssm/document:Document"))
    assert docs == [f"{cluster}-session", f"{cluster}-session-alice"]  # alice has a principal, bob and carol none
    (vol,) = plan.of_type("aws:fsx/openZfsVolume:OpenZfsVolume")
    assert {q["id"] for q in vol.inputs["userAndGroupQuotas"]} == {10001, 10002, 10003}
    (fs,) = plan.of_type("aws:fsx/openZfsFileSystem:OpenZfsFileSystem")
    vpc = plan.of_type("aws:ec2/vpc:Vpc")[0]
    assert fs.inputs["rootVolumeConfiguration"]["nfsExports"]["clientConfigurations"][0]["clients"] == vpc.inputs["cidrBlock"]
    assert not plan.of_type("aws:autoscaling/group:Group")  # no login nodes configured


def test_gpu_cluster_plans_login_nodes(run_components) -> None:
    from gpucluster.components.gpu_cluster import TOKEN as CLUSTER_TOKEN
    from gpucluster.components.gpu_cluster import build_gpu_cluster
    from gpucluster.load import load_spec
    from tests.conftest import identity_declared_config

    spec = load_spec(identity_declared_config(), stack="people").cluster
    plan = run_components(lambda: build_gpu_cluster(part(CLUSTER_TOKEN, "people"), "people", spec))
    (asg,) = [r for r in plan.of_type("aws:autoscaling/group:Group") if r.inputs.get("name") == f"{spec.spec.name}-login"]
    assert asg.inputs["desiredCapacity"] == 2
    subnets = {r.state["id"] for r in plan.of_type("aws:ec2/subnet:Subnet") if not r.inputs.get("mapPublicIpOnLaunch")}
    assert set(asg.inputs["vpcZoneIdentifiers"]) <= subnets  # private subnets of the new VPC
    # every node mounts the real home file system: render's stand-in DNS name replaced
    import base64
    import gzip

    dns = plan.of_type("aws:fsx/openZfsFileSystem:OpenZfsFileSystem")[0].state["dnsName"]
    for lt in plan.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        text = gzip.decompress(base64.b64decode(lt.inputs["userData"])).decode()
        assert dns in text and "fs-00000000000000000" not in text, lt.name
    # the head node's files ride in its bundle (render/slurm/headfiles.py), which its user data names by hash
    bundle = next(r for r in plan.of_type("aws:s3/bucketObjectv2:BucketObjectv2") if r.name.endswith("-slurm-head-files"))
    assert dns in bundle.inputs["content"] and "fs-00000000000000000" not in bundle.inputs["content"]


def test_slurm_cluster_args_people_reach_the_builder(run_components) -> None:
    from gpucluster.components.slurm.slurm_cluster import SlurmCluster
    from tests.components.slurm.test_slurm_cluster_args import minimal

    identity = {
        "admin_group": "hpc-admins",
        "groups": [{"name": "hpc-admins", "gid": 5000}],
        "users": [
            {"name": "alice", "uid": 10001, "groups": ["hpc-admins"], "session_principal": "arn:aws:iam::123456789012:role/alice"}
        ],
    }
    plan = run_components(lambda: SlurmCluster("s-slurm", minimal(identity=identity)))
    assert sorted(r.inputs["name"] for r in plan.of_type("aws:ssm/document:Document")) == ["s-session", "s-session-alice"]
    (fs,) = plan.of_type("aws:fsx/openZfsFileSystem:OpenZfsFileSystem")
    assert fs.inputs["subnetIds"] == ["subnet-0aaa1111"]
    clients = fs.inputs["rootVolumeConfiguration"]["nfsExports"]["clientConfigurations"][0]["clients"]
    assert clients and clients != "0.0.0.0/0"  # the VPC's CIDR, looked up


def test_login_nodes_get_the_lustre_client_rules(run_components, spec) -> None:
    lustre = "sg-0lustre000000001"
    plan, _ = _build(run_components, spec, dataclasses.replace(FULL, lustre_security_group_id=lustre))
    login = plan.by_name("s-slurm-login", "aws:ec2/securityGroup:SecurityGroup").state["id"]
    rules = set()
    for token, direction in (
        ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "in"),
        ("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", "out"),
    ):
        for r in plan.of_type(token):
            i = r.inputs
            if {i["securityGroupId"], i.get("referencedSecurityGroupId")} == {login, lustre}:
                rules.add((direction, i["securityGroupId"] == lustre, i["fromPort"], i["toPort"]))
    ports = [(988, 988), (1018, 1023)]
    assert rules == {(d, on_fs, lo, hi) for d in ("in", "out") for on_fs in (True, False) for lo, hi in ports}


def test_gpu_cluster_directory_with_internal_ssh(run_components) -> None:
    from gpucluster.components.gpu_cluster import TOKEN as CLUSTER_TOKEN
    from gpucluster.components.gpu_cluster import build_gpu_cluster
    from gpucluster.load import load_spec
    from tests.conftest import identity_directory_config

    spec = load_spec(identity_directory_config(), stack="people-ad").cluster
    name = spec.spec.name
    plan = run_components(lambda: build_gpu_cluster(part(CLUSTER_TOKEN, "ad"), "ad", spec))
    (lb,) = plan.of_type("aws:lb/loadBalancer:LoadBalancer")
    assert (lb.inputs["name"], lb.inputs["internal"]) == (f"{name}-login", True)
    assert [r.inputs["name"] for r in plan.of_type("aws:ssm/document:Document")] == [f"{name}-session"]
    assert {r.inputs["name"] for r in plan.of_type("aws:iam/policy:Policy")} == {
        f"{name}-login-sessions",
        f"{name}-admin-sessions",
    }
    assert not plan.of_type("aws:fsx/openZfsVolume:OpenZfsVolume")[0].inputs.get("userAndGroupQuotas")  # uids unknown
