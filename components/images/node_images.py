"""The baked images of a Slurm cluster's compute node groups (``slurm.images``; docs/images.md).

Per baked group: an Image Builder ``Component`` whose document runs the group's rendered install part
(:func:`gpucluster.render.slurm.image.component_document`), an ``ImageRecipe`` on the group's base image (the
``imageId``, the ``imageLock`` or the SSM parameter's AMI: the same one its launch template named before), a
``DistributionConfiguration`` that names the AMI after the cluster, the group and the recipe's version, and an
``Image`` (built during ``pulumi up``, synchronously) whose AMI the group's launch template names. Shared: an
``InfrastructureConfiguration`` in the cluster's private subnet, a security group with egress only (the build fetches
packages through the NAT gateway; nothing may reach it), an instance profile with Session Manager's rights (Image
Builder drives the build through Systems Manager) plus the managed ``EC2InstanceProfileForImageBuilder`` (what the
Image Builder user guide's IAM prerequisites name for the build instance) and ``s3:GetObject`` on exactly the node
package, IMDSv2 required, instances terminated on failure.

Components and recipes are immutable per version: their versions are hashes of their content
(:func:`~gpucluster.render.slurm.image.semantic_version`), so a changed install part or base image is a new
version, a new image, a new AMI, and a new launch template version: the rolling replacement's cue."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.roles import ec2_ssm_role
from gpucluster.components.compute._launch_template import base_image
from gpucluster.components.slurm._args import SlurmBuild
from gpucluster.components.slurm._artifact import AgentArtifact
from gpucluster.config.naming import with_name
from gpucluster.render.iam import managed_policy_arn, policy_json
from gpucluster.render.slurm.image import component_description, component_document, needs_package, semantic_version
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.compute.node_group import SlurmGroup

IMAGE_BUILDER_INSTANCE_POLICY = "EC2InstanceProfileForImageBuilder"
BUILD_TIMEOUT_MINUTES = 120  # apt, the Lustre client and the tests: well under an hour on an m7i.xlarge


@dataclass(frozen=True)
class ImageBuild:
    """What the images are built from and where."""

    ctx: SlurmContext
    groups: Sequence[SlurmGroup]
    """The baked groups (:attr:`SlurmGroup.baked`)."""
    base_images: Mapping[str, pulumi.Input[str]]
    """Each group's base AMI, as its launch template would have named it."""
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    """A private subnet of the cluster (the first baked group's)."""
    build_instance_type: str
    package_bucket: pulumi.Input[str]
    package_bucket_arn: pulumi.Input[str]
    package_key: str
    package_sha256: str | None
    """The node package the images hold; None when the nodes need none."""
    partition: pulumi.Input[str]
    tags: dict[str, str]


def _infrastructure(name: str, build: ImageBuild, child: pulumi.ResourceOptions) -> aws.imagebuilder.InfrastructureConfiguration:
    cluster, tags = build.ctx.cluster, build.tags
    sg = aws.ec2.SecurityGroup(
        f"{name}-build-sg",
        vpc_id=build.vpc_id,
        description=f"gpucluster {cluster}: Image Builder build instances (egress only)",
        egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])],
        tags=with_name(tags, f"{cluster}-image-build"),
        opts=child,
    )
    role = ec2_ssm_role(f"{name}-build", description=f"Image Builder build instances of {cluster}", tags=tags, opts=child)
    aws.iam.RolePolicyAttachment(
        f"{name}-build-imagebuilder",
        role=role.name,
        policy_arn=pulumi.Output.from_input(build.partition).apply(
            lambda p: managed_policy_arn(p, IMAGE_BUILDER_INSTANCE_POLICY)
        ),
        opts=child,
    )
    if build.package_sha256 is not None:
        aws.iam.RolePolicy(
            f"{name}-build-package",
            role=role.id,
            policy=pulumi.Output.from_input(build.package_bucket_arn).apply(
                lambda arn: policy_json(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "ReadTheNodePackage",
                                "Effect": "Allow",
                                "Action": "s3:GetObject",
                                "Resource": f"{arn}/{build.package_key}",
                            }
                        ],
                    }
                )
            ),
            opts=child,
        )
    profile = aws.iam.InstanceProfile(f"{name}-build-profile", role=role.name, tags=tags, opts=child)
    return aws.imagebuilder.InfrastructureConfiguration(
        f"{name}-build",
        name=f"{cluster}-node-images",
        description=f"gpucluster {cluster}: where the Slurm node images are built",
        instance_profile_name=profile.name,
        instance_types=[build.build_instance_type],
        subnet_id=build.subnet_id,
        security_group_ids=[sg.id],
        instance_metadata_options=aws.imagebuilder.InfrastructureConfigurationInstanceMetadataOptionsArgs(
            http_tokens="required", http_put_response_hop_limit=1
        ),
        terminate_instance_on_failure=True,
        resource_tags=tags,
        tags=tags,
        opts=child,
    )


def _group_image(
    name: str,
    build: ImageBuild,
    group: SlurmGroup,
    infra: aws.imagebuilder.InfrastructureConfiguration,
    child: pulumi.ResourceOptions,
) -> pulumi.Output[str]:
    cluster, tags = build.ctx.cluster, {**build.tags, "gpucluster:node-group": group.name}
    prefix = f"{name}-{group.name}"
    document = pulumi.Output.from_input(build.package_bucket).apply(
        lambda bucket: component_document(
            build.ctx,
            group,
            package_uri=f"s3://{bucket}/{build.package_key}" if build.package_sha256 else None,
            agent_sha256=build.package_sha256,
        )
    )
    component = aws.imagebuilder.Component(
        f"{prefix}-component",
        name=f"{cluster}-{group.name}-node",
        platform="Linux",
        # the cluster's and its bucket's names left out: the same config under another stack name is the same version
        version=semantic_version(
            component_document(
                build.ctx,
                group,
                package_uri=f"s3://@bucket@/{build.package_key}" if build.package_sha256 else None,
                agent_sha256=build.package_sha256,
            ).replace(cluster, "@cluster@")
        ),
        data=document,
        description=component_description(cluster, group),
        tags=tags,
        opts=child,
    )
    base = pulumi.Output.from_input(build.base_images[group.name])
    recipe_version = pulumi.Output.all(base, component.version).apply(lambda v: semantic_version(str(v[0]), str(v[1])))
    recipe = aws.imagebuilder.ImageRecipe(
        f"{prefix}-recipe",
        name=f"{cluster}-{group.name}-node",
        parent_image=base,
        version=recipe_version,
        components=[aws.imagebuilder.ImageRecipeComponentArgs(component_arn=component.arn)],
        description=f"gpucluster {cluster} / {group.name}: the base image with the Slurm node installed",
        tags=tags,
        opts=child,
    )
    distribution = aws.imagebuilder.DistributionConfiguration(
        f"{prefix}-distribution",
        name=f"{cluster}-{group.name}-node",
        distributions=[
            aws.imagebuilder.DistributionConfigurationDistributionArgs(
                region=build.ctx.region,
                ami_distribution_configuration=aws.imagebuilder.DistributionConfigurationDistributionAmiDistributionConfigurationArgs(
                    name=recipe_version.apply(lambda v: f"{cluster}-{group.name}-node-{v}-{{{{ imagebuilder:buildDate }}}}"),
                    description=f"gpucluster {cluster} / {group.name} Slurm node",
                    ami_tags={**tags, "gpucluster:recipe-version": recipe_version, "gpucluster:base-image": base},
                ),
            )
        ],
        tags=tags,
        opts=child,
    )
    image = aws.imagebuilder.Image(
        f"{prefix}-image",
        image_recipe_arn=recipe.arn,
        infrastructure_configuration_arn=infra.arn,
        distribution_configuration_arn=distribution.arn,
        enhanced_image_metadata_enabled=True,
        image_tests_configuration=aws.imagebuilder.ImageImageTestsConfigurationArgs(
            image_tests_enabled=True, timeout_minutes=BUILD_TIMEOUT_MINUTES
        ),
        tags=tags,
        opts=child,
    )
    return image.output_resources.apply(_ami_of)


def _ami_of(resources: Sequence[object]) -> str:
    """The AMI id of an image's output (its one region's)."""
    for resource in resources:
        amis = resource.get("amis") if isinstance(resource, dict) else getattr(resource, "amis", None)
        for ami in amis or []:
            image = ami.get("image") if isinstance(ami, dict) else getattr(ami, "image", None)
            if image:
                return str(image)
    raise ValueError("the Image Builder image produced no AMI")


def build_node_images(parent: pulumi.Resource, name: str, build: ImageBuild) -> dict[str, pulumi.Output[str]]:
    """The baked AMI of each group of ``build`` (none when no group is baked)."""
    if not build.groups:
        return {}
    child = pulumi.ResourceOptions(parent=parent)
    infra = _infrastructure(name, build, child)
    return {g.name: _group_image(name, build, g, infra, child) for g in build.groups}


def slurm_node_images(
    parent: pulumi.Resource,
    name: str,
    args: SlurmBuild,
    ctx: SlurmContext,
    artifact: AgentArtifact,
    partition: pulumi.Input[str],
) -> dict[str, pulumi.Output[str]]:
    """The baked AMI per baked Slurm group of ``args`` (``slurm.images``), built in the first baked group's subnet."""
    groups = [g for g in args.node_groups if g.baked]
    if not groups:
        return {}
    subnets = pulumi.Output.from_input(args.wiring.node_group_subnet_ids[groups[0].name])
    build = ImageBuild(
        ctx=ctx,
        groups=groups,
        base_images={g.name: base_image(parent, g, args.wiring.inputs) for g in groups},
        vpc_id=args.wiring.vpc_id,
        subnet_id=subnets.apply(lambda ids: str(ids[0])),
        build_instance_type=args.slurm.images.build_instance_type,
        package_bucket=artifact.bucket.bucket,
        package_bucket_arn=artifact.bucket.arn,
        package_key=artifact.key,
        package_sha256=artifact.sha256 if needs_package(ctx) else None,
        partition=partition,
        tags=dict(args.wiring.tags),
    )
    return build_node_images(parent, name, build)
