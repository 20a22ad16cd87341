"""The Slurm head node: its identity (role and instance profile), its network interface and data volume,
its user data and the instance itself.

The head node lives in a private subnet behind a network interface of its own (its address, and the
``slurmctld`` record compute nodes reach it at, survive a new head node), has no SSH ingress (Session
Manager instead; its security groups are the cluster's), IMDSv2, termination protection, an encrypted root
volume and an encrypted, protected and retained data volume for slurmctld's state, the accounting
database and the node agent's launch journal. Its role carries the node agent's EC2 rights and its own
needs (munge key, agent package); the documents are in :mod:`gpucluster.render.iam`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.agent_iam import LaunchRights, agent_policy_json
from gpucluster.components._shared.inputs import Inputs
from gpucluster.components._shared.roles import ec2_ssm_role
from gpucluster.components.compute._launch_template import NodeGroupResource
from gpucluster.components.slurm._artifact import AgentArtifact
from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.naming import with_name
from gpucluster.config.slurm import HeadNodeSpec
from gpucluster.render.compute.node import LustreMount
from gpucluster.render.core import WriteFile, gzip_b64, render_cloud_config
from gpucluster.render.iam import policy_json, slurm_head_policy
from gpucluster.render.slurm.accounts import accounts_contract
from gpucluster.render.slurm.agent import BASELINES_PREFIX, NODE_MAPS_PREFIX, LaunchTarget, agent_config
from gpucluster.render.slurm.head import HeadInputs, head_parts, head_title
from gpucluster.render.slurm.headfiles import HEAD_FILES_PREFIX, LIVE_KEY, HeadFilesRef, bundle_ref, small_cloud_config
from gpucluster.render.slurm.home import HomeMount
from gpucluster.render.slurm.names import SlurmContext, head_hostname
from gpucluster.render.slurm.usage import USAGE_PREFIX, has_usage_report

DATA_DEVICE = "/dev/sdf"
HEAD_TAG = "gpucluster:role"


def head_identity(
    name: str,
    *,
    ctx: SlurmContext,
    tags: dict[str, str],
    partition: pulumi.Output[str],
    account: pulumi.Output[str],
    secret_arn: pulumi.Output[str],
    artifact: AgentArtifact,
    rights: LaunchRights,
    child: pulumi.ResourceOptions,
) -> tuple[aws.iam.Role, aws.iam.InstanceProfile]:
    """The head node's role (Session Manager, the agent's EC2 rights, its own needs) and instance profile.

    ``rights`` are what the agent may launch: the dynamic groups (static groups belong to their Auto Scaling
    groups), their templates, instance types, subnets and security groups, the compute nodes' role and profile.
    """
    cluster = ctx.cluster
    role = ec2_ssm_role(
        f"{name}-head",
        description=f"Slurm head node of {cluster}: slurmctld and the node agent",
        tags=with_name(tags, f"{cluster}-slurm-head"),
        opts=child,
    )
    aws.iam.RolePolicy(
        f"{name}-agent",
        role=role.id,
        policy=agent_policy_json(rights, cluster=cluster, region=ctx.region, partition=partition, account=account),
        opts=child,
    )
    aws.iam.RolePolicy(
        f"{name}-head-access",
        role=role.id,
        policy=pulumi.Output.all(secret_arn, artifact.bucket.arn).apply(
            lambda v: policy_json(
                slurm_head_policy(
                    secret_arn=v[0],
                    bundle_arn=f"{v[1]}/{artifact.key}",
                    node_maps_arn=f"{v[1]}/{NODE_MAPS_PREFIX}*",
                    head_files_arn=f"{v[1]}/{HEAD_FILES_PREFIX}*",
                    users_arn=artifact.users_arn(v[1]),
                    usage_arn=f"{v[1]}/{USAGE_PREFIX}*" if has_usage_report(ctx, v[1]) else None,
                    baselines_arn=f"{v[1]}/{BASELINES_PREFIX}*" if ctx.slurm.updates.rebaseline.nodes else None,
                )
            )
        ),
        opts=child,
    )
    profile = aws.iam.InstanceProfile(
        f"{name}-head-profile", role=role.name, tags=with_name(tags, f"{cluster}-slurm-head"), opts=child
    )
    return role, profile


@dataclass(frozen=True)
class HeadNode:
    """What the cluster component exposes of its head node."""

    instance_id: pulumi.Output[str]
    private_ip: pulumi.Output[str]
    data_volume_id: pulumi.Output[str]
    user_data: pulumi.Output[str]
    """The rendered cloud-config (plain text; the instance gets it gzipped)."""


def head_node(
    name: str,
    *,
    ctx: SlurmContext,
    image_parameter: str,
    inputs: Inputs,
    tags: dict[str, str],
    protect: bool,
    subnet_id: pulumi.Input[str],
    security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    profile: aws.iam.InstanceProfile,
    artifact: AgentArtifact,
    node_groups: Mapping[str, NodeGroupResource],
    node_group_subnet_ids: Mapping[str, pulumi.Input[Sequence[pulumi.Input[str]]]],
    shared_storage: Sequence[SharedStorage],
    parent: pulumi.Resource,
    home_server: pulumi.Output[str] | None = None,
    host_key_secret_arn: pulumi.Output[str] | None = None,
    spot_queue_url: pulumi.Output[str] | None = None,
    metrics_workspace_id: pulumi.Input[str] | None = None,
) -> HeadNode:
    """The interface, the data volume (protected and retained when ``protect``), the instance and the
    volume's attachment, as children of ``parent``. The user data carries the agent's config, built from
    every node group's launch template, subnets and placement group once AWS has made them; ``inputs`` puts
    back the Outputs a program passed (the head node's AMI and key, reservation ids in the agent's config)."""
    cluster = ctx.cluster
    head = ctx.slurm.head_node
    child = pulumi.ResourceOptions(parent=parent)
    keep = pulumi.ResourceOptions(parent=parent, protect=protect, retain_on_delete=protect)
    head_tags = with_name({**tags, HEAD_TAG: "head"}, head_hostname(cluster))
    eni = aws.ec2.NetworkInterface(
        f"{name}-head-eni",
        subnet_id=subnet_id,
        security_groups=security_group_ids,
        description=f"Slurm head node of {cluster}: keeps its address across head node replacements",
        tags=head_tags,
        opts=child,
    )
    volume = aws.ebs.Volume(
        f"{name}-head-data",
        availability_zone=head.availability_zone,
        size=head.data_volume_size_gib,
        type="gp3",
        iops=head.data_volume_iops,
        throughput=head.data_volume_throughput,
        encrypted=True,
        kms_key_id=inputs.real_optional(head.kms_key_id),
        final_snapshot=protect,
        tags=with_name(tags, f"{cluster}-slurm-data"),
        opts=keep,
    )
    if head.image_id:
        image: pulumi.Input[str] = inputs.real(head.image_id)
    else:
        image = aws.ssm.get_parameter_output(name=image_parameter, opts=pulumi.InvokeOutputOptions(parent=parent)).value

    people = (home_server, host_key_secret_arn, spot_queue_url, metrics_workspace_id)
    parts = _head_parts(ctx, inputs, volume.id, artifact, node_groups, node_group_subnet_ids, shared_storage, people)
    user_data, files = _user_data_and_files(name, ctx, inputs, parts, artifact, tags, child)
    instance = _instance(
        name,
        head,
        image,
        profile,
        eni,
        user_data,
        head_tags,
        inputs,
        (artifact.package, *files, *([artifact.users] if artifact.users else [])),
        parent,
    )
    aws.ec2.VolumeAttachment(
        f"{name}-head-data",
        device_name=DATA_DEVICE,
        volume_id=volume.id,
        instance_id=instance.id,
        stop_instance_before_detaching=True,
        opts=child,
    )
    return HeadNode(instance_id=instance.id, private_ip=eni.private_ip, data_volume_id=volume.id, user_data=user_data)


def _head_parts(
    ctx: SlurmContext,
    inputs: Inputs,
    volume_id: pulumi.Output[str],
    artifact: AgentArtifact,
    node_groups: Mapping[str, NodeGroupResource],
    node_group_subnet_ids: Mapping[str, pulumi.Input[Sequence[pulumi.Input[str]]]],
    shared_storage: Sequence[SharedStorage],
    people: tuple[pulumi.Input[str] | None, ...] = (None, None, None, None),
) -> pulumi.Output[tuple[tuple[WriteFile, ...], str, str | None, bool]]:
    """The head node's files, split (``head_parts``: the user data's, the bundle's and the live bundle's text with
    stand-ins, whether it mounts Lustre), once the data volume, the agent's bucket, every node group's launch template, subnets and placement
    group, and the file system's names are known."""
    head = ctx.slurm.head_node
    targets = pulumi.Output.all(
        *[
            pulumi.Output.all(
                ng.launch_template_id,
                pulumi.Output.from_input(node_group_subnet_ids[g]),
                ng.placement_group_name if ng.placement_group_name is not None else None,
            )
            for g, ng in node_groups.items()
        ]
    )
    lustre = next((s for s in shared_storage if s.fs_type == "lustre"), None) if head.mount_shared_storage else None
    lustre_values = (
        pulumi.Output.all(lustre.server, lustre.mount_name, lustre.file_system_id)
        if lustre is not None
        else pulumi.Output.from_input([])
    )
    group_names = list(node_groups)

    def render(values: list[Any]) -> tuple[tuple[WriteFile, ...], str, str | None, bool]:
        volume_id, bucket_name, resolved, mount, (home, host_keys, spot_queue, workspace) = values
        launch = {
            n: LaunchTarget(str(t[0]), tuple(str(s) for s in t[1]), str(t[2]) if t[2] else None)
            for n, t in zip(group_names, resolved, strict=True)
        }
        mounted = None
        if lustre is not None and mount:
            mounted = LustreMount(
                file_system=str(mount[2]),
                dns_name=str(mount[0]),
                mount_name=str(mount[1]),
                mount_point=lustre.mount_point,
                mount_options=lustre.mount_options,
            )
        inputs = HeadInputs(
            data_volume_id=str(volume_id),
            agent=artifact.bundle(str(bucket_name)),
            agent_config=agent_config(ctx, launch, str(bucket_name), str(spot_queue) if spot_queue else None),
            lustre=mounted,
            home=HomeMount(str(home)) if home else None,
            login_host_key_secret_arn=str(host_keys) if host_keys else None,
            metrics_workspace_id=str(workspace) if workspace else None,
        )
        return (*head_parts(ctx, inputs), mounted is not None)

    extra = pulumi.Output.all(*people)
    return pulumi.Output.all(volume_id, artifact.bucket.bucket, targets, lustre_values, extra).apply(render)


def _user_data_and_files(
    name: str,
    ctx: SlurmContext,
    inputs: Inputs,
    parts: pulumi.Output[tuple[tuple[WriteFile, ...], str, str | None, bool]],
    artifact: AgentArtifact,
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> tuple[pulumi.Output[str], tuple[aws.s3.BucketObjectv2, ...]]:
    """The bundle of the head node's files, stored in the artifact bucket under a key that carries its hash
    (``<name>-head-files``), and the user data that names it; with teams, the live bundle at its fixed key
    (``<name>-head-live``: a team's change updates it in place, not the user data). Outputs the program gave (a
    reservation id in the agent's config) replace their stand-ins before the bundle is hashed."""
    text: pulumi.Output[str] = parts.apply(lambda p: inputs.real_text(p[1]))
    ref: pulumi.Output[HeadFilesRef] = pulumi.Output.all(artifact.bucket.bucket, text).apply(lambda v: bundle_ref(v[0], v[1]))
    files = aws.s3.BucketObjectv2(
        f"{name}-head-files",
        bucket=artifact.bucket.id,
        key=ref.apply(lambda r: r.key),
        content=text,
        content_type="application/json",
        tags=with_name(tags, f"{ctx.cluster}-slurm-head-files"),
        opts=child,
    )

    objects = [files]
    if accounts_contract(ctx) is not None:  # the head node's live files: the teams' accounts (render/slurm/headfiles.py)
        objects.append(
            aws.s3.BucketObjectv2(
                f"{name}-head-live",
                bucket=artifact.bucket.id,
                key=LIVE_KEY,
                content=parts.apply(lambda p: inputs.real_text(p[2] or "")),
                content_type="application/json",
                tags=with_name(tags, f"{ctx.cluster}-slurm-head-live"),
                opts=child,
            )
        )

    def render(values: list[Any]) -> str:
        (kept, _, live, lustre), at = values
        config = small_cloud_config(kept, at, lustre=lustre, live=live is not None)
        return render_cloud_config(head_title(ctx), config, gzipped=True)

    user_data: pulumi.Output[str] = pulumi.Output.all(parts, ref).apply(render).apply(inputs.real_text)
    return user_data, tuple(objects)


def _instance(
    name: str,
    head: HeadNodeSpec,
    image: pulumi.Input[str],
    profile: aws.iam.InstanceProfile,
    eni: aws.ec2.NetworkInterface,
    user_data: pulumi.Output[str],
    head_tags: dict[str, str],
    inputs: Inputs,
    fetched: tuple[aws.s3.BucketObjectv2, ...],
    parent: pulumi.Resource,
) -> aws.ec2.Instance:
    """The head node's instance on its own interface: IMDSv2, an encrypted root volume, termination protection. It
    depends on the objects it fetches at first boot (``fetched``: the agent package, its files' bundle)."""
    return aws.ec2.Instance(
        f"{name}-head",
        ami=image,
        instance_type=head.instance_type,
        iam_instance_profile=profile.name,
        network_interfaces=[aws.ec2.InstanceNetworkInterfaceArgs(device_index=0, network_interface_id=eni.id)],
        metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1, instance_metadata_tags="disabled"
        ),
        root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
            volume_type="gp3",
            volume_size=head.root_volume_size_gib,
            encrypted=True,
            kms_key_id=inputs.real_optional(head.kms_key_id),
            delete_on_termination=True,
        ),
        disable_api_termination=True,
        user_data_base64=user_data.apply(gzip_b64),
        tags=head_tags,
        volume_tags=head_tags,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=list(fetched),
            # The interface and the data volume belong to one head node at a time; a new AMI in the
            # SSM parameter does not replace a running head node (replace it on purpose).
            delete_before_replace=True,
            ignore_changes=["ami"],
        ),
    )
