"""EksCluster: an Amazon EKS cluster for GPU training, and a Kubernetes provider for what runs on it.

The control plane has a private endpoint by default, envelope-encrypts Secrets with a KMS key that
rotates, and lets IAM principals in through access entries (API authentication mode). Managed add-ons
are pinned (vpc-cni at a version that handles EFA-only interfaces; it gets AWS credentials through EKS
Pod Identity, not the node role). A small system node group runs cluster services. Each
``scheduler: kubernetes`` node group becomes an EKS managed node group built on
:class:`~gpucluster.components.gpu_node_group.GpuNodeGroup`'s launch template — every EFA interface, the placement
group, the capacity reservation or block — booting the EKS-optimized AL2023 AMI of its accelerator,
tainted ``nvidia.com/gpu=true:NoSchedule`` and labelled for Kueue.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpucluster.components.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from gpucluster.components.shared_storage import SharedStorage
from gpucluster.config.effective import effective_desired
from gpucluster.config.kubernetes import FSX_CSI_ADDON, KubernetesSpec, eks_ami_type
from gpucluster.config.naming import NODE_GROUP_TAG, with_name
from gpucluster.config.node_group import CapacitySpec, NodeGroupSpec
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.render.kubernetes import fsx_csi_addon_configuration, node_config, node_labels, node_taints, nodeadm_user_data

TOKEN = "gpucluster:index:EksCluster"
AL2023_ROOT_DEVICE = "/dev/xvda"
# EKS managed node groups' capacity types, by how gpucluster buys the instances.
CAPACITY_TYPES = {
    "on-demand": "ON_DEMAND",
    "capacity-reservation": "ON_DEMAND",
    "spot": "SPOT",
    "capacity-block": "CAPACITY_BLOCK",
}
# Node role: join the cluster, pull images, Session Manager. The CNI permissions go to vpc-cni alone.
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore")
# Add-ons that must run before nodes can become Ready; CoreDNS (and the CSI driver) need nodes.
BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")


@dataclass
class EksClusterArgs:
    """Inputs of :class:`EksCluster`."""

    cluster_name: str
    """Name of the EKS cluster (and prefix of its resources' names). Required."""

    region: str
    """AWS region, for the kubeconfig's ``aws eks get-token``. Required."""

    kubernetes: KubernetesSpec
    """The ``gpucluster:kubernetes`` section: version, endpoint, access entries, add-ons, system nodes."""

    cluster_subnet_ids: Sequence[pulumi.Input[str]]
    """Private subnets, in at least two Availability Zones, for the control plane's interfaces and the
    system node group. Required."""

    node_groups: Sequence[NodeGroupSpec] = ()
    """The resolved ``scheduler: kubernetes`` node groups. Default: none."""

    node_group_subnet_ids: Mapping[str, Sequence[pulumi.Input[str]]] = field(default_factory=dict)
    """Subnets per node group name (one zone for EFA groups). Required for every node group."""

    security_group_ids: Sequence[pulumi.Input[str]] = ()
    """Security groups for the GPU nodes' interfaces (EFA and node groups); the cluster security group
    is added so nodes and the control plane talk. Default: none."""

    user_data: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """cloud-config per node group name; wrapped with a nodeadm ``NodeConfig`` into MIME multi-part
    user data, which EKS merges with its own. Default: none."""

    shared_storage: Sequence[SharedStorage] = ()
    """File systems of the cluster: a Lustre one adds the FSx CSI driver add-on. Default: none."""

    instance_store_for_pods: bool = True
    """Put instance-store NVMe disks under containerd and kubelet (nodeadm RAID 0) on nodes that have
    them. Default true; false when the disks are already used for scratch space."""

    protect_data: bool = True
    """Protect and retain the Secrets encryption key it creates (``pulumi destroy`` refuses; deleting
    the stack leaves it): a deleted key leaves every Secret of the cluster unreadable. Default true."""

    tags: dict[str, str] = field(default_factory=dict)
    """Tags on every taggable child. Default: none."""


def _assume_role_policy(service: str, *actions: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": list(actions) or "sts:AssumeRole"}],
        }
    )


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig that authenticates with ``aws eks get-token`` (no credentials in it)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "current-context": cluster_name,
            "users": [
                {
                    "name": cluster_name,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
                        }
                    },
                }
            ],
        },
        indent=2,
    )


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with access entries, KMS-encrypted Secrets, pinned add-ons, system and GPU node groups."""

    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    """Kubernetes provider for this cluster: hand it to GpuOperator, Kueue… through ``opts``."""
    gpu_node_groups: dict[str, GpuNodeGroup]
    """The launch template (and placement group) of each GPU node group."""
    managed_node_groups: dict[str, aws.eks.NodeGroup]
    """EKS managed node groups by node group name (``system`` included)."""

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        spec = args.kubernetes
        catalog = load_catalog()
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        prefix = args.cluster_name
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition

        def managed_policy(policy: str) -> pulumi.Output[str]:
            return partition.apply(lambda p: f"arn:{p}:iam::aws:policy/{policy}")

        # Secrets are always envelope-encrypted: with the caller's key, or a new one that rotates.
        if spec.secrets_kms_key_arn:
            key_arn: pulumi.Input[str] = spec.secrets_kms_key_arn
        else:
            key = aws.kms.Key(
                f"{name}-secrets",
                description=f"EKS Secrets envelope encryption for {prefix}",
                enable_key_rotation=True,
                deletion_window_in_days=30,
                tags=with_name(tags, f"{prefix}-eks-secrets"),
                opts=pulumi.ResourceOptions(parent=self, protect=args.protect_data, retain_on_delete=args.protect_data),
            )
            aws.kms.Alias(f"{name}-secrets", name=f"alias/{prefix}-eks-secrets", target_key_id=key.key_id, opts=child)
            key_arn = key.arn

        cluster_role = aws.iam.Role(
            f"{name}-cluster-role",
            assume_role_policy=_assume_role_policy("eks.amazonaws.com", "sts:AssumeRole", "sts:TagSession"),
            description=f"EKS control plane of {prefix}",
            tags=with_name(tags, f"{prefix}-eks-cluster"),
            opts=child,
        )
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster-policy", role=cluster_role.name, policy_arn=managed_policy("AmazonEKSClusterPolicy"), opts=child
        )
        endpoint = spec.endpoint
        cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=prefix,
            version=spec.version,
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=list(args.cluster_subnet_ids),
                endpoint_private_access=endpoint.private_access,
                endpoint_public_access=endpoint.public_access,
                public_access_cidrs=(list(endpoint.public_access_cidrs) or None) if endpoint.public_access else None,
            ),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API", bootstrap_cluster_creator_admin_permissions=True
            ),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key_arn), resources=["secrets"]
            ),
            enabled_cluster_log_types=list(spec.enabled_log_types),
            # Add-ons are installed below, as managed add-ons at pinned versions, not EKS's unmanaged ones.
            bootstrap_self_managed_addons=False,
            tags=with_name(tags, prefix),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster_policy]),
        )
        self.cluster_name = cluster.name
        self.endpoint = cluster.endpoint
        self.oidc_issuer = cluster.identities.apply(lambda ids: next((o.issuer or "" for i in ids for o in (i.oidcs or [])), ""))
        self.cluster_security_group_id = cluster.vpc_config.apply(lambda v: v.cluster_security_group_id or "")

        self._access_entries(name, spec, cluster, partition, tags)

        node_role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=_assume_role_policy("ec2.amazonaws.com", "sts:AssumeRole"),
            description=f"EKS nodes of {prefix}",
            tags=with_name(tags, f"{prefix}-eks-node"),
            opts=child,
        )
        node_policies = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{p}", role=node_role.name, policy_arn=managed_policy(p), opts=child)
            for p in NODE_POLICIES
        ]
        self.node_role_arn = node_role.arn

        lustre = any(s.fs_type == "lustre" for s in args.shared_storage)
        versions = spec.addon_versions_for(lustre)
        # The Pod Identity agent first: vpc-cni takes its AWS credentials through it.
        agent = self._addon(name, "eks-pod-identity-agent", versions, cluster, tags, [])
        early = [agent]
        for addon_name in ("vpc-cni", "kube-proxy"):
            associations = self._cni_identity(name, managed_policy, tags) if addon_name == "vpc-cni" else None
            early.append(self._addon(name, addon_name, versions, cluster, tags, [agent], associations))
        node_deps: list[pulumi.Resource] = [*node_policies, *early]

        self.managed_node_groups = {"system": self._system_node_group(name, spec, cluster, node_role, args, tags, node_deps)}
        self.gpu_node_groups = {}
        for group in args.node_groups:
            self._gpu_node_group(name, group, cluster, node_role, args, tags, node_deps, catalog)
        # CoreDNS and the FSx CSI driver become healthy only once nodes run them.
        nodes: list[pulumi.Resource] = list(self.managed_node_groups.values())
        for addon_name in versions:
            if addon_name not in BEFORE_NODES:
                config = fsx_csi_addon_configuration(args.region) if addon_name == FSX_CSI_ADDON else None
                self._addon(name, addon_name, versions, cluster, tags, nodes, configuration=config)

        ca_data = cluster.certificate_authority.apply(lambda ca: ca.data or "")
        self.kubeconfig = pulumi.Output.all(cluster.name, cluster.endpoint, ca_data).apply(
            lambda v: kubeconfig(v[0], v[1], v[2], args.region)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(self.managed_node_groups.values())),
        )
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "endpoint": self.endpoint,
                "oidcIssuer": self.oidc_issuer,
                "clusterSecurityGroupId": self.cluster_security_group_id,
                "nodeRoleArn": self.node_role_arn,
                "nodeGroups": {n: ng.node_group_name for n, ng in self.managed_node_groups.items()},
            }
        )

    # --- access ------------------------------------------------------------------------------------------
    def _access_entries(
        self, name: str, spec: KubernetesSpec, cluster: aws.eks.Cluster, partition: pulumi.Output[str], tags: dict[str, str]
    ) -> None:
        for j, entry in enumerate(spec.access_entries):
            access = aws.eks.AccessEntry(
                f"{name}-access-{j}",
                cluster_name=cluster.name,
                principal_arn=entry.principal_arn,
                kubernetes_groups=list(entry.kubernetes_groups) or None,
                type="STANDARD",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for policy in entry.policies:
                aws.eks.AccessPolicyAssociation(
                    f"{name}-access-{j}-{policy}",
                    cluster_name=cluster.name,
                    principal_arn=entry.principal_arn,
                    policy_arn=partition.apply(lambda p, policy=policy: f"arn:{p}:eks::aws:cluster-access-policy/{policy}"),
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(
                        type="namespace" if entry.namespaces else "cluster", namespaces=list(entry.namespaces) or None
                    ),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[access]),
                )

    # --- add-ons -----------------------------------------------------------------------------------------
    def _cni_identity(
        self, name: str, managed_policy: Callable[[str], pulumi.Output[str]], tags: dict[str, str]
    ) -> list[aws.eks.AddonPodIdentityAssociationArgs]:
        """Least privilege: the CNI's EC2 permissions go to the aws-node service account (EKS Pod
        Identity), not to the node role every pod on the node could use."""
        role = aws.iam.Role(
            f"{name}-vpc-cni",
            assume_role_policy=_assume_role_policy("pods.eks.amazonaws.com", "sts:AssumeRole", "sts:TagSession"),
            description="vpc-cni (kube-system/aws-node) through EKS Pod Identity",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-vpc-cni",
            role=role.name,
            policy_arn=managed_policy("AmazonEKS_CNI_Policy"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return [aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account="aws-node")]

    def _addon(
        self,
        name: str,
        addon_name: str,
        versions: Mapping[str, str | None],
        cluster: aws.eks.Cluster,
        tags: dict[str, str],
        depends_on: Sequence[pulumi.Resource],
        associations: Sequence[aws.eks.AddonPodIdentityAssociationArgs] | None = None,
        configuration: dict[str, Any] | None = None,
    ) -> aws.eks.Addon:
        return aws.eks.Addon(
            f"{name}-{addon_name}",
            cluster_name=cluster.name,
            addon_name=addon_name,
            addon_version=versions[addon_name],
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=list(associations) if associations else None,
            configuration_values=json.dumps(configuration, sort_keys=True) if configuration else None,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)),
        )

    # --- node groups -------------------------------------------------------------------------------------
    def _system_node_group(
        self,
        name: str,
        spec: KubernetesSpec,
        cluster: aws.eks.Cluster,
        node_role: aws.iam.Role,
        args: EksClusterArgs,
        tags: dict[str, str],
        deps: Sequence[pulumi.Resource],
    ) -> aws.eks.NodeGroup:
        system = spec.system_node_group
        facts = load_catalog()[system.instance_type]
        group_tags = {**tags, NODE_GROUP_TAG: "system"}
        template = aws.ec2.LaunchTemplate(
            f"{name}-system-lt",
            description=f"{args.cluster_name}: EKS system nodes",
            instance_type=system.instance_type,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=AL2023_ROOT_DEVICE,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=system.disk_size_gib,
                        volume_type="gp3",
                        iops=3000,
                        throughput=125,
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            update_default_version=True,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(
                    resource_type=kind, tags=with_name(group_tags, f"{args.cluster_name}-system")
                )
                for kind in ("instance", "volume")
            ],
            tags=with_name(group_tags, f"{args.cluster_name}-system"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=cluster.name,
            node_group_name=f"{args.cluster_name}-system",
            node_role_arn=node_role.arn,
            subnet_ids=list(args.cluster_subnet_ids),
            ami_type=eks_ami_type(facts),
            capacity_type="ON_DEMAND",
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=system.min_size, max_size=system.max_size, desired_size=system.effective_desired_size
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            labels={"gpucluster/node-group": "system"},
            tags=with_name(group_tags, f"{args.cluster_name}-system"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(deps)),
        )

    def _gpu_node_group(
        self,
        name: str,
        group: NodeGroupSpec,
        cluster: aws.eks.Cluster,
        node_role: aws.iam.Role,
        args: EksClusterArgs,
        tags: dict[str, str],
        deps: Sequence[pulumi.Resource],
        catalog: Catalog,
    ) -> None:
        facts = catalog[group.instance_type]
        # EKS buys Spot itself (capacityType SPOT) and refuses a template that asks for it.
        template_group = group.model_copy(update={"capacity": CapacitySpec()}) if group.capacity.type == "spot" else group
        config = node_config(facts, args.instance_store_for_pods)
        user_data = pulumi.Output.from_input(args.user_data.get(group.name, "#cloud-config\n")).apply(
            lambda text: nodeadm_user_data(text, config)
        )
        security_groups = [*args.security_group_ids, self.cluster_security_group_id]
        subnets = list(args.node_group_subnet_ids[group.name])
        ng = GpuNodeGroup(
            f"{name}-{group.name}",
            GpuNodeGroupArgs(
                node_group=template_group,
                cluster_name=args.cluster_name,
                subnet_ids=subnets,
                security_group_ids=security_groups,
                user_data=user_data,
                gzip_user_data=False,  # EKS needs MIME multi-part text to merge its nodeadm part into
                create_auto_scaling_group=False,
                root_device_name=AL2023_ROOT_DEVICE,
                set_image_id=False,
                set_instance_profile=False,
                tags=tags,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.gpu_node_groups[group.name] = ng
        self.managed_node_groups[group.name] = aws.eks.NodeGroup(
            f"{name}-{group.name}-mng",
            cluster_name=cluster.name,
            node_group_name=f"{args.cluster_name}-{group.name}",
            node_role_arn=node_role.arn,
            subnet_ids=subnets,
            ami_type=eks_ami_type(facts),
            capacity_type=CAPACITY_TYPES[group.capacity.type],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=ng.launch_template_id, version=ng.launch_template_version.apply(str)
            ),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=group.min_size, max_size=group.max_size, desired_size=effective_desired(group)
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            labels=node_labels(group, facts),
            taints=[aws.eks.NodeGroupTaintArgs(key=t["key"], value=t["value"], effect="NO_SCHEDULE") for t in node_taints(facts)],
            tags=with_name({**tags, **group.tags, NODE_GROUP_TAG: group.name}, f"{args.cluster_name}-{group.name}"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(deps)),
        )
