"""One failing fixture per policy rule: a small plan JSON document (the shape ``gpucluster plan --json``
writes) that breaks the rule, beside resources that keep it, and the violations expected of it.

User data is built here from readable parts (gzip, base64, MIME, cloud-config ``write_files``), the
way the components encode it, so each fixture says what it hides and where.
"""

from __future__ import annotations

import base64
import gzip
import json
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any

import yaml

from gpucluster.policy import types as t
from tests.conftest import GOLDEN, HOSTILE_SLURM_SETTINGS

ACCOUNT = "123456789012"
# Fake secrets in the shapes real ones have (not real keys: AWS's documented example key id).
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n-----END RSA PRIVATE KEY-----"


def res(type_: str, name: str, inputs: dict[str, Any], *, protect: bool = False, id_: str | None = None) -> dict[str, Any]:
    return {
        "urn": f"urn:pulumi:fixture::gpucluster::{type_}::{name}",
        "type": type_,
        "name": name,
        "parent": None,
        "custom": True,
        "protect": protect,
        "retainOnDelete": protect,
        "id": id_ or f"{name}-id",
        "inputs": inputs,
    }


def netpol(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return res(t.NETWORK_POLICY, f"{namespace}-{name}", {"metadata": {"name": name, "namespace": namespace}, "spec": spec})


def team_namespace(name: str, enforce: str | None = "restricted", deny: bool = True) -> list[dict[str, Any]]:
    """A team's Namespace (Pod Security ``enforce`` label unless None) and, with ``deny``, its default-deny
    NetworkPolicy."""
    labels = {t.TEAM_LABEL: name, **({"pod-security.kubernetes.io/enforce": enforce} if enforce else {})}
    out = [res(t.NAMESPACE, f"{name}-ns", {"metadata": {"name": name, "labels": labels}})]
    if deny:
        out.append(netpol(name, "default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}))
    return out


def plan(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "project": "gpucluster",
        "stack": "fixture",
        "region": "us-east-1",
        "ok": True,
        "error": None,
        "resources": list(resources),
    }


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def cloud_config(files: list[dict[str, Any]], runcmd: list[str] | None = None) -> str:
    return "#cloud-config\n" + yaml.safe_dump({"write_files": files, "runcmd": runcmd or []}, sort_keys=False)


SQUASHED = {"rootSquashConfiguration": {"rootSquash": "65534:65534", "noSquashNids": ["10.0.1.6@tcp"]}}
PV = "kubernetes:core/v1:PersistentVolume"

GOOD_METADATA = {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}
GOOD_ROOT = [{"deviceName": "/dev/sda1", "ebs": {"encrypted": "true", "volumeSize": 200, "volumeType": "gp3"}}]


def lt(name: str, **inputs: Any) -> dict[str, Any]:
    base = {"metadataOptions": GOOD_METADATA, "blockDeviceMappings": GOOD_ROOT, "instanceType": "p5.48xlarge"}
    return res(t.LAUNCH_TEMPLATE, name, {**base, **inputs})


def instance(name: str, **inputs: Any) -> dict[str, Any]:
    base = {"metadataOptions": GOOD_METADATA, "rootBlockDevice": {"encrypted": True, "volumeSize": 50}}
    return res(t.INSTANCE, name, {**base, **inputs})


def _user_data_fixture() -> dict[str, Any]:
    # 1. gzip + base64 cloud-config whose write_files entry is itself gz+b64: a slurmdbd.conf password.
    conf = "DbdHost=localhost\nStorageType=accounting_storage/mysql\nStoragePass=Sl8rmDbPassw0rd\n"
    gz_file = {"path": "/etc/slurm/slurmdbd.conf", "encoding": "gz+b64", "content": b64(gzip.compress(conf.encode()))}
    head = cloud_config([gz_file])
    # 2. MIME multi-part (as EKS nodes get it) with a base64-encoded shell part exporting an AWS key id.
    mime = MIMEMultipart(boundary="//")
    mime.attach(MIMEText("#!/bin/bash\necho ok\n", "x-shellscript"))
    mime.attach(MIMEText(f"#!/bin/bash\nexport AWS_ACCESS_KEY_ID={AWS_KEY_ID}\n", "x-shellscript", "utf-8"))  # base64 part
    # 3. a cloud-config writing a private key (b64) and a munge key from a literal.
    munge = "echo " + b64(bytes(range(48))) + " | base64 -d > /etc/munge/munge.key"
    keyed = cloud_config([{"path": "/root/.ssh/id_rsa", "encoding": "b64", "content": b64(PEM.encode())}], [munge])
    # 4. what must pass: the head node reading its key from Secrets Manager, names that merely contain "secret".
    clean = cloud_config(
        [{"path": "/etc/gpucluster/boot.json", "content": json.dumps({"secret_name": "gpucluster/c/munge-key"})}],
        ["/usr/local/sbin/gpucluster-aws munge-key --create", "token = urllib.request.Request(url)"],
    )
    return plan(
        instance("head", userDataBase64=b64(gzip.compress(head.encode()))),
        lt("eks-node", userData=b64(mime.as_bytes())),
        instance("login", userData=keyed),
        lt("clean", userData=b64(gzip.compress(clean.encode()))),
    )


def hostile_slurm_conf() -> str:
    """slurm-p5's rendered slurm.conf (its golden) with the review's seven hostile keys added, as a stack could only
    get them around the config check."""
    conf = (GOLDEN / "slurm" / "slurm-p5" / "slurm.conf").read_text()
    return conf + "".join(f"{key}={value}\n" for key, value in HOSTILE_SLURM_SETTINGS.items())


def bundle(name: str, files: dict[str, str]) -> dict[str, Any]:
    """The Slurm head node's files bundle (``render/slurm/headfiles.py``): a bucket object of ``{"files": [...]}``."""
    content = json.dumps({"files": [{"path": p, "mode": "0644", "content": c} for p, c in files.items()]})
    return res(t.BUCKET_OBJECT, name, {"bucket": "artifacts", "key": f"{name}.json", "content": content})


def _slurm_conf_fixture() -> dict[str, Any]:
    clean = (GOLDEN / "slurm" / "slurm-p5" / "slurm.conf").read_text() + "MaxJobCount=20000\nKillWait=45\n"
    written = cloud_config([{"path": "/etc/slurm/slurm.conf", "content": "ClusterName=x\nRebootProgram=/fsx/reboot\n"}])
    return plan(
        bundle("head-files", {"/etc/slurm/slurm.conf": hostile_slurm_conf(), "/etc/slurm/gres.conf": "Epilog=/x\n"}),
        bundle("clean-files", {"/etc/slurm/slurm.conf": clean}),
        lt("login", userData=b64(gzip.compress(written.encode()))),
    )


def lustre_fs(name: str, **inputs: Any) -> dict[str, Any]:
    return res(t.LUSTRE_FILE_SYSTEM, name, {"deploymentType": "PERSISTENT_2", "kmsKeyId": "k", **inputs}, protect=True)


def fsx_pv(name: str, mountname: str, handle: str, options: list[str] | None = None) -> dict[str, Any]:
    csi = {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": handle,
        "volumeAttributes": {"dnsname": "fs-1.fsx", "mountname": mountname},
    }
    return res(PV, name, {"spec": {"csi": csi, "mountOptions": options or ["noatime", "nosuid", "nodev"]}})


HOME_GOOD = "#!/bin/bash\nentry='fs-2.fsx.us-east-1.amazonaws.com:/fsx/home /home nfs4 nfsvers=4.1,nosuid,nodev,_netdev 0 0'\n"


def _lustre_mount_fixture() -> dict[str, Any]:
    """The Lustre mounts a node makes, as gpucluster's mount script carries them (gzip + base64, a ``write_files``
    file holding the fstab entry in a shell variable) and as hand-written user data would."""
    script = "#!/bin/bash\nentry='fs-1.fsx.us-east-1.amazonaws.com@tcp:/abc /fsx lustre noatime,flock,_netdev 0 0'\n"
    gz_file = {
        "path": "/usr/local/sbin/gpucluster-mount-lustre",
        "encoding": "gz+b64",
        "content": b64(gzip.compress(script.encode())),
    }
    good = "#!/bin/bash\nentry='fs-1@tcp:/abc /fsx lustre noatime,flock,nosuid,nodev,_netdev 0 0'\n"
    return plan(
        lt("no-nosuid", userData=b64(gzip.compress(cloud_config([gz_file]).encode()))),
        instance("hand-mount", userData=cloud_config([], ["mount -t lustre -o noatime,nosuid fs-1@tcp:/abc /data"])),
        instance("undone", userData=cloud_config([], ["mount -t lustre -o nosuid,nodev,suid fs-1@tcp:/abc /data"])),
        lt("nodes", userData=b64(cloud_config([{"path": "/usr/local/sbin/m", "content": good}]).encode())),
        fsx_pv("pv-plain", "abc/teams/a", "fs-1/teams/a", ["noatime", "flock"]),
        fsx_pv("pv-good", "abc/teams/b", "fs-1/teams/b"),
        res(PV, "nfs", {"spec": {"nfs": {"server": "x", "path": "/"}, "mountOptions": ["noatime"]}}),  # not Lustre
        # The shared /home: an NFS fstab entry and a mount command, kept and broken.
        lt(
            "home-good",
            userData=b64(cloud_config([{"path": "/usr/local/sbin/gpucluster-mount-home", "content": HOME_GOOD}]).encode()),
        ),
        instance(
            "home-suid",
            userData=cloud_config([], ["mount -t nfs4 -o nfsvers=4.1,nodev fs-2.fsx.us-east-1.amazonaws.com:/fsx/home /home"]),
        ),
    )


# rule → (plan, expected violations as (rule, resource name, property))


def role(name: str, service: str, **inputs: Any) -> dict[str, Any]:
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }
    return res("aws:iam/role:Role", name, {"name": name, "assumeRolePolicy": json.dumps(trust), **inputs}, id_=name)


def role_policy(name: str, role_name: str, *statements: dict[str, Any]) -> dict[str, Any]:
    doc = {"Version": "2012-10-17", "Statement": list(statements)}
    return res("aws:iam/rolePolicy:RolePolicy", name, {"role": role_name, "policy": json.dumps(doc)})


def attach(name: str, role_name: str, managed: str) -> dict[str, Any]:
    return res(
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        name,
        {"role": role_name, "policyArn": f"arn:aws:iam::aws:policy/{managed}"},
    )


TEMPLATE = f"arn:aws:ec2:us-east-1:{ACCOUNT}:launch-template/lt-0123456789abcdef0"
RUN_FROM_TEMPLATE = {
    "Sid": "LaunchOnlyFromTheClustersTemplates",
    "Effect": "Allow",
    "Action": "ec2:RunInstances",
    "Resource": "*",
    "Condition": {"ArnLike": {"ec2:LaunchTemplate": [TEMPLATE]}},
}
RUN_TAGGED = {
    "Sid": "LaunchOnlyTheClustersInstances",
    "Effect": "Allow",
    "Action": "ec2:RunInstances",
    "Resource": f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/*",
    "Condition": {"StringEquals": {"aws:RequestTag/gpucluster:cluster": "c", "ec2:MetadataHttpTokens": "required"}},
}
READ_EVERY_PARAMETER = {"Effect": "Allow", "Action": "ssm:GetParameter*", "Resource": "*"}
DENY_OTHER_PARAMETERS = {
    "Effect": "Deny",
    "Action": "ssm:GetParameter*",
    "NotResource": f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/c/*",
}
BIG = {
    "Effect": "Allow",
    "Action": "s3:GetObject",
    "Resource": [f"arn:aws:s3:::bucket/{i:04d}-object-key-padding-text" for i in range(140)],
}

FIXTURES: dict[str, tuple[dict[str, Any], set[tuple[str, str, str]]]] = {
    "imdsv2-required": (
        plan(
            lt("optional", metadataOptions={"httpEndpoint": "enabled", "httpTokens": "optional"}),
            instance("unset", metadataOptions=None),
            lt("imds-off", metadataOptions={"httpEndpoint": "disabled"}),  # no IMDS at all: fine
            lt("good"),
        ),
        {
            ("imdsv2-required", "optional", "metadataOptions.httpTokens"),
            ("imdsv2-required", "unset", "metadataOptions.httpTokens"),
        },
    ),
    "encryption-at-rest": (
        plan(
            res(t.EBS_VOLUME, "plain-volume", {"size": 100, "encrypted": False}, protect=True),
            lt("plain-root", blockDeviceMappings=[{"deviceName": "/dev/sda1", "ebs": {"encrypted": "false"}}]),
            lt("no-mappings", blockDeviceMappings=None),
            lt("instance-store-only", blockDeviceMappings=[{"deviceName": "/dev/sdb", "virtualName": "ephemeral0"}]),
            instance("no-root-settings", rootBlockDevice=None),
            instance("plain-data", ebsBlockDevices=[{"deviceName": "/dev/sdf", "encrypted": False}]),
            res(
                t.LUSTRE_FILE_SYSTEM,
                "aws-key-only",
                {"deploymentType": "PERSISTENT_2", "storageCapacity": 4800, **SQUASHED},
                protect=True,
            ),
            res(
                t.LUSTRE_FILE_SYSTEM,
                "scratch",
                {"deploymentType": "SCRATCH_2", "storageCapacity": 1200, **SQUASHED},
                protect=True,
            ),
            res(t.SECRET, "blank-key", {"name": "x", "kmsKeyId": ""}, protect=True),
            res(t.SECRET, "default-key", {"name": "y"}, protect=True),
            res(t.EKS_CLUSTER, "no-envelope", {"vpcConfig": {"endpointPublicAccess": False}}),
            res(
                t.EKS_CLUSTER,
                "envelope",
                {
                    "vpcConfig": {"endpointPublicAccess": False},
                    "encryptionConfig": {
                        "resources": ["secrets"],
                        "provider": {"keyArn": f"arn:aws:kms:us-east-1:{ACCOUNT}:key/k"},
                    },
                },
            ),
            lt("good"),
        ),
        {
            ("encryption-at-rest", "plain-volume", "encrypted"),
            ("encryption-at-rest", "plain-root", "blockDeviceMappings[0].ebs.encrypted"),
            ("encryption-at-rest", "no-mappings", "blockDeviceMappings"),
            ("encryption-at-rest", "instance-store-only", "blockDeviceMappings"),
            ("encryption-at-rest", "no-root-settings", "rootBlockDevice.encrypted"),
            ("encryption-at-rest", "plain-data", "ebsBlockDevices[0].encrypted"),
            ("encryption-at-rest", "aws-key-only", "kmsKeyId"),
            ("encryption-at-rest", "blank-key", "kmsKeyId"),
            ("encryption-at-rest", "no-envelope", "encryptionConfig"),
        },
    ),
    "encryption-at-rest-buckets": (
        plan(
            res(t.BUCKET, "bare", {"bucketPrefix": "bare-"}, protect=True, id_="bare-0001"),
            res(t.BUCKET, "kms", {"bucketPrefix": "kms-"}, protect=True, id_="kms-0001"),
            res(
                t.BUCKET_ENCRYPTION[0],
                "kms-sse",
                {"bucket": "kms-0001", "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}]},
            ),
            res(t.BUCKET, "empty-rule", {"bucketPrefix": "e-"}, protect=True, id_="e-0001"),
            res(t.BUCKET_ENCRYPTION[0], "e-sse", {"bucket": "e-0001", "rules": [{"bucketKeyEnabled": True}]}),
        ),
        {
            ("encryption-at-rest-buckets", "bare", "serverSideEncryptionConfiguration"),
            ("encryption-at-rest-buckets", "empty-rule", "serverSideEncryptionConfiguration"),
        },
    ),
    "no-public-ingress": (
        plan(
            res(
                t.SECURITY_GROUP_INGRESS_RULE,
                "ssh-world",
                {"cidrIpv4": "0.0.0.0/0", "fromPort": 22, "toPort": 22, "ipProtocol": "tcp"},
            ),
            res(t.SECURITY_GROUP_INGRESS_RULE, "v6-world", {"cidrIpv6": "::/0", "ipProtocol": "-1"}),
            res(
                t.SECURITY_GROUP_RULE,
                "legacy",
                {"type": "ingress", "cidrBlocks": ["10.0.0.0/8", "0.0.0.0/0"], "fromPort": 443, "toPort": 443},
            ),
            res(t.SECURITY_GROUP_RULE, "egress-world", {"type": "egress", "cidrBlocks": ["0.0.0.0/0"]}),
            res(t.SECURITY_GROUP, "inline", {"ingress": [{"cidrBlocks": ["10.0.0.0/16"]}, {"ipv6CidrBlocks": ["::/0"]}]}),
            res(t.SECURITY_GROUP_INGRESS_RULE, "vpc-only", {"cidrIpv4": "10.0.0.0/16", "fromPort": 443, "toPort": 443}),
            res(t.SECURITY_GROUP_INGRESS_RULE, "from-sg", {"referencedSecurityGroupId": "sg-1", "ipProtocol": "-1"}),
        ),
        {
            ("no-public-ingress", "ssh-world", "cidrIpv4"),
            ("no-public-ingress", "v6-world", "cidrIpv6"),
            ("no-public-ingress", "legacy", "cidrBlocks[1]"),
            ("no-public-ingress", "inline", "ingress[1].ipv6CidrBlocks[0]"),
        },
    ),
    "data-protected": (
        plan(
            res(t.LUSTRE_FILE_SYSTEM, "fs", {"deploymentType": "PERSISTENT_2", "kmsKeyId": "k", **SQUASHED}),
            res(t.BUCKET, "data", {"forceDestroy": False}, id_="data-1"),
            res(t.BUCKET, "artifacts", {"forceDestroy": True}, id_="art-1"),  # rebuilt by the program: exempt
            res(t.KMS_KEY, "key", {"enableKeyRotation": True}),
            res(t.EBS_VOLUME, "kept", {"encrypted": True}, protect=True),
            {**res(t.SECRET, "half-kept", {"name": "s"}, protect=True), "retainOnDelete": False},
            res(
                t.BUCKET_ENCRYPTION[0],
                "data-sse",
                {"bucket": "data-1", "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]},
            ),
            res(
                t.BUCKET_ENCRYPTION[0],
                "art-sse",
                {"bucket": "art-1", "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]},
            ),
        ),
        {
            ("data-protected", "fs", "protect"),
            ("data-protected", "fs", "retainOnDelete"),
            ("data-protected", "data", "protect"),
            ("data-protected", "data", "retainOnDelete"),
            ("data-protected", "key", "protect"),
            ("data-protected", "key", "retainOnDelete"),
            ("data-protected", "half-kept", "retainOnDelete"),
        },
    ),
    "vpc-flow-logs": (
        plan(
            res(t.VPC, "logged", {"cidrBlock": "10.0.0.0/16"}, id_="vpc-1"),
            res(t.FLOW_LOG, "logged-flow", {"vpcId": "vpc-1", "trafficType": "ALL"}),
            res(t.VPC, "dark", {"cidrBlock": "10.1.0.0/16"}, id_="vpc-2"),
            res(t.FLOW_LOG, "subnet-flow", {"subnetId": "subnet-1", "trafficType": "ALL"}),  # not the VPC's
        ),
        {("vpc-flow-logs", "dark", "flowLog")},
    ),
    "log-groups-encrypted-retained": (
        plan(
            res(
                "aws:cloudwatch/logGroup:LogGroup",
                "kept",
                {"name": "/a", "retentionInDays": 180, "kmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/k"},
            ),
            res(
                "aws:cloudwatch/logGroup:LogGroup",
                "forever",
                {"name": "/b", "kmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/k"},
            ),
            res("aws:cloudwatch/logGroup:LogGroup", "never-expire", {"name": "/c", "retentionInDays": 0, "kmsKeyId": "k"}),
            res("aws:cloudwatch/logGroup:LogGroup", "no-key", {"name": "/d", "retentionInDays": 30}),
            # A flow log's group is held to its retention only.
            res("aws:cloudwatch/logGroup:LogGroup", "flows", {"name": "/e", "retentionInDays": 365}, id_="/e"),
            res(t.FLOW_LOG, "flow", {"vpcId": "vpc-1", "logDestination": "arn:aws:logs:us-east-1:123456789012:log-group:/e"}),
        ),
        {
            ("log-groups-encrypted-retained", "forever", "retentionInDays"),
            ("log-groups-encrypted-retained", "never-expire", "retentionInDays"),
            ("log-groups-encrypted-retained", "no-key", "kmsKeyId"),
        },
    ),
    "no-public-grafana": (
        plan(
            res(
                "aws:grafana/workspace:Workspace",
                "private",
                {"networkAccessControl": {"prefixListIds": [], "vpceIds": ["vpce-1"]}},
            ),
            res("aws:grafana/workspace:Workspace", "open", {"permissionType": "SERVICE_MANAGED"}),
        ),
        {("no-public-grafana", "open", "networkAccessControl")},
    ),
    "eks-private-endpoint": (
        plan(
            res(
                t.EKS_CLUSTER,
                "public",
                {
                    "vpcConfig": {"endpointPublicAccess": True},
                    "encryptionConfig": {"resources": ["secrets"], "provider": {"keyArn": "k"}},
                },
            ),
            res(
                t.EKS_CLUSTER,
                "default",
                {"vpcConfig": {"subnetIds": ["s"]}, "encryptionConfig": {"resources": ["secrets"], "provider": {"keyArn": "k"}}},
            ),
            res(
                t.EKS_CLUSTER,
                "private",
                {
                    "vpcConfig": {"endpointPublicAccess": False},
                    "encryptionConfig": {"resources": ["secrets"], "provider": {"keyArn": "k"}},
                },
            ),
        ),
        {
            ("eks-private-endpoint", "public", "vpcConfig.endpointPublicAccess"),
            ("eks-private-endpoint", "default", "vpcConfig.endpointPublicAccess"),
        },
    ),
    "run-instances-tagged": (
        plan(
            role_policy("template-only", "agent", RUN_FROM_TEMPLATE),  # a grant that names only the templates
            role_policy("wildcard", "ops", {"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}),
            role_policy(
                "tag-if-exists",
                "ops2",
                {**RUN_TAGGED, "Condition": {"StringEqualsIfExists": RUN_TAGGED["Condition"]["StringEquals"]}},
            ),
            role_policy(
                "tagged",
                "agent2",
                RUN_TAGGED,
                {"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": f"arn:aws:ec2:us-east-1:{ACCOUNT}:subnet/*"},
            ),
            role_policy("denied", "ops3", {"Effect": "Deny", "Action": "ec2:RunInstances", "Resource": "*"}),
            role(
                "inline",
                "lambda.amazonaws.com",
                inlinePolicies=[
                    {"name": "all", "policy": json.dumps({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})}
                ],
            ),
        ),
        {
            ("run-instances-tagged", "template-only", "policy"),
            ("run-instances-tagged", "wildcard", "policy"),
            ("run-instances-tagged", "tag-if-exists", "policy"),
            ("run-instances-tagged", "inline", "inlinePolicies[0].policy"),
        },
    ),
    "no-ssm-parameter-reads": (
        plan(
            role("node", "ec2.amazonaws.com"),
            attach("node-ssm", "node", "AmazonSSMManagedInstanceCore"),
            role("fenced", "ec2.amazonaws.com"),  # the managed policy plus a deny of other paths: passes
            attach("fenced-ssm", "fenced", "AmazonSSMManagedInstanceCore"),
            role_policy("fenced-deny", "fenced", DENY_OTHER_PARAMETERS),
            role("site", "ssm.amazonaws.com"),
            role_policy("site-read", "site", READ_EVERY_PARAMETER),
            role("own", "ec2.amazonaws.com"),
            role_policy("own-ssm", "own", {"Effect": "Allow", "Action": "ssm:UpdateInstanceInformation", "Resource": "*"}),
            role("service", "lambda.amazonaws.com"),  # not a node role
            attach("service-ssm", "service", "AmazonSSMManagedInstanceCore"),
        ),
        {
            ("no-ssm-parameter-reads", "node-ssm", "policyArn"),
            ("no-ssm-parameter-reads", "site-read", "policy"),
        },
    ),
    "iam-inline-policy-size": (
        plan(
            role("crowded", "ec2.amazonaws.com"),
            role_policy("crowded-1", "crowded", BIG),
            role_policy("crowded-2", "crowded", BIG),
            role("roomy", "ec2.amazonaws.com"),
            role_policy("roomy-1", "roomy", BIG),
        ),
        {("iam-inline-policy-size", "crowded", "inlinePolicies")},
    ),
    "lustre-root-squash": (
        plan(
            lustre_fs("no-squash"),
            lustre_fs("zero", rootSquashConfiguration={"rootSquash": "0:0"}),
            lustre_fs("half", rootSquashConfiguration={"rootSquash": "65534:0", "noSquashNids": []}),
            lustre_fs("squashed", **SQUASHED),
        ),
        {
            ("lustre-root-squash", "no-squash", "rootSquashConfiguration.rootSquash"),
            ("lustre-root-squash", "zero", "rootSquashConfiguration.rootSquash"),
            ("lustre-root-squash", "half", "rootSquashConfiguration.rootSquash"),
        },
    ),
    "lustre-mounts-nosuid-nodev": (
        _lustre_mount_fixture(),
        {
            ("lustre-mounts-nosuid-nodev", "no-nosuid", "userData"),
            ("lustre-mounts-nosuid-nodev", "hand-mount", "userData"),
            ("lustre-mounts-nosuid-nodev", "undone", "userData"),
            ("lustre-mounts-nosuid-nodev", "pv-plain", "spec.mountOptions"),
            ("lustre-mounts-nosuid-nodev", "home-suid", "userData"),
        },
    ),
    "lustre-volumes-distinct": (
        plan(
            fsx_pv("team-a", "abc/teams/a", "fs-1/teams/a"),
            fsx_pv("team-b-same-handle", "abc/teams/b", "fs-1/teams/a"),
            fsx_pv("root-1", "abc", "fs-1"),
            fsx_pv("root-2", "abc", "fs-1-again"),  # another handle, the same directory
            fsx_pv("team-c", "abc/teams/c", "fs-1/teams/c"),
        ),
        {
            ("lustre-volumes-distinct", "team-b-same-handle", "spec.csi.volumeHandle"),
            ("lustre-volumes-distinct", "root-2", "spec.csi.volumeAttributes.mountname"),
        },
    ),
    "slurm-conf-allowed-keys": (
        _slurm_conf_fixture(),
        {("slurm-conf-allowed-keys", "head-files", "content"), ("slurm-conf-allowed-keys", "login", "userData")},
    ),
    "no-secrets-in-user-data": (
        _user_data_fixture(),
        {
            ("no-secrets-in-user-data", "head", "userDataBase64"),
            ("no-secrets-in-user-data", "eks-node", "userData"),
            ("no-secrets-in-user-data", "login", "userData"),
        },
    ),
    "team-namespace-pod-security": (
        plan(
            *team_namespace("unlabelled", enforce=None),
            *team_namespace("privileged", enforce="privileged"),
            *team_namespace("baseline", enforce="baseline"),  # the least the rule takes
            *team_namespace("restricted"),
            res(t.NAMESPACE, "platform", {"metadata": {"name": "gpu-operator"}}),  # not a team's: not this rule's
        ),
        {
            ("team-namespace-pod-security", "unlabelled-ns", "metadata.labels.pod-security.kubernetes.io/enforce"),
            ("team-namespace-pod-security", "privileged-ns", "metadata.labels.pod-security.kubernetes.io/enforce"),
        },
    ),
    "team-namespace-default-deny": (
        plan(
            *team_namespace("research"),
            *team_namespace("open", deny=False),
            netpol("open", "allow-all", {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}),
            *team_namespace("half", deny=False),  # denies ingress only: egress stays open
            netpol("half", "deny-in", {"podSelector": {}, "policyTypes": ["Ingress"]}),
            *team_namespace("some-pods", deny=False),  # denies for some pods only
            netpol(
                "some-pods", "deny-web", {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress", "Egress"]}
            ),
            *team_namespace("elsewhere", deny=False),  # the deny policy is another namespace's
            netpol("kube-system", "deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        ),
        {
            ("team-namespace-default-deny", "open-ns", "networkPolicy"),
            ("team-namespace-default-deny", "half-ns", "networkPolicy"),
            ("team-namespace-default-deny", "some-pods-ns", "networkPolicy"),
            ("team-namespace-default-deny", "elsewhere-ns", "networkPolicy"),
        },
    ),
}

# no-root-sessions: its resources live beside its table tests (they use this module's helpers, hence the late import).
from tests.tools.policy.session_fixtures import fixture_plan as _session_fixture  # noqa: E402

FIXTURES["no-root-sessions"] = (plan(*_session_fixture()[0]), _session_fixture()[1])
