"""Bad storage configs: each fails naming the field, before any resource exists."""

from __future__ import annotations

import pytest

from tests.conftest import assert_refused, group, make_config, plan_config

WORKLOAD = {"datasetSizeTib": 10, "readMbPerSecondPerGpu": 50, "checkpointSizeGib": 100, "checkpointWriteSeconds": 60}


def storage(**parts):
    return make_config(group(), storage=parts)


BAD_STORAGE = [
    (
        "zero-read-throughput",
        storage(workload={**WORKLOAD, "readMbPerSecondPerGpu": 0}, lustre={}),
        "gpucluster:storage.workload.readMbPerSecondPerGpu",
        "readMbPerSecondPerGpu is 0, but the GPUs read the 10 TiB dataset",
    ),
    (
        "lustre-kms-alias",
        storage(lustre={"storageCapacityGib": 1200, "kmsKeyId": "alias/fsx"}),
        "gpucluster:storage.lustre.kmsKeyId",
        "'alias/fsx' is not a key ARN, which FSx for Lustre needs",
    ),
    (
        "lustre-zone-other-region",
        storage(lustre={"storageCapacityGib": 1200, "availabilityZone": "eu-west-1a"}),
        "gpucluster:storage.lustre.availabilityZone",
        "zone 'eu-west-1a' is not in region us-east-1",
    ),
    (
        "capacity-off-steps",
        storage(lustre={"storageCapacityGib": 3000, "throughputPerUnitStorage": 250}),
        "gpucluster:storage.lustre.storageCapacityGib",
        "3000 GiB is not a valid capacity (1200 GiB, then multiples of 2400 GiB)",
    ),
    (
        "efa-capacity-off-steps",
        storage(lustre={"storageCapacityGib": 4800, "throughputPerUnitStorage": 500, "enableEfa": True}),
        "gpucluster:storage.lustre.storageCapacityGib",
        "multiples of 9600 GiB for an EFA-enabled 500 MB/s/TiB file system",
    ),
    (
        "tier-for-deployment-type",
        storage(workload=WORKLOAD, lustre={"throughputPerUnitStorage": 200}),
        "gpucluster:storage.lustre.throughputPerUnitStorage",
        "200 MB/s/TiB is not a PERSISTENT_2 throughput tier",
    ),
    (
        "tier-persistent-1",
        storage(workload=WORKLOAD, lustre={"deploymentType": "PERSISTENT_1", "throughputPerUnitStorage": 250}),
        "gpucluster:storage.lustre.throughputPerUnitStorage",
        "250 MB/s/TiB is not a PERSISTENT_1 throughput tier",
    ),
    (
        "efa-not-persistent-2",
        storage(workload=WORKLOAD, lustre={"deploymentType": "PERSISTENT_1", "enableEfa": True}),
        "gpucluster:storage.lustre.enableEfa",
        "EFA-enabled file systems must be PERSISTENT_2",
    ),
    (
        "efa-without-metadata",
        storage(workload=WORKLOAD, lustre={"enableEfa": True, "metadataConfiguration": False}),
        "gpucluster:storage.lustre.metadataConfiguration",
        "EFA-enabled file systems need a metadata configuration",
    ),
    (
        "gds-on-ineligible-type",
        make_config(
            group(instanceType="p4d.24xlarge"),
            storage={"workload": WORKLOAD, "lustre": {"enableEfa": True, "enableGpudirectStorage": True}},
        ),
        "gpucluster:storage.lustre.enableGpudirectStorage",
        "runs p4d.24xlarge, which is not a GPUDirect Storage client of FSx",
    ),
    (
        "gds-without-efa",
        storage(workload=WORKLOAD, lustre={"enableGpudirectStorage": True}),
        "gpucluster:storage.lustre.enableGpudirectStorage",
        "GPUDirect Storage runs over EFA",
    ),
    (
        "file-system-other-zone",
        storage(workload=WORKLOAD, lustre={"availabilityZone": "us-east-1b"}),
        "gpucluster:storage.lustre.availabilityZone",
        "the file system is in us-east-1b but EFA node group 'gpu' is in us-east-1a",
    ),
    (
        "too-many-repositories",
        storage(
            workload=WORKLOAD,
            lustre={"dataRepositories": [{"fileSystemPath": f"/d{i}", "s3Path": f"s3://bucket-x/d{i}/"} for i in range(9)]},
        ),
        "gpucluster:storage.lustre.dataRepositories",
        "9 data repository associations; a file system takes at most 8",
    ),
    (
        "overlapping-repositories",
        storage(
            workload=WORKLOAD,
            lustre={
                "dataRepositories": [
                    {"fileSystemPath": "/data", "s3Path": "s3://bucket-x/a/"},
                    {"fileSystemPath": "/data/b", "s3Path": "s3://bucket-x/b/"},
                ]
            },
        ),
        "gpucluster:storage.lustre.dataRepositories",
        "paths '/data' and '/data/b' overlap",
    ),
    (
        "bucket-prefix-without-bucket",
        storage(workload=WORKLOAD, lustre={"dataRepositories": [{"fileSystemPath": "/data", "bucketPrefix": "data/"}]}),
        "gpucluster:storage.lustre.dataRepositories[0].bucketPrefix",
        "storage.bucket is not configured",
    ),
    (
        "nvme-on-type-without-disks",
        make_config(group(instanceType="g6e.xlarge"), storage={"nvmeScratch": {}})
        | {"gpucluster:nodeGroups": [group(instanceType="m7i.2xlarge")]},
        "gpucluster:storage.nvmeScratch",
        "runs m7i.2xlarge, which has no local NVMe disks",
    ),
    ("unsized-file-system", storage(lustre={}), "gpucluster:storage.lustre", "a new file system needs a size"),
    (
        "metadata-iops-off-steps",
        storage(workload=WORKLOAD, lustre={"metadataIops": 5000}),
        "gpucluster:storage.lustre.metadataIops",
        "5000 is not a valid metadata IOPS setting",
    ),
    (
        "existing-with-capacity",
        storage(lustre={"fileSystemId": "fs-0123456789abcdef0", "storageCapacityGib": 2400}),
        "gpucluster:storage.lustre.fileSystemId",
        "its storage_capacity_gib cannot be set from here",
    ),
    (
        "scratch-with-backups",
        storage(workload=WORKLOAD, lustre={"deploymentType": "SCRATCH_2", "automaticBackupRetentionDays": 3}),
        "gpucluster:storage.lustre.automaticBackupRetentionDays",
        "SCRATCH_2 file systems have no automatic backups",
    ),
    (
        "unknown-mounting-group",
        storage(workload=WORKLOAD, lustre={"nodeGroups": ["gpus"]}),
        "gpucluster:storage.lustre.nodeGroups",
        "no node group is named 'gpus'",
    ),
    (
        "mount-point-clash",
        storage(workload=WORKLOAD, lustre={"mountPoint": "/data"}, nvmeScratch={"mountPoint": "/data"}),
        "gpucluster:storage.nvmeScratch.mountPoint",
        "/data is also the Lustre mount point",
    ),
    (
        "negative-dataset",
        storage(workload={**WORKLOAD, "datasetSizeTib": -1}, lustre={}),
        "gpucluster:storage.workload.datasetSizeTib",
        "greater than 0",
    ),
    ("misspelt-storage-field", storage(lustr={}), "gpucluster:storage.lustr", "unknown field 'lustr'"),
    (
        "file-system-zone-without-subnet",
        storage(lustre={"availabilityZone": ";gpucluster_canary;"}),
        "gpucluster:storage.lustre.availabilityZone",
        "zone ';gpucluster_canary;' has no subnet of the cluster",
    ),
    (
        "mount-options-with-space",
        storage(lustre={"mountOptions": "noatime, flock"}),
        "gpucluster:storage.lustre.mountOptions",
        "mount option ' flock' in 'noatime, flock' is not a mount option",
    ),
    (
        "mount-options-empty-entry",
        storage(lustre={"mountOptions": "noatime,,flock"}),
        "gpucluster:storage.lustre.mountOptions",
        "mount option '' in 'noatime,,flock' is not a mount option",
    ),
    (
        "mount-options-extra-fstab-line",
        storage(lustre={"mountOptions": "noatime,flock\n/dev/nvme1n1 / xfs defaults 0 0"}),
        "gpucluster:storage.lustre.mountOptions",
        "contains a control character (U+000A at position 13)",
    ),
    # Mount options that give files on the file system privilege, or hand mounting to users (build 3).
    *[
        (
            f"mount-option-{option}",
            storage(workload=WORKLOAD, lustre={"mountOptions": f"noatime,flock,{option}"}),
            "gpucluster:storage.lustre.mountOptions",
            f"mount option {option!r} in 'noatime,flock,{option}' is refused: it {why}",
        )
        for option, why in (
            ("suid", "runs setuid and setgid files with their owner's rights"),
            ("dev", "opens device files on it"),
            ("users", "lets any user mount and unmount it"),
            ("user", "lets any user mount it"),
            ("exec", "only matters to undo the noexec of user, users, owner or group"),
            ("defaults", "means rw,suid,dev,exec,auto,nouser,async"),
            ("owner", "lets the owner of the device mount it"),
        )
    ],
    (
        "mount-option-user-with-value",
        storage(workload=WORKLOAD, lustre={"mountOptions": "user=alice"}),
        "gpucluster:storage.lustre.mountOptions",
        "mount option 'user=alice' in 'user=alice' is refused",
    ),
    # Mount points over what nodes run as root from (build 5).
    *[
        (
            f"mount-point-{label}",
            storage(workload=WORKLOAD, lustre={"mountPoint": point}),
            "gpucluster:storage.lustre.mountPoint",
            message,
        )
        for label, point, message in (
            ("dotdot", "/fsx/../usr/local/sbin", "mountPoint '/fsx/../usr/local/sbin' is not a plain absolute path"),
            ("dot", "/fsx/./data", "mountPoint '/fsx/./data' is not in normal form"),
            ("trailing-slash", "/fsx/", "mountPoint '/fsx/' is not in normal form"),
            ("etc", "/etc", "mountPoint '/etc' is a directory nodes run or keep their own files in"),
            ("usr-local", "/usr/local", "mountPoint '/usr/local' is under /usr, which is a directory nodes run"),
            ("root", "/", "mountPoint '/' is a parent of /bin"),
            ("opt-gpucluster", "/opt/gpucluster/x", "mountPoint '/opt/gpucluster/x' is under /opt/gpucluster"),
            ("opt", "/opt", "mountPoint '/opt' is a parent of /opt/amazon"),
            ("var-lib", "/var/lib/gpucluster", "mountPoint '/var/lib/gpucluster' is under /var"),
            ("home", "/home", "mountPoint '/home' is a directory nodes run or keep their own files in"),
            ("tmp", "/tmp", "mountPoint '/tmp' is a directory nodes run or keep their own files in"),
            ("lib64", "/lib64", "mountPoint '/lib64' is a directory nodes run or keep their own files in"),
            ("srv", "/srv", "mountPoint '/srv' is a parent of /srv/slurm"),
        )
    ],
    # Root squash (build 1): on by default, 0 refused, admin hosts as FSx's NIDs.
    (
        "root-squash-zero",
        storage(workload=WORKLOAD, lustre={"rootSquash": "0:0"}),
        "gpucluster:storage.lustre.rootSquash",
        "rootSquash '0:0' maps root to root",
    ),
    (
        "root-squash-zero-gid",
        storage(workload=WORKLOAD, lustre={"rootSquash": "65534:0"}),
        "gpucluster:storage.lustre.rootSquash",
        "rootSquash '65534:0' maps root to root",
    ),
    (
        "root-squash-out-of-range",
        storage(workload=WORKLOAD, lustre={"rootSquash": "4294967295:65534"}),
        "gpucluster:storage.lustre.rootSquash",
        "rootSquash '4294967295:65534' is out of range",
    ),
    (
        "root-squash-not-uid-gid",
        storage(workload=WORKLOAD, lustre={"rootSquash": "nobody"}),
        "gpucluster:storage.lustre.rootSquash",
        "should match pattern",
    ),
    *[
        (
            f"no-squash-nid-{label}",
            storage(workload=WORKLOAD, lustre={"noSquashClients": [nid]}),
            "gpucluster:storage.lustre.noSquashClients",
            f"noSquashClients entry {nid!r} is not a Lustre NID of a TCP client",
        )
        for label, nid in (
            ("no-network", "10.0.1.6"),
            ("o2ib", "10.0.1.6@o2ib"),
            ("three-parts", "10.0.1@tcp"),
            ("octet-too-big", "10.0.1.256@tcp"),
            ("range-backwards", "10.0.[10-2].1@tcp"),
            ("hostname", "head.example.com@tcp"),
        )
    ],
    (
        "no-squash-too-many",
        storage(workload=WORKLOAD, lustre={"noSquashClients": [f"10.0.1.{i}@tcp" for i in range(63)]}),
        "gpucluster:storage.lustre.noSquashClients",
        "noSquashClients lists 63 clients; FSx takes 64 and gpucluster keeps 2 for its admin hosts",
    ),
    (
        "no-squash-clients-without-squash",
        storage(workload=WORKLOAD, lustre={"unsafeDisableRootSquash": True, "noSquashClients": ["10.0.1.6@tcp"]}),
        "gpucluster:storage.lustre",
        "unsafeDisableRootSquash turns root squash off, so rootSquash and noSquashClients mean nothing",
    ),
    (
        "existing-with-root-squash",
        storage(lustre={"fileSystemId": "fs-0123456789abcdef0", "rootSquash": "1000:1000"}),
        "gpucluster:storage.lustre.fileSystemId",
        "its rootSquash cannot be set from here",
    ),
    # Directories the storage setup host creates.
    *[
        (
            f"directory-{label}",
            storage(workload=WORKLOAD, lustre={"directories": [entry]}),
            f"gpucluster:storage.lustre.directories[0].{field}",
            message,
        )
        for label, entry, field, message in (
            ("root", {"path": "/"}, "path", "directory path '/' is not a directory below the file system's root"),
            ("dotdot", {"path": "/data/../etc"}, "path", "directory path '/data/../etc' is not a directory below"),
            ("teams", {"path": "/teams/research"}, "path", "directory path '/teams/research' is in /teams"),
            ("setuid", {"path": "/data", "mode": "4755"}, "mode", "mode '4755' has the setuid bit"),
            ("mode-not-octal", {"path": "/data", "mode": "0999"}, "mode", "should match pattern"),
            ("owner-range", {"path": "/data", "owner": "4294967295:0"}, "owner", "owner '4294967295:0' is out of range"),
            ("owner-name", {"path": "/data", "owner": "alice"}, "owner", "should match pattern"),
        )
    ],
    (
        "directory-twice",
        storage(workload=WORKLOAD, lustre={"directories": [{"path": "/data"}, {"path": "/data", "mode": "0700"}]}),
        "gpucluster:storage.lustre.directories",
        "directory '/data' is listed twice",
    ),
    (
        "nvme-mount-point-system",
        storage(nvmeScratch={"mountPoint": "/var/tmp/scratch"}),
        "gpucluster:storage.nvmeScratch.mountPoint",
        "mountPoint '/var/tmp/scratch' is under /var",
    ),
    (
        "mount-options-shell",
        storage(lustre={"mountOptions": "noatime;gpucluster_canary"}),
        "gpucluster:storage.lustre.mountOptions",
        "mount option 'noatime;gpucluster_canary'",
    ),
]


@pytest.mark.parametrize(("config", "path", "fragment"), [c[1:] for c in BAD_STORAGE], ids=[c[0] for c in BAD_STORAGE])
def test_bad_storage_config(config, path, fragment):
    assert_refused(config, path, fragment)


def test_at_least_ten():
    assert len(BAD_STORAGE) >= 10


def test_root_squash_opt_out_and_existing_file_systems_are_warned_about():
    """Turning root squash off plans, loudly; an attached file system's root squash is FSx's, not the stack's."""
    plan = plan_config(storage(workload=WORKLOAD, lustre={"unsafeDisableRootSquash": True}), "warn")
    assert plan.ok, plan.error
    (off,) = [f for f in plan.findings if f["code"] == "root-squash-off"]
    assert off["level"] == "warning" and off["path"] == "gpucluster:storage.lustre.unsafeDisableRootSquash"
    assert "every team's included" in off["message"]
    plan = plan_config(storage(lustre={"fileSystemId": "fs-0123456789abcdef0"}), "warn")
    assert plan.ok, plan.error
    (existing,) = [f for f in plan.findings if f["code"] == "existing-file-system-root-squash"]
    assert "keeps whatever root squash it has" in existing["message"] and "NoSquashNids" in existing["fix"]


def test_client_limit_is_a_warning_in_the_plan():
    config = make_config(
        group(minSize=2, maxSize=2),
        storage={"workload": {**WORKLOAD, "readMbPerSecondPerGpu": 2000}, "lustre": {"throughputPerUnitStorage": 1000}},
    )
    plan = plan_config(config, "warn")
    assert plan.ok, plan.error
    warnings = [f for f in plan.findings if f["code"] == "client-limit"]
    assert warnings and "a plain Lustre client reads at most about 12,500 MB/s" in warnings[0]["message"]
    assert "enableEfa" in warnings[0]["fix"]
