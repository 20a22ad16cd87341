"""The shared /home under mocks: FSx for OpenZFS deployment, capacity, throughput, exports, quotas per uid, the
security group's sources, protection, and the mount shape nodes receive (docs/people.md)."""

from __future__ import annotations

import dataclasses

import pulumi
import pytest

from gpucluster.components._shared.build import part
from gpucluster.components.storage.home_storage import HomeWiring, build_home_storage
from gpucluster.resolve.slurm.identity import ResolvedHome

FS = "aws:fsx/openZfsFileSystem:OpenZfsFileSystem"
VOLUME = "aws:fsx/openZfsVolume:OpenZfsVolume"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
CLIENTS = {"head": "sg-0head00000000001", "login": "sg-0login0000000002", "compute": "sg-0comp00000000003"}
HOME = ResolvedHome(
    deployment_type="SINGLE_AZ_1",
    storage_gib=128,
    throughput=64,
    zone="us-east-1a",
    subnet="subnet-0aaa1111",
    quotas=((10001, 50), (10002, 80)),
    default_user_quota_gib=50,
    backup_days=7,
    kms_key_id=None,
    protect=True,
)
EXPORTS = [{"clients": "10.0.0.0/16", "options": ["rw", "crossmnt", "no_root_squash", "sync"]}]


def _run(run_components, home: ResolvedHome = HOME):
    out = {}

    def program() -> None:
        parent = part("gpucluster:index:HomeStorage", "p5-home")
        out["parts"] = build_home_storage(
            parent,
            "p5-home",
            home,
            HomeWiring(
                cluster="p5",
                vpc_id="vpc-0abc12345",
                vpc_cidr="10.0.0.0/16",
                subnet_id="subnet-0aaa1111",
                clients=CLIENTS,
                tags={"gpucluster:cluster": "p5"},
            ),
        )
        parts = out["parts"]
        pulumi.Output.all(parts.storage.server, parts.storage.file_system_id).apply(lambda v: out.update(server=v))

    plan = run_components(program)
    return plan, out


def test_file_system_deployment_capacity_throughput_backups(run_components) -> None:
    plan, _ = _run(run_components)
    (fs,) = plan.of_type(FS)
    i = fs.inputs
    assert (i["deploymentType"], i["storageCapacity"], i["throughputCapacity"]) == ("SINGLE_AZ_1", 128, 64)
    assert i["subnetIds"] == ["subnet-0aaa1111"]
    assert i["automaticBackupRetentionDays"] == 7
    assert i["skipFinalBackup"] is False
    assert i["rootVolumeConfiguration"]["nfsExports"]["clientConfigurations"] == EXPORTS
    assert i["securityGroupIds"] == [plan.by_name("p5-home-sg").state["id"]]
    assert "kmsKeyId" not in i or i["kmsKeyId"] is None


def test_home_volume_exports_and_quotas_per_uid(run_components) -> None:
    plan, _ = _run(run_components)
    (fs,) = plan.of_type(FS)
    (vol,) = plan.of_type(VOLUME)
    assert vol.inputs["name"] == "home"
    assert vol.inputs["parentVolumeId"] == fs.state["rootVolumeId"]
    assert vol.inputs["nfsExports"]["clientConfigurations"] == EXPORTS
    assert vol.inputs["userAndGroupQuotas"] == [
        {"id": 10001, "storageCapacityQuotaGib": 50, "type": "USER"},
        {"id": 10002, "storageCapacityQuotaGib": 80, "type": "USER"},
    ]


def test_no_quotas_for_a_directory(run_components) -> None:
    plan, _ = _run(run_components, dataclasses.replace(HOME, quotas=(), default_user_quota_gib=None))
    (vol,) = plan.of_type(VOLUME)
    assert not vol.inputs.get("userAndGroupQuotas")


@pytest.mark.parametrize("protect", [True, False])
def test_protected_and_retained_like_the_head_data_volume(run_components, protect) -> None:
    plan, _ = _run(run_components, dataclasses.replace(HOME, protect=protect))
    for r in [*plan.of_type(FS), *plan.of_type(VOLUME)]:
        assert r.protect is protect and r.retain_on_delete is protect, r.name
    assert plan.of_type(FS)[0].inputs["skipFinalBackup"] is (not protect)


def test_nfs_only_from_the_slurm_nodes(run_components) -> None:
    plan, _ = _run(run_components)
    sg = plan.by_name("p5-home-sg").state["id"]
    ingress = {
        (r.inputs["referencedSecurityGroupId"], r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"])
        for r in plan.of_type(INGRESS)
        if r.inputs["securityGroupId"] == sg
    }
    ports = [(111, 111), (2049, 2049), (20001, 20003)]
    assert ingress == {(peer, p, lo, hi) for peer in CLIENTS.values() for p in ("tcp", "udp") for lo, hi in ports}
    assert not [r for r in plan.of_type(INGRESS) if r.inputs.get("cidrIpv4")]
    egress = {(r.inputs["securityGroupId"], r.inputs["referencedSecurityGroupId"]) for r in plan.of_type(EGRESS)}
    assert egress == {(CLIENTS["login"], sg)}  # only the login group's egress is restricted


def test_mount_shape(run_components) -> None:
    plan, out = _run(run_components)
    (fs,) = plan.of_type(FS)
    storage = out["parts"].storage
    assert (storage.name, storage.fs_type, storage.mount_point, storage.mount_name) == ("home", "nfs4", "/home", "/fsx/home")
    assert storage.mount_options == "nfsvers=4.1,nosuid,nodev,_netdev"
    assert out["server"] == [fs.state["dnsName"], fs.id]


def test_tagged(run_components) -> None:
    plan, _ = _run(run_components)
    for r in plan.resources:
        if "tags" in r.inputs:
            assert r.inputs["tags"]["gpucluster:cluster"] == "p5", r.name
