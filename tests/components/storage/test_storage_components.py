"""LustreStorage, DataBucket and their place in GpuCluster, under the recording mocks."""

from __future__ import annotations

import json

from gpucluster.components._shared.build import part
from gpucluster.components._shared.config_types import LustreConfig
from gpucluster.components.gpu_cluster import TOKEN as CLUSTER_TOKEN
from gpucluster.components.gpu_cluster import build_gpu_cluster
from gpucluster.components.storage.data_bucket import DataBucket
from gpucluster.components.storage.lustre_storage import LustreStorage, LustreStorageArgs
from gpucluster.load import load_spec
from tests.conftest import group, make_config

FS = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"


def lustre(config: LustreConfig, **kwargs):
    args: LustreStorageArgs = {
        **config,
        "cluster_name": "c",
        "vpc_id": "vpc-0abc1234",
        "subnet_id": "subnet-0aaa1111",
        "client_security_group_id": "sg-0efa0000000000001",
        "efa_security_group_id": "sg-0efa0000000000001",
    }
    args.update(kwargs)  # type: ignore[typeddict-item]
    return LustreStorage("c-lustre", args)


def test_new_persistent_2_file_system(run_components):
    config: LustreConfig = {"storage_capacity_gib": 57600, "throughput_per_unit_storage": 250, "enable_efa": True}
    plan = run_components(lambda: lustre(config))
    fs = plan.of_type(FS)[0]
    i = fs.inputs
    assert (i["deploymentType"], i["storageCapacity"], i["perUnitStorageThroughput"]) == ("PERSISTENT_2", 57600, 250)
    assert i["subnetIds"] == "subnet-0aaa1111" and i["efaEnabled"] is True
    assert i["metadataConfiguration"] == {"mode": "AUTOMATIC"}
    assert i["dataCompressionType"] == "LZ4" and i["fileSystemTypeVersion"] == "2.15"
    assert i["automaticBackupRetentionDays"] == 7 and i["copyTagsToBackups"] is True and i["skipFinalBackup"] is False
    key = plan.of_type("aws:kms/key:Key")[0]
    assert i["kmsKeyId"] == key.state["arn"] and key.inputs["enableKeyRotation"] is True
    assert "sg-0efa0000000000001" in i["securityGroupIds"]  # EFA: joins the self-referencing group
    assert fs.protect and fs.retain_on_delete and key.protect and key.retain_on_delete


def test_lustre_ports_open_between_file_system_and_clients(run_components):
    plan = run_components(lambda: lustre({"storage_capacity_gib": 1200, "throughput_per_unit_storage": 125}))
    sg = plan.of_type("aws:ec2/securityGroup:SecurityGroup")[0]
    rules = [
        (r.type.split(":")[-1], r.inputs["referencedSecurityGroupId"], r.inputs["fromPort"], r.inputs["toPort"])
        for r in plan.resources
        if r.type.startswith("aws:vpc/securityGroup") and r.inputs["securityGroupId"] == sg.id
    ]
    for kind in ("SecurityGroupIngressRule", "SecurityGroupEgressRule"):
        for peer in (sg.id, "sg-0efa0000000000001"):
            assert (kind, peer, 988, 988) in rules and (kind, peer, 1018, 1023) in rules
    assert plan.of_type(FS)[0].inputs["securityGroupIds"] == [sg.id]  # not EFA-enabled: only its own group


def test_user_provisioned_metadata(run_components):
    plan = run_components(
        lambda: lustre({"storage_capacity_gib": 2400, "throughput_per_unit_storage": 1000, "metadata_iops": 6000})
    )
    assert plan.of_type(FS)[0].inputs["metadataConfiguration"] == {"mode": "USER_PROVISIONED", "iops": 6000}


def test_data_repositories(run_components):
    spec: LustreConfig = {
        "storage_capacity_gib": 2400,
        "throughput_per_unit_storage": 250,
        "data_repositories": [
            {"file_system_path": "/datasets", "bucket_prefix": "datasets/"},
            {
                "file_system_path": "/ckpt",
                "s3_path": "s3://other-bucket/ckpt/",
                "import_events": [],
                "export_events": ["NEW", "CHANGED"],
            },
        ],
    }
    plan = run_components(lambda: lustre(spec, bucket_name="my-data-bucket"))
    dras = {r.inputs["fileSystemPath"]: r for r in plan.of_type(DRA)}
    assert dras["/datasets"].inputs["dataRepositoryPath"] == "s3://my-data-bucket/datasets/"
    assert dras["/datasets"].inputs["s3"] == {"autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}
    assert dras["/ckpt"].inputs["s3"] == {"autoExportPolicy": {"events": ["NEW", "CHANGED"]}}
    assert all(r.inputs["deleteDataInFilesystem"] is False and r.protect for r in dras.values())
    assert all(r.inputs["fileSystemId"] == plan.of_type(FS)[0].id for r in dras.values())


def test_existing_file_system_is_read_not_created(run_components):
    seen = {}

    def program():
        fs = lustre({"file_system_id": "fs-0123456789abcdef0"})
        seen["shape"] = fs.shared_storage
        fs.dns_name.apply(lambda d: seen.update(dns=d))

    plan = run_components(program)
    assert plan.of_type("aws:kms/key:Key") == [] and plan.of_type("aws:ec2/securityGroup:SecurityGroup") == []
    assert seen["dns"] == "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
    assert seen["shape"].fs_type == "lustre" and seen["shape"].mount_point == "/fsx"


def test_opting_out_of_protection(run_components):
    plan = run_components(lambda: lustre({"storage_capacity_gib": 1200, "throughput_per_unit_storage": 125}, protect=False))
    assert not plan.of_type(FS)[0].protect and not plan.of_type(FS)[0].retain_on_delete


def test_data_bucket(run_components):
    plan = run_components(lambda: DataBucket("c-data", {"cluster_name": "c"}))
    bucket = plan.of_type("aws:s3/bucket:Bucket")[0]
    assert bucket.inputs["bucketPrefix"] == "c-data-" and bucket.inputs["forceDestroy"] is False
    assert bucket.protect and bucket.retain_on_delete
    by_type = {r.type.split(":")[-1]: r.inputs for r in plan.resources if r.custom}
    assert by_type["BucketVersioning"]["versioningConfiguration"] == {"status": "Enabled"}
    rule = by_type["BucketServerSideEncryptionConfiguration"]["rules"][0]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms" and rule["bucketKeyEnabled"] is True
    assert rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] == plan.of_type("aws:kms/key:Key")[0].state["arn"]
    block = by_type["BucketPublicAccessBlock"]
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert by_type["BucketOwnershipControls"]["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
    rules = {r["id"]: r for r in by_type["BucketLifecycleConfiguration"]["rules"]}
    assert rules["expire-old-versions"]["noncurrentVersionExpiration"]["noncurrentDays"] == 30
    assert rules["abort-incomplete-uploads"]["abortIncompleteMultipartUpload"]["daysAfterInitiation"] == 7
    policy = json.loads(by_type["BucketPolicy"]["policy"])
    assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    key_policy = json.loads(plan.of_type("aws:kms/key:Key")[0].inputs["policy"])
    fsx = next(s for s in key_policy["Statement"] if s["Sid"] == "FsxLustreDataRepositories")
    assert "s3.data-source.lustre.fsx.amazonaws.com" in fsx["Condition"]["ArnLike"]["aws:PrincipalArn"]


def test_cluster_mounts_storage_on_its_nodes(run_components):
    config = make_config(
        group(),
        group(name="cpu", instanceType="m7i.2xlarge"),
        storage={
            "workload": {
                "datasetSizeTib": 5,
                "readMbPerSecondPerGpu": 50,
                "checkpointSizeGib": 100,
                "checkpointWriteSeconds": 60,
            },
            "lustre": {"nodeGroups": ["gpu"]},
            "nvmeScratch": {"nodeGroups": ["gpu"]},
        },
    )
    cluster = load_spec(config, stack="c").cluster
    plan = run_components(lambda: build_gpu_cluster(part(CLUSTER_TOKEN, "c"), "c", cluster))
    fs = plan.of_type(FS)[0]
    gpu_ud, cpu_ud = plan.files["c-gpu-lt/user-data"], plan.files["c-cpu-lt/user-data"]
    assert f"dns={fs.id}.fsx.us-east-1.amazonaws.com" in gpu_ud  # the real DNS name, not the stand-in
    assert "fs-00000000000000000" not in gpu_ud
    assert "gpucluster-nvme-raid" in gpu_ud and "gpucluster-mount-lustre" in gpu_ud
    assert "gpucluster-mount-lustre" not in cpu_ud and "gpucluster-nvme-raid" not in cpu_ud
    subnet = plan.by_name("c-network-private-us-east-1a", "aws:ec2/subnet:Subnet")
    assert fs.inputs["subnetIds"] == subnet.id
