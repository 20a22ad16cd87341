"""The Pulumi type tokens the rules look at (pulumi-aws 7), named once."""

from __future__ import annotations

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
LAUNCH_CONFIGURATION = "aws:ec2/launchConfiguration:LaunchConfiguration"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
DEFAULT_SECURITY_GROUP = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"
SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
SECURITY_GROUP_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
VPC = "aws:ec2/vpc:Vpc"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
EBS_VOLUME = "aws:ebs/volume:Volume"
EFS_FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
LUSTRE_FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
FSX_FILE_SYSTEMS = (
    LUSTRE_FILE_SYSTEM,
    "aws:fsx/ontapFileSystem:OntapFileSystem",
    "aws:fsx/openZfsFileSystem:OpenZfsFileSystem",
    "aws:fsx/windowsFileSystem:WindowsFileSystem",
)
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
BUCKETS = (BUCKET, "aws:s3/bucketV2:BucketV2")
BUCKET_ENCRYPTION = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
KMS_KEY = "aws:kms/key:Key"
SECRET = "aws:secretsmanager/secret:Secret"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
TEAM_LABEL = "gpucluster/team"
"""The label of a team's namespace (gpucluster.render.kubernetes.TEAM_LABEL; the pack imports no renderer)."""

DATA_HOLDING = (*FSX_FILE_SYSTEMS, EFS_FILE_SYSTEM, EBS_VOLUME, *BUCKETS, KMS_KEY, SECRET)
"""Resources whose replacement or deletion loses data: file systems, EBS data volumes, buckets, KMS
keys (everything encrypted with a deleted key is lost) and secrets (a new munge key locks every node
out until it restarts)."""
