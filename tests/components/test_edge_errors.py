"""The component edge as one table: every component's bad Args raise one ``ArgsError`` (Pulumi's
``InputPropertiesError``) naming the field in the caller's spelling, with a message that says what is wrong, before
any resource exists (not even the component); and ``gpucluster plan`` of a program of each family with bad Args
exits 2 with the field path, not 1 "unexpected error"."""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gpucluster.components._shared.edge import ArgsError
from gpucluster.components.compute.gpu_node_group import GpuNodeGroup
from gpucluster.components.gpu_cluster import GpuCluster
from gpucluster.components.hybrid.hybrid_link import HybridLink
from gpucluster.components.hybrid.onprem_credentials import OnPremCredentials
from gpucluster.components.kubernetes.eks_cluster import EksCluster
from gpucluster.components.kubernetes.kubernetes_platform import KubernetesPlatform
from gpucluster.components.network.network import Network
from gpucluster.components.slurm.slurm_cluster import SlurmCluster
from gpucluster.components.storage.data_bucket import DataBucket
from gpucluster.components.storage.lustre_storage import LustreStorage
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.tools.cli import main

SUBNETS = ["subnet-0aaa1111", "subnet-0bbb2222"]
SG = ["sg-0efa0000000000001"]
NODE_GROUP = {"name": "gpu", "instance_type": "p5.48xlarge", "availability_zones": ["us-east-1a"], "max_size": 2}
LUSTRE = {"cluster_name": "c", "vpc_id": "vpc-0abc1234", "subnet_id": "subnet-0aaa1111", "client_security_group_id": SG[0]}
SIZED = {"storage_capacity_gib": 1200, "throughput_per_unit_storage": 125}
SLURM = {
    "cluster_name": "s",
    "region": "us-east-1",
    "compute_node_groups": [{**NODE_GROUP, "name": "p5", "max_size": 16}],
    "vpc_id": "vpc-0abc12345",
    "subnets": [{"id": "subnet-0aaa1111", "availability_zone": "us-east-1a"}],
    "security_group_ids": SG,
}
HYBRID = {
    "site": "lab",
    "on_prem_cidrs": ["10.20.0.0/16"],
    "controller": {"host": "ctl", "address": "10.20.0.10", "slurm_version": "23.11"},
    "connectivity": {"type": "existing-tgw", "transit_gateway_id": "tgw-0123456789abcdef0"},
    "credentials": {"type": "ssm"},
}
LINK = {
    "cluster_name": "c",
    "hybrid": HYBRID,
    "vpc_id": "vpc-0123456789abcdef0",
    "vpc_cidr": "10.0.0.0/16",
    "private_subnet_ids": SUBNETS,
}
EKS = {"cluster_name": "k", "region": "us-east-1", "cluster_subnet_ids": SUBNETS}
CLUSTER = {"name": "tc", "region": "us-east-1", "nodeGroups": [{"name": "gpu", "instanceType": "p5.48xlarge", "maxSize": 2}]}
CREDENTIALS = {
    "cluster_name": "c",
    "region": "us-east-1",
    "hybrid": HYBRID,
    "munge_secret_arn": "arn:aws:secretsmanager:us-east-1:111122223333:secret:m",
    "munge_key_arn": "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "burst_node_groups": ["p5"],
    "launch_template_ids": ["lt-0123456789abcdef0"],
    "instance_types": ["p5.48xlarge"],
    "subnet_ids": [SUBNETS[:1]],
    "security_group_ids": SG,
    "node_role_arn": "arn:aws:iam::111122223333:role/n",
    "node_instance_profile_arn": "arn:aws:iam::111122223333:instance-profile/n",
}


FSX = SharedStorage("lustre", "lustre", "/fsx", "noatime,flock", server="fs-0123.fsx.us-east-1.amazonaws.com", mount_name="abcd")


def _node_group(**extra: Any) -> dict[str, Any]:
    return {**NODE_GROUP, "cluster_name": "c", "subnet_ids": SUBNETS[:1], "security_group_ids": SG, **extra}


def _without(args: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k != key}


@dataclass(frozen=True)
class Row:
    component: Callable[[str, Any], object]
    args: Callable[[], dict[str, Any]]  # built inside the program: some hold Outputs
    path: str
    fragment: str

    @property
    def name(self) -> str:
        return getattr(self.component, "__name__", "?")


ROWS: dict[str, Row] = {
    # compute
    "node-group-efa-on-a-small-type": Row(
        GpuNodeGroup, lambda: _node_group(instance_type="g6e.xlarge", enable_efa_support=True), "args.enableEfaSupport", "EFA"
    ),
    "node-group-min-above-max": Row(GpuNodeGroup, lambda: _node_group(min_size=3), "args.minSize", "maxSize"),
    "node-group-wrong-type": Row(GpuNodeGroup, lambda: _node_group(max_size="many"), "args.maxSize", "whole number"),
    "node-group-missing-wiring": Row(
        GpuNodeGroup, lambda: _without(_node_group(), "security_group_ids"), "args.securityGroupIds", "is required"
    ),
    "node-group-no-subnets": Row(GpuNodeGroup, lambda: _node_group(subnet_ids=[]), "args.subnetIds", "is required"),
    "node-group-output-decides-what-is-created": Row(
        GpuNodeGroup,
        lambda: _node_group(instance_type=pulumi.Output.from_input("p5.48xlarge")),
        "args.instanceType",
        "must be known when the program runs",
    ),
    "node-group-storage-and-user-data": Row(
        GpuNodeGroup, lambda: _node_group(shared_storage=[FSX], user_data="#cloud-config\n"), "args.userData", "not both"
    ),
    "node-group-storage-suid": Row(
        GpuNodeGroup,
        lambda: _node_group(shared_storage=[replace(FSX, mount_options="noatime,suid")]),
        "args.sharedStorage[0].mountOptions",
        "'suid'",
    ),
    "node-group-node-local-storage": Row(
        GpuNodeGroup,
        lambda: _node_group(shared_storage=[SharedStorage("scratch", "nvme", "/scratch", "noatime")]),
        "args.sharedStorage[0]",
        "without a server",
    ),
    # network
    "network-cidr": Row(Network, lambda: {"cluster_name": "c", "vpc_cidr": "10.0.0.0/33"}, "args.vpcCidr", ""),
    "network-flow-log-retention": Row(
        Network, lambda: {"cluster_name": "c", "flow_logs": {"retention_days": 13}}, "args.flowLogs.retentionDays", ""
    ),
    "network-zone-of-another-region": Row(
        Network, lambda: {"cluster_name": "c", "availability_zones": ["eu-west-1a"]}, "args.availabilityZones", ""
    ),
    "network-endpoint": Row(
        Network, lambda: {"cluster_name": "c", "interface_endpoints": ["nope"]}, "args.interfaceEndpoints[0]", ""
    ),
    "network-no-cluster-name": Row(Network, lambda: {}, "args.clusterName", "is required"),
    # storage
    "lustre-capacity": Row(
        LustreStorage,
        lambda: {**LUSTRE, "storage_capacity_gib": 1300, "throughput_per_unit_storage": 125},
        "args.storageCapacityGib",
        "",
    ),
    "lustre-throughput": Row(
        LustreStorage,
        lambda: {**LUSTRE, "storage_capacity_gib": 1200, "throughput_per_unit_storage": 7},
        "args.throughputPerUnitStorage",
        "",
    ),
    "lustre-scratch-backups": Row(
        LustreStorage,
        lambda: {**LUSTRE, "deployment_type": "SCRATCH_2", "automatic_backup_retention_days": 3, "storage_capacity_gib": 1200},
        "args.automaticBackupRetentionDays",
        "",
    ),
    "lustre-deployment-type": Row(
        LustreStorage, lambda: {**LUSTRE, "deployment_type": "PERSISTENT_3"}, "args.deploymentType", ""
    ),
    "lustre-bucket-prefix-without-bucket": Row(
        LustreStorage,
        lambda: {**LUSTRE, **SIZED, "data_repositories": [{"file_system_path": "/d", "bucket_prefix": "d/"}]},
        "args.dataRepositories[0].bucketPrefix",
        "",
    ),
    "lustre-workload-without-gpus": Row(
        LustreStorage,
        lambda: {
            **LUSTRE,
            "workload": {
                "dataset_size_tib": 1,
                "read_mb_per_second_per_gpu": 1,
                "checkpoint_size_gib": 1,
                "checkpoint_write_seconds": 1,
            },
        },
        "args.workload.gpuCount",
        "no node groups to count GPUs from",
    ),
    "lustre-no-subnet": Row(LustreStorage, lambda: {**LUSTRE, **SIZED, "subnet_id": None}, "args.subnetId", "is required"),
    "lustre-too-many-no-squash-clients": Row(
        LustreStorage,
        lambda: {
            **LUSTRE,
            **SIZED,
            "no_squash_clients": [f"10.0.1.{i}@tcp" for i in range(60)],
            "admin_host_ips": [f"10.0.2.{i}" for i in range(5)],
        },
        "args.adminHostIps",
        "5 admin hosts and 60 noSquashClients are more than the 64 no-squash clients FSx takes",
    ),
    "bucket-wrong-type": Row(
        DataBucket, lambda: {"cluster_name": "c", "noncurrent_version_days": "soon"}, "args.noncurrentVersionDays", ""
    ),
    "bucket-key-typo": Row(DataBucket, lambda: {"cluster_name": "c", "name_prefx": "x-"}, "args.namePrefx", ""),
    "bucket-no-cluster-name": Row(DataBucket, lambda: {}, "args.clusterName", "is required"),
    # slurm
    "slurm-head-volume": Row(
        SlurmCluster, lambda: {**SLURM, "head_node": {"data_volume_size_gib": 1}}, "args.headNode.dataVolumeSizeGib", ""
    ),
    "slurm-agent-hold": Row(
        SlurmCluster, lambda: {**SLURM, "agent": {"failure_hold_seconds": -1}}, "args.agent.failureHoldSeconds", ""
    ),
    "slurm-missing-wiring": Row(
        SlurmCluster, lambda: _without(SLURM, "security_group_ids"), "args.securityGroupIds", "is required"
    ),
    "slurm-check-names-the-args-field": Row(
        SlurmCluster, lambda: {**SLURM, "node_groups": [{"name": "nope"}]}, "args.nodeGroups[0].name", ""
    ),
    "slurm-lustre-mount-point": Row(
        SlurmCluster,
        lambda: {**SLURM, "lustre": {"dns_name": "d", "mount_name": "m", "mount_point": "/fsx/../usr/local/sbin"}},
        "args.lustre.mountPoint",
        "is not a plain absolute path",
    ),
    "slurm-lustre-system-directory": Row(
        SlurmCluster,
        lambda: {**SLURM, "lustre": {"dns_name": "d", "mount_name": "m", "mount_point": "/etc"}},
        "args.lustre.mountPoint",
        "'/etc' is a directory nodes run or keep their own files in",
    ),
    "slurm-lustre-suid": Row(
        SlurmCluster,
        lambda: {**SLURM, "lustre": {"dns_name": "d", "mount_name": "m", "mount_options": "noatime,suid"}},
        "args.lustre.mountOptions",
        "mount option 'suid' in 'noatime,suid' is refused",
    ),
    # kubernetes
    "eks-version-format": Row(EksCluster, lambda: {**EKS, "version": "1.9"}, "args.version", ""),
    "eks-version-too-old": Row(EksCluster, lambda: {**EKS, "version": "1.28"}, "args.version", ""),
    "eks-output-version": Row(
        EksCluster,
        lambda: {**EKS, "version": pulumi.Output.from_input("1.33")},
        "args.version",
        "must be known when the program runs",
    ),
    "eks-group-without-subnets": Row(
        EksCluster, lambda: {**EKS, "node_groups": [NODE_GROUP]}, "args.nodeGroupSubnetIds.gpu", "subnets"
    ),
    "eks-group-bad-size": Row(
        EksCluster,
        lambda: {**EKS, "node_groups": [{**NODE_GROUP, "max_size": "many"}]},
        "args.nodeGroups[0].maxSize",
        "whole number",
    ),
    "eks-key-typo": Row(EksCluster, lambda: {**EKS, "versoin": "1.33"}, "args.versoin", ""),
    "platform-key-typo": Row(
        KubernetesPlatform, lambda: {"cluster_name": "tc", "kueue": {}, "gpu_operatr": {}}, "args.gpuOperatr", ""
    ),
    "eks-no-subnets": Row(EksCluster, lambda: _without(EKS, "cluster_subnet_ids"), "args.clusterSubnetIds", "is required"),
    "platform-unknown": Row(
        KubernetesPlatform, lambda: {"cluster_name": "tc", "platform": "gke"}, "args.platform", "eks or on-prem"
    ),
    # hybrid
    "link-dns-needs-two-subnets": Row(
        HybridLink,
        lambda: {
            **LINK,
            "private_subnet_ids": SUBNETS[:1],
            "hybrid": {**HYBRID, "dns": {"on_prem_domain": "lab.example.internal", "on_prem_resolvers": ["10.20.0.2"]}},
        },
        "args.privateSubnetIds",
        "two zones",
    ),
    "link-vpn-without-customer-gateway": Row(
        HybridLink, lambda: {**LINK, "hybrid": {**HYBRID, "connectivity": {"type": "vpn-vgw"}}}, "args.hybrid.connectivity", ""
    ),
    "link-missing-vpc": Row(HybridLink, lambda: _without(LINK, "vpc_id"), "args.vpcId", "is required"),
    "credentials-missing-role": Row(
        OnPremCredentials, lambda: _without(CREDENTIALS, "node_role_arn"), "args.nodeRoleArn", "is required"
    ),
    "credentials-bad-hybrid": Row(
        OnPremCredentials,
        lambda: {**CREDENTIALS, "hybrid": {**HYBRID, "credentials": {"type": "x509"}}},
        "args.hybrid.credentials",
        "",
    ),
    # the whole cluster
    "cluster-camel-case-field": Row(
        GpuCluster,
        lambda: {**CLUSTER, "nodeGroups": [{**CLUSTER["nodeGroups"][0], "maxSize": "many"}]},
        "args.nodeGroups[0].maxSize",
        "whole number",
    ),
    "cluster-output-id": Row(
        GpuCluster,
        lambda: {**CLUSTER, "network": {"vpcId": pulumi.Output.from_input("vpc-0123456789abcdef0"), "subnets": []}},
        "args.network.vpcId",
        "is an Output",
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_bad_args_are_one_input_properties_error_naming_the_field(run_components, row: Row):
    raised: list[ArgsError] = []

    def program() -> None:
        with pytest.raises(ArgsError) as info:
            row.component("bad", typing.cast(Any, row.args()))
        raised.append(info.value)

    plan = run_components(program)
    (error,) = raised
    assert isinstance(error, pulumi.InputPropertiesError) and error.component == row.name
    paths = [e["property_path"] for e in error.errors or []]
    matching = [f for f in error.findings if f.path.startswith(row.path)]
    assert matching, paths
    assert row.fragment in " ".join(f.render() for f in matching)
    assert all(e["reason"] for e in error.errors or [])  # what Pulumi shows beside each path
    assert str(error).startswith(f"{row.name} args are invalid:") and row.path in str(error)
    assert [r.type for r in plan.resources if r.type != "pulumi:pulumi:Stack"] == []  # not even the component


# --- through `gpucluster plan`: exit 2 (an invalid config) with the path, one program per family -----------------

PROGRAMS = {
    "compute": "GpuNodeGroup('g', {'name': 'gpu', 'instance_type': 'p5.48xlarge', 'max_size': 'many', "
    "'cluster_name': 'c', 'subnet_ids': ['subnet-0aaa1111'], 'security_group_ids': ['sg-0efa0000000000001']})",
    "storage": "LustreStorage('l', {'cluster_name': 'c', 'vpc_id': 'vpc-0abc1234', 'subnet_id': 'subnet-0aaa1111', "
    "'client_security_group_id': 'sg-0efa0000000000001', 'storage_capacity_gib': 1300, 'throughput_per_unit_storage': 125})",
    "network": "Network('n', {'cluster_name': 'c', 'vpc_cidr': '10.0.0.0/33'})",
    "slurm": f"SlurmCluster('s', {{**{SLURM!r}, 'head_node': {{'data_volume_size_gib': 1}}}})",
    "kubernetes": f"EksCluster('k', {{**{EKS!r}, 'version': '1.9'}})",
    "hybrid": f"HybridLink('h', {{**{LINK!r}, 'hybrid': {{**{HYBRID!r}, 'connectivity': {{'type': 'vpn-vgw'}}}}}})",
}
PATHS = {
    "compute": "args.maxSize",
    "storage": "args.storageCapacityGib",
    "network": "args.vpcCidr",
    "slurm": "args.headNode.dataVolumeSizeGib",
    "kubernetes": "args.version",
    "hybrid": "args.hybrid.connectivity",
}


@pytest.mark.parametrize("family", PROGRAMS)
def test_gpucluster_plan_of_a_program_with_bad_args_exits_2_naming_the_field(tmp_path: Path, capsys, family: str):
    (tmp_path / "Pulumi.yaml").write_text("name: mine\nruntime: python\n")
    (tmp_path / "Pulumi.dev.yaml").write_text("config:\n  aws:region: us-east-1\n")
    (tmp_path / "__main__.py").write_text(
        "from gpucluster import EksCluster, GpuNodeGroup, LustreStorage, Network, SlurmCluster\n"
        "from gpucluster.components.hybrid.hybrid_link import HybridLink\n"
        f"{PROGRAMS[family]}\n"
    )
    code = main(["plan", "--stack", "dev", "--project-dir", str(tmp_path), "--no-files"])
    out = capsys.readouterr()
    assert code == 2, out.err
    assert PATHS[family] in out.out and "args are invalid" in out.out
    assert "unexpected error" not in out.err
