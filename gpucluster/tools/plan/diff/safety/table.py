"""What a change to each resource type we create does in AWS (or Kubernetes): the update-safety table.

Pulumi's mock engine never runs a provider's diff, so an offline plan cannot know that turning off EFA
on a Lustre file system makes AWS build a new one. This table carries that knowledge: for every
resource type a shipped stack or example creates, the input properties whose change *replaces* the
resource (the provider's force-new properties; for bridged pulumi-aws these are terraform-provider-aws'
``ForceNew`` schema fields and ``CustomizeDiff`` rules), whether the resource *holds data* that a
replacement or deletion loses, and which kind of running work a change disrupts. Each entry names
where it comes from, so a reviewer can check it against the pinned provider.

Paths are Pulumi input names (camelCase); a change at or below a listed path counts. Launch templates
are versioned: every update makes a new version, never a new template (only the name replaces it).
``tests/tools/plan/test_safety.py`` fails on any type a shipped stack or example creates that is not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucluster.tools.plan.diff.safety.day2 import DAY2_TABLE
from gpucluster.tools.plan.diff.safety.hybrid import HYBRID_TABLE
from gpucluster.tools.plan.diff.safety.people import PEOPLE_TABLE
from gpucluster.tools.plan.diff.safety.types import TF, Safety

__all__ = ["TABLE", "TF", "Safety", "replace_reasons", "safety_of"]

K8S = "https://kubernetes.io/docs/reference/kubernetes-api/"


def _tf(path: str) -> str:
    return TF + path


def _bucket_child(source: str, *more: str) -> Safety:
    return Safety(_tf(source), replace_on=("bucket", *more))


def _k8s(source: str, *immutable: str) -> Safety:
    url = source if source.startswith("https://") else K8S + source
    return Safety(url, replace_on=("metadata.name", "metadata.namespace", *immutable))


_BASE: Mapping[str, Safety] = {
    # --- compute ------------------------------------------------------------------------------------
    "aws:autoscaling/group:Group": Safety(
        _tf("autoscaling/group.go"), replace_on=("name", "namePrefix"), disruption="node-group"
    ),
    "aws:ec2/launchTemplate:LaunchTemplate": Safety(
        _tf("ec2/ec2_launch_template.go"), replace_on=("name", "namePrefix"), disruption="template"
    ),
    "aws:ec2/instance:Instance": Safety(
        _tf("ec2/ec2_instance.go"),
        replace_on=(
            "ami",
            "availabilityZone",
            "subnetId",
            "privateIp",
            "keyName",
            "placementGroup",
            "networkInterfaces",
            "ebsBlockDevices",
            "ephemeralBlockDevices",
            "cpuOptions",
            "hostId",
            "associatePublicIpAddress",
            "ipv6Addresses",
            "launchTemplate",
            "rootBlockDevice.encrypted",
            "rootBlockDevice.kmsKeyId",
            "userDataReplaceOnChange",
        ),
        replace_when=(("userDataReplaceOnChange", ("userData", "userDataBase64")),),
        disruption="head-node",
    ),
    "aws:ec2/placementGroup:PlacementGroup": Safety(
        _tf("ec2/ec2_placement_group.go"),
        replace_on=("name", "strategy", "partitionCount", "spreadLevel"),
        disruption="placement",
    ),
    "aws:ec2/capacityReservation:CapacityReservation": Safety(
        _tf("ec2/ec2_capacity_reservation.go"),
        replace_on=(
            "availabilityZone",
            "instanceType",
            "instancePlatform",
            "tenancy",
            "ebsOptimized",
            "ephemeralStorage",
            "outpostArn",
            "placementGroupArn",
        ),
        disruption="capacity",
    ),
    "aws:ec2/networkInterface:NetworkInterface": Safety(
        _tf("ec2/vpc_network_interface.go"), replace_on=("subnetId", "interfaceType", "privateIp")
    ),
    "aws:ec2/eip:Eip": Safety(
        _tf("ec2/ec2_eip.go"),
        replace_on=("domain", "address", "publicIpv4Pool", "networkBorderGroup", "customerOwnedIpv4Pool", "ipamPoolId"),
    ),
    # --- storage (data) -----------------------------------------------------------------------------
    "aws:fsx/lustreFileSystem:LustreFileSystem": Safety(
        _tf("fsx/lustre_file_system.go"),
        replace_on=(
            "subnetIds",
            "deploymentType",
            "storageType",
            "kmsKeyId",
            "securityGroupIds",
            "backupId",
            "importPath",
            "exportPath",
            "importedFileChunkSize",
            "driveCacheType",
            "fileSystemTypeVersion",
            "efaEnabled",
            "copyTagsToBackups",
        ),
        replace_on_decrease=("storageCapacity", "metadataConfiguration.iops"),
        holds_data="every file on the Lustre file system",
    ),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": Safety(
        # FSx's UpdateDataRepositoryAssociation takes only ImportedFileChunkSize and the S3 policies.
        _tf("fsx/data_repository_association.go"),
        replace_on=("fileSystemId", "fileSystemPath", "dataRepositoryPath", "batchImportMetaDataOnCreate"),
    ),
    "aws:ebs/volume:Volume": Safety(
        _tf("ec2/ebs_volume.go"),
        replace_on=("availabilityZone", "encrypted", "kmsKeyId", "snapshotId", "outpostArn"),
        holds_data="the EBS volume's contents",
    ),
    "aws:ec2/volumeAttachment:VolumeAttachment": Safety(
        _tf("ec2/ec2_volume_attachment.go"), replace_on=("deviceName", "instanceId", "volumeId"), disruption="head-node"
    ),
    "aws:s3/bucket:Bucket": Safety(
        _tf("s3/bucket.go"), replace_on=("bucket", "bucketPrefix", "objectLockEnabled"), holds_data="every object in the bucket"
    ),
    "aws:s3/bucketObjectv2:BucketObjectv2": Safety(_tf("s3/object.go"), replace_on=("bucket", "key")),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": _bucket_child(
        "s3/bucket_lifecycle_configuration.go", "expectedBucketOwner"
    ),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": _bucket_child("s3/bucket_ownership_controls.go"),
    "aws:s3/bucketPolicy:BucketPolicy": _bucket_child("s3/bucket_policy.go"),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _bucket_child("s3/bucket_public_access_block.go"),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": _bucket_child(
        "s3/bucket_server_side_encryption_configuration.go", "expectedBucketOwner"
    ),
    "aws:s3/bucketVersioning:BucketVersioning": _bucket_child("s3/bucket_versioning.go", "expectedBucketOwner"),
    "aws:kms/key:Key": Safety(
        _tf("kms/key.go"),
        replace_on=("customerMasterKeySpec", "keyUsage", "multiRegion", "customKeyStoreId", "xksKeyId"),
        holds_data="the key material: data encrypted with it can no longer be read",
    ),
    "aws:kms/alias:Alias": Safety(_tf("kms/alias.go"), replace_on=("name", "namePrefix")),
    "aws:secretsmanager/secret:Secret": Safety(
        _tf("secretsmanager/secret.go"), replace_on=("name", "namePrefix"), holds_data="the secret's value"
    ),
    "aws:cloudwatch/logGroup:LogGroup": Safety(
        _tf("logs/group.go"), replace_on=("name", "namePrefix", "logGroupClass"), holds_data="the log events kept in it"
    ),
    # --- network ------------------------------------------------------------------------------------
    "aws:ec2/vpc:Vpc": Safety(_tf("ec2/vpc_.go"), replace_on=("cidrBlock", "ipv4IpamPoolId", "ipv4NetmaskLength")),
    "aws:ec2/subnet:Subnet": Safety(
        _tf("ec2/vpc_subnet.go"), replace_on=("vpcId", "cidrBlock", "availabilityZone", "availabilityZoneId", "outpostArn")
    ),
    "aws:ec2/internetGateway:InternetGateway": Safety(_tf("ec2/vpc_internet_gateway.go")),
    "aws:ec2/natGateway:NatGateway": Safety(
        _tf("ec2/vpc_nat_gateway.go"), replace_on=("allocationId", "subnetId", "connectivityType", "privateIp")
    ),
    "aws:ec2/routeTable:RouteTable": Safety(_tf("ec2/vpc_route_table.go"), replace_on=("vpcId",)),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": Safety(
        _tf("ec2/vpc_route_table_association.go"), replace_on=("subnetId", "gatewayId")
    ),
    "aws:ec2/securityGroup:SecurityGroup": Safety(
        _tf("ec2/vpc_security_group.go"), replace_on=("name", "namePrefix", "vpcId", "description")
    ),
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": Safety(_tf("ec2/vpc_default_security_group.go"), replace_on=("vpcId",)),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": Safety(
        _tf("vpc/security_group_ingress_rule.go"), replace_on=("securityGroupId",)
    ),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": Safety(
        _tf("vpc/security_group_egress_rule.go"), replace_on=("securityGroupId",)
    ),
    "aws:ec2/vpcEndpoint:VpcEndpoint": Safety(
        _tf("ec2/vpc_endpoint.go"), replace_on=("vpcId", "serviceName", "vpcEndpointType", "serviceRegion")
    ),
    "aws:ec2/flowLog:FlowLog": Safety(
        # Only tags are updatable.
        _tf("ec2/vpc_flow_log.go"),
        replace_on=(
            "vpcId",
            "subnetId",
            "eniId",
            "transitGatewayId",
            "logDestination",
            "logDestinationType",
            "trafficType",
            "iamRoleArn",
            "logFormat",
            "maxAggregationInterval",
            "destinationOptions",
            "deliverCrossAccountRole",
        ),
    ),
    "aws:route53/zone:Zone": Safety(_tf("route53/zone.go"), replace_on=("name", "delegationSetId")),
    "aws:route53/record:Record": Safety(_tf("route53/record.go"), replace_on=("zoneId", "name", "type")),
    # --- identity -----------------------------------------------------------------------------------
    "aws:iam/role:Role": Safety(_tf("iam/role.go"), replace_on=("name", "namePrefix", "path")),
    "aws:iam/instanceProfile:InstanceProfile": Safety(_tf("iam/instance_profile.go"), replace_on=("name", "namePrefix", "path")),
    "aws:iam/rolePolicy:RolePolicy": Safety(_tf("iam/role_policy.go"), replace_on=("name", "namePrefix", "role")),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": Safety(
        _tf("iam/role_policy_attachment.go"), replace_on=("role", "policyArn")
    ),
    # --- EKS ----------------------------------------------------------------------------------------
    "aws:eks/cluster:Cluster": Safety(
        _tf("eks/cluster.go"),
        replace_on=(
            "name",
            "roleArn",
            "vpcConfig.subnetIds",
            "vpcConfig.securityGroupIds",
            "kubernetesNetworkConfig",
            "encryptionConfig",
            "outpostConfig",
            "bootstrapSelfManagedAddons",
            "accessConfig.bootstrapClusterCreatorAdminPermissions",
        ),
        holds_data="every Kubernetes object stored in the cluster (etcd)",
        disruption="node-group",
    ),
    "aws:eks/nodeGroup:NodeGroup": Safety(
        _tf("eks/node_group.go"),
        replace_on=(
            "clusterName",
            "nodeGroupName",
            "nodeGroupNamePrefix",
            "nodeRoleArn",
            "subnetIds",
            "amiType",
            "capacityType",
            "diskSize",
            "instanceTypes",
            "remoteAccess",
            "launchTemplate.id",
            "launchTemplate.name",
        ),
        disruption="node-group",
    ),
    "aws:eks/addon:Addon": Safety(_tf("eks/addon.go"), replace_on=("addonName", "clusterName")),
    "aws:eks/accessEntry:AccessEntry": Safety(_tf("eks/access_entry.go"), replace_on=("clusterName", "principalArn", "type")),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": Safety(
        _tf("eks/access_policy_association.go"), replace_on=("clusterName", "principalArn", "policyArn", "accessScope")
    ),
    # --- Kubernetes (pulumi-kubernetes replaces on a name, a namespace or an immutable field) --------
    "pulumi:providers:kubernetes": Safety("https://www.pulumi.com/registry/packages/kubernetes/api-docs/provider/"),
    "kubernetes:core/v1:Namespace": Safety(
        K8S + "cluster-resources/namespace-v1/",
        replace_on=("metadata.name",),
        holds_data="every object in the namespace (deleting it deletes them)",
    ),
    "kubernetes:core/v1:ConfigMap": _k8s("config-and-storage-resources/config-map-v1/"),
    "kubernetes:core/v1:PersistentVolume": _k8s(
        "config-and-storage-resources/persistent-volume-v1/", "spec.csi", "spec.storageClassName", "spec.volumeMode"
    ),
    "kubernetes:core/v1:PersistentVolumeClaim": _k8s(
        "config-and-storage-resources/persistent-volume-claim-v1/",
        "spec.accessModes",
        "spec.selector",
        "spec.storageClassName",
        "spec.volumeMode",
        "spec.volumeName",
    ),
    "kubernetes:helm.sh/v3:Release": Safety(
        "https://www.pulumi.com/registry/packages/kubernetes/api-docs/helm/v3/release/", replace_on=("name", "namespace")
    ),
    # The health sweep (gpucluster/render/kubernetes/health.py). A DaemonSet's selector is immutable; a
    # ClusterRoleBinding's roleRef too (the API server refuses the update, so Pulumi replaces).
    "kubernetes:apps/v1:DaemonSet": _k8s("workload-resources/daemon-set-v1/", "spec.selector"),
    "kubernetes:core/v1:ServiceAccount": _k8s("authentication-resources/service-account-v1/"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": _k8s("authorization-resources/cluster-role-v1/"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": _k8s(
        "authorization-resources/cluster-role-binding-v1/", "roleRef"
    ),
    "kubernetes:rbac.authorization.k8s.io/v1:Role": _k8s("authorization-resources/role-v1/"),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": _k8s("policy-resources/network-policy-v1/"),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy": _k8s(
        "https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.33/#validatingadmissionpolicy-v1-admissionregistration-k8s-io"
    ),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding": _k8s(
        "https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.33/#validatingadmissionpolicybinding-v1-admissionregistration-k8s-io"
    ),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": _k8s("authorization-resources/role-binding-v1/", "roleRef"),
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue": _k8s("https://kueue.sigs.k8s.io/docs/reference/kueue.v1beta2/"),
    "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue": _k8s("https://kueue.sigs.k8s.io/docs/reference/kueue.v1beta2/"),
    "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor": _k8s("https://kueue.sigs.k8s.io/docs/reference/kueue.v1beta2/"),
    "kubernetes:kueue.x-k8s.io/v1beta2:Topology": _k8s("https://kueue.sigs.k8s.io/docs/reference/kueue.v1beta2/"),
}

TABLE: Mapping[str, Safety] = {**_BASE, **HYBRID_TABLE, **PEOPLE_TABLE, **DAY2_TABLE}


def safety_of(token: str) -> Safety | None:
    """The entry for a resource type; ``None`` for component resources and anything not in the table."""
    return TABLE.get(token)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def _number(doc: Mapping[str, Any], dotted: str) -> float | None:
    value: Any = doc
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def replace_reasons(token: str, changed: list[str], old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The changed input paths (``changed``) that force a replacement of a ``token`` resource, as the
    top-level properties Pulumi names in ``replaceReasons``."""
    entry = safety_of(token)
    if entry is None:
        return []
    reasons: list[str] = []
    for prefix in entry.replace_on:
        if any(_under(path, prefix) for path in changed):
            reasons.append(prefix)
    for flag, paths in entry.replace_when:
        if new.get(flag) is True:
            reasons += [p for p in paths if any(_under(path, p) for path in changed)]
    for prefix in entry.replace_on_decrease:
        before, after = _number(old, prefix), _number(new, prefix)
        if before is not None and after is not None and after < before:
            reasons.append(prefix)
    return reasons
