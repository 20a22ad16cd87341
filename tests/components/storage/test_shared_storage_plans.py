"""Over the plan of every shipped stack (docs/storage.md, "Security"): no FSx for Lustre without root squash, no Lustre mount
without nosuid,nodev (fstab in every user data, every PersistentVolume), each team's volume its own directory, and an
admin host for every file system: the Slurm head node, or the sealed storage setup host."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpucluster.config.kubernetes import TeamSpec
from gpucluster.policy.mounts import lustre_mounts
from gpucluster.policy.rules import _USER_DATA_PROPS
from gpucluster.policy.userdata import decode
from gpucluster.resolve.storage.team import team_owner
from gpucluster.tools.plan.run.engine import Plan
from gpucluster.tools.plan.run.stackfile import stack_names
from tests.conftest import plan_config
from tests.plans import shipped_plan

FS = "aws:fsx/lustreFileSystem:LustreFileSystem"
PV = "kubernetes:core/v1:PersistentVolume"
ENI = "aws:ec2/networkInterface:NetworkInterface"
INSTANCE = "aws:ec2/instance:Instance"
STACKS = stack_names()


@pytest.fixture(scope="module")
def plans() -> dict[str, Plan]:
    out = {s: shipped_plan(s) for s in STACKS}
    for stack, plan in out.items():
        assert plan.ok, f"{stack}: {plan.error}"
    return out


def user_data_texts(plan: Plan) -> list[tuple[str, list[tuple[str, str]]]]:
    out = []
    for r in plan.resources:
        for prop, encoded in _USER_DATA_PROPS.get(r.type, ()):
            value = r.inputs.get(prop)
            if isinstance(value, str):
                out.append((r.name, decode(value, base64_encoded=encoded)))
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_file_system_squashes_root_and_names_its_admin_host(stack, plans):
    plan = plans[stack]
    for fs in plan.of_type(FS):
        squash = fs.inputs["rootSquashConfiguration"]
        assert squash["rootSquash"] == "65534:65534", stack
        enis = {r.name: r.state["privateIp"] for r in plan.of_type(ENI)}
        admins = [ip for name, ip in enis.items() if name.endswith(("-slurm-head-eni", "-lustre-setup-eni"))]
        assert admins, f"{stack}: a root-squashed file system needs an admin host"
        assert sorted(squash["noSquashNids"]) == sorted(f"{ip}@tcp" for ip in admins)


@pytest.mark.parametrize("stack", STACKS)
def test_every_lustre_mount_in_user_data_is_nosuid_nodev(stack, plans):
    plan = plans[stack]
    found = 0
    for name, texts in user_data_texts(plan):
        for mount in lustre_mounts(texts):
            found += 1
            assert mount.missing() == [], f"{stack}: {name} mounts {mount.target} with {mount.options}"
    if plan.of_type(FS) and stack != "eks-p5":  # eks-p5's nodes reach the file system through the CSI driver only
        assert found, f"{stack}: no Lustre mount found in its user data"
    if stack == "eks-p5":
        assert found, "the storage setup host mounts it"


@pytest.mark.parametrize("stack", STACKS)
def test_every_fsx_volume_is_a_teams_own_directory_nosuid_nodev(stack, plans):
    plan = plans[stack]
    pvs = [r for r in plan.of_type(PV) if r.inputs["spec"].get("csi", {}).get("driver") == "fsx.csi.aws.com"]
    if stack == "eks-p5":
        assert len(pvs) == 2
    mount_name = {fs.state.get("mountName") for fs in plan.of_type(FS)}
    handles, paths = set(), set()
    for pv in pvs:
        spec = pv.inputs["spec"]
        team = pv.inputs["metadata"]["labels"]["gpucluster/team"]
        assert spec["mountOptions"][-2:] == ["nosuid", "nodev"]
        attrs = spec["csi"]["volumeAttributes"]
        assert re.fullmatch(rf"[^/]+/teams/{team}", attrs["mountname"]) and attrs["mountname"].split("/")[0] in mount_name
        assert spec["csi"]["volumeHandle"].endswith(f"/teams/{team}")
        handles.add(spec["csi"]["volumeHandle"])
        paths.add((attrs["dnsname"], attrs["mountname"]))
    assert len(handles) == len(paths) == len(pvs)


def setup_host(plan: Plan) -> Any:
    hosts = [r for r in plan.of_type(INSTANCE) if r.name.endswith("-lustre-setup")]
    return hosts[0] if hosts else None


@pytest.mark.parametrize("stack", STACKS)
def test_the_setup_host_is_sealed_small_and_replaced_when_its_work_changes(stack, plans):
    plan = plans[stack]
    host = setup_host(plan)
    has_head = any(r.name.endswith("-slurm-head") for r in plan.of_type(INSTANCE))
    fs = plan.of_type(FS)
    if stack in ("eks-p5", "p5-training", "hybrid-slurm"):  # teams' or declared directories, no head node
        assert host is not None
    if not fs or has_head:  # slurm-p5, slurm-directory
        assert host is None, f"{stack}: nothing to create, or the head node is the admin host"
        return
    assert host is not None and not has_head
    i = host.inputs
    assert i["instanceType"] == "t3.micro" and "iamInstanceProfile" not in i  # no role: no Session Manager, no creds
    assert i["metadataOptions"]["httpTokens"] == "required" and i["rootBlockDevice"]["encrypted"] is True
    assert i["instanceInitiatedShutdownBehavior"] == "stop" and i["userDataReplaceOnChange"] is True
    assert "keyName" not in i and "associatePublicIpAddress" not in i
    (eni,) = [r for r in plan.of_type(ENI) if r.name == f"{host.name}-eni"]
    assert i["networkInterfaces"] == [{"deviceIndex": 0, "networkInterfaceId": eni.id}]
    own_sg = plan.by_name(host.name, "aws:ec2/securityGroup:SecurityGroup")
    assert eni.inputs["securityGroups"] == [own_sg.id]
    fs_sg = fs[0].inputs["securityGroupIds"][0]
    ingress = [r.inputs for r in plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")]
    egress = [r.inputs for r in plan.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")]
    into_host = [r for r in ingress if r["securityGroupId"] == own_sg.id]
    assert {(r["fromPort"], r["toPort"], r["referencedSecurityGroupId"]) for r in into_host} == {
        (988, 988, fs_sg),
        (1018, 1023, fs_sg),
    }
    out_of_host = {
        (r["fromPort"], r.get("referencedSecurityGroupId") or r.get("cidrIpv4"))
        for r in egress
        if r["securityGroupId"] == own_sg.id
    }
    assert out_of_host == {(443, "0.0.0.0/0"), (988, fs_sg), (1018, fs_sg)}
    admitted = {(r["fromPort"], r["referencedSecurityGroupId"]) for r in ingress if r["securityGroupId"] == fs_sg}
    assert {(988, own_sg.id), (1018, own_sg.id)} <= admitted


def test_eks_p5_setup_host_creates_each_teams_directory_for_the_team(plans):
    plan = plans["eks-p5"]
    script = plan.files["eks-p5-lustre-setup/usr/local/sbin/gpucluster-storage-setup"]
    for team in ("applied", "research"):
        uid, gid = team_owner(TeamSpec(name=team))
        assert f'ensure "$mount_point"/teams/{team} {uid} {gid} 2770  # team {team}' in script
    assert 'ensure "$mount_point"/teams 0 0 755' in script


def test_slurm_p5_head_node_is_the_admin_host_and_mounts_nosuid_nodev(plans):
    plan = plans["slurm-p5"]
    # the mount script rides in the head node's bundle (render/slurm/headfiles.py), not in its user data
    text = plan.by_name("slurm-p5-slurm-head-files").inputs["content"]
    assert re.search(r"@tcp:/\S+ /fsx lustre noatime,flock,nosuid,nodev,", text)
    assert plan.of_type(FS)[0].inputs["rootSquashConfiguration"]["noSquashNids"] == [
        f"{plan.by_name('slurm-p5-slurm-head-eni', ENI).state['privateIp']}@tcp"
    ]


def test_a_head_node_that_does_not_mount_it_is_no_admin_host_and_the_plan_says_nobody_can_write():
    """Without a head node mounting it and with nothing to create, no host keeps root: the file system plans
    (nothing wrong with the config itself) with a warning that no node can write it, and no setup host."""
    from tests.conftest import group, make_config

    config = make_config(
        group(),
        storage={"lustre": {"storageCapacityGib": 1200, "throughputPerUnitStorage": 125}},
        slurm={"headNode": {"mountSharedStorage": False}, "nodeGroups": [{"name": "gpu"}]},
    )
    plan = plan_config(config, "no-admin")
    assert plan.ok, plan.error
    (warning,) = [f for f in plan.findings if f["code"] == "no-admin-host"]
    assert warning["path"] == "gpucluster:storage.lustre.directories" and "takes no writes from any node" in warning["message"]
    assert plan.of_type(FS)[0].inputs["rootSquashConfiguration"] == {"rootSquash": "65534:65534", "noSquashNids": []}
    assert setup_host(plan) is None


def test_an_existing_file_system_gets_its_directories_through_the_nodes_groups():
    """gpucluster cannot name the setup host in an existing file system's no-squash clients nor admit it in that
    file system's group: the host joins the nodes' groups (admitted as they are), and the plan says what to add."""
    from tests.conftest import group, make_config

    lustre = {"fileSystemId": "fs-0123456789abcdef0", "directories": [{"path": "/data", "owner": "1000:1000", "mode": "2775"}]}
    plan = plan_config(make_config(group(), storage={"lustre": lustre}), "existing")
    assert plan.ok, plan.error
    assert plan.of_type(FS) == []  # looked up, not created: its root squash is its own
    eni = plan.by_name("existing-lustre-setup-eni", ENI)
    nodes = {plan.by_name(f"existing-network-{g}", "aws:ec2/securityGroup:SecurityGroup").id for g in ("efa", "node")}
    own = plan.by_name("existing-lustre-setup", "aws:ec2/securityGroup:SecurityGroup").id
    assert set(eni.inputs["securityGroups"]) == {own, *nodes}
    (warning,) = [f for f in plan.findings if f["code"] == "existing-file-system-root-squash"]
    assert "setupHost.privateIp" in warning["fix"] and "NoSquashNids" in warning["fix"]
    assert (
        'ensure "$mount_point"/data 1000 1000 2775' in plan.files["existing-lustre-setup/usr/local/sbin/gpucluster-storage-setup"]
    )
